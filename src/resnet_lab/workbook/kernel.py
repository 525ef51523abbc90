"""What the runner's kernels do at start-up, so that a shared report holds what the notebook shows and nothing a
reader must skip.

``resnet-lab run`` starts each kernel with ``--IPKernelApp.capture_fd_output=False`` (so the C++ log lines of
TensorFlow, XLA and oneDNN, written to file descriptor 2, go to ``<run>/<notebook>.log`` and not into the
notebook) and ``exec_lines`` running :func:`install`, which sends Python warnings to that log too.
The notebook keeps its own output: prints, tables, plots, and the sentences the package writes about what
the reader should know.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

from resnet_lab.core import style

KERNEL_ARGUMENTS = ["--IPKernelApp.capture_fd_output=False",
                    "--IPKernelApp.exec_lines=import resnet_lab.workbook.kernel as _k; _k.install()"]


def _to_log(message: Any, category: type[Warning], filename: str, lineno: int, file: Any = None,
            line: str | None = None) -> None:
    stream = sys.__stderr__  # the kernel process's own stderr: the notebook's log under the runner
    if stream is not None:
        stream.write(warnings.formatwarning(message, category, filename, lineno, line))
        stream.flush()


def install() -> None:
    """Python warnings go to the kernel's own stderr (the notebook's log) instead of the notebook; every plot
    gets the workbook's style (:func:`resnet_lab.core.style.apply`)."""
    warnings.showwarning = _to_log
    style.apply()
