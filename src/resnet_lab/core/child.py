"""The shape every ``*_child`` entry point of the package shares: ``python -m MODULE REQUEST.json RESULT.json``.

A child process reads a JSON request, computes, and writes a JSON result; a failure is written as
``{"error": "Type: first line"}`` (the traceback goes to the child's stderr, which the parent keeps in its
log), so the parent can say it in one line. The child leaves with ``os._exit(0)`` once its result is written:
frameworks' atexit handlers (thread pools, compile caches) can hang or crash at interpreter teardown.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any


def main(module: str, capture: Callable[[dict[str, Any]], dict[str, Any]], argv: list[str] | None = None) -> int:
    """Run ``capture`` on the request file named in ``argv`` and write its result (or the error) to the
    result file; 2 with a usage line on stderr when the arguments are not two paths."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print(f"usage: python -m {module} REQUEST.json RESULT.json", file=sys.stderr)
        return 2
    request = json.loads(Path(argv[0]).read_text())
    try:
        result = capture(request)
    except Exception as exc:  # the parent turns this into one line
        traceback.print_exc()
        result = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:500]}
    Path(argv[1]).write_text(json.dumps(result))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
