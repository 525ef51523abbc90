"""Where a notebook puts what it produced, so that every artifact sits beside its provenance.

A notebook calls :func:`prepare_output_dir` once with its ``output_dir`` parameter, writes CSV/JSON/PNG
through the helpers here, and ends with :func:`save_results`, whose ``results.json`` is what tests and later
notebooks read (the papermill/scrapbook pattern, without the extra dependency).
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json
import math
import os
from pathlib import Path
from typing import Any

from resnet_lab.core import provenance
from resnet_lab.core.errors import UsageError

RESULTS_FILE = "results.json"
# The runner writes each notebook's parameters (its cell's defaults with the params file's values over them)
# here, in the notebook's output folder, before executing it; prepare_output_dir records them.
PARAMETERS_FILE = "parameters.json"
# Set by the runner while a notebook runs: a file to append one JSON line to per finished benchmark row
# (see progress()); the runner prints each as a terminal line.
PROGRESS_ENV = "RESNET_LAB_PROGRESS"


def outputs_root() -> Path:
    """The root of run folders and ad-hoc notebook outputs.

    ``$RESNET_LAB_OUTPUTS`` if set (the runner sets it for its kernels), else the checkout's ``outputs/``
    when the package runs from a checkout (so a notebook opened in Lab, whose working directory is
    ``notebooks/``, writes where ``make report`` does), else ``./outputs``.
    """
    if os.environ.get("RESNET_LAB_OUTPUTS"):
        return Path(os.environ["RESNET_LAB_OUTPUTS"])
    checkout = provenance.package_root().parent
    if (checkout / "pyproject.toml").is_file() and (checkout / "notebooks").is_dir():
        return checkout / "outputs"
    return Path("outputs")


def prepare_output_dir(output_dir: str, notebook: str, params: dict[str, Any] | None = None) -> Path:
    """Create (if needed) and return the artifact folder of one notebook execution, with its provenance.

    Args:
        output_dir: the notebook's ``output_dir`` parameter; a relative one lies under :func:`outputs_root`. The
            runner passes ``runs/<run>/<notebook>`` (relative: the executed notebook, its HTML show no machine
            path); empty means a new ``outputs/adhoc/<timestamp>-<notebook>/`` (direct papermill or Lab use).
        notebook: the notebook's name, e.g. ``"00_environment"``.
        params: what to record as the parameters; by default the runner's record of them
            (:data:`PARAMETERS_FILE` in ``output_dir``). A notebook never re-types its parameters: run
            outside the runner, its provenance says that the parameters cell's values were used.
    """
    if output_dir:
        out = Path(output_dir).expanduser()
        out = out if out.is_absolute() else outputs_root() / out
    else:
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        out = outputs_root() / "adhoc" / f"{stamp}-{notebook}"
    out.mkdir(parents=True, exist_ok=True)
    source = "given"
    if params is None and (out / PARAMETERS_FILE).is_file():
        params, source = read_json(out / PARAMETERS_FILE), "resnet-lab run"
    elif params is None:
        source = "not run by resnet-lab run: the parameters cell's values, as edited (see the executed notebook)"
    write_json(out / "provenance.json", provenance.collect(notebook=notebook, params=params, params_source=source))
    return out


def check_out(out: str | os.PathLike) -> Path:
    """``out`` as a Path if it is new or empty; UsageError otherwise (earlier results are never overwritten)."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"--out: '{out}' is not an empty folder; give a new one (earlier results are never "
                         "overwritten)")
    return out


def list_runs(outputs: Path, name: str = "*") -> list[tuple[str, Path, dict[str, Any]]]:
    """Every run folder ``outputs/runs/<stamp>-<name>/`` with a readable provenance.json, oldest first:
    ``(started_at, folder, provenance)``."""
    found = []
    for prov_path in (Path(outputs) / "runs").glob(f"*-{name}/provenance.json" if name != "*" else "*/provenance.json"):
        try:
            prov = read_json(prov_path)
        except (OSError, ValueError):
            continue
        found.append((prov.get("started_at") or "", prov_path.parent, prov))
    return sorted(found, key=lambda r: (r[0], r[1].name))


def jsonable(obj: Any) -> Any:
    """NaN/inf become null (strict JSON); numpy scalars and paths become plain values."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set):
        return [jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalar
        return jsonable(obj.item())
    if hasattr(obj, "tolist"):  # numpy array
        return jsonable(obj.tolist())
    return obj


def write_json(path: str | os.PathLike, obj: Any) -> Path:
    """Write ``obj`` as indented, strict JSON (atomically: a crash never leaves half a file)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(jsonable(obj), indent=2, allow_nan=False) + "\n")
    tmp.replace(path)
    return path


def read_json(path: str | os.PathLike) -> Any:
    return json.loads(Path(path).read_text())


def read_csv(path: str | os.PathLike) -> list[dict[str, str]]:
    """The lines of a CSV this project wrote, as text, checked to be whole: ValueError (naming the file) for
    an empty file, one that does not end with a line break (cut inside its header or a line: every writer
    here ends each line with one) or a line with more or fewer cells than the header. A file cut exactly
    between two lines cannot be told from a shorter one here; readers that have the same rows as JSON
    compare the two (:mod:`resnet_lab.runs.record`)."""
    p = Path(path)
    text = p.read_text()
    if not text.strip():
        raise ValueError(f"{p}: empty")
    if not text.endswith("\n"):
        raise ValueError(f"{p}: cut short (it ends inside a line)")
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader)
    if len(set(header)) != len(header) or not all(header):
        raise ValueError(f"{p}: its header has empty or repeated column names")
    lines = []
    for cells in reader:
        if not cells:
            continue
        if len(cells) != len(header):
            raise ValueError(f"{p}: line {reader.line_num} has {len(cells)} cells, the header {len(header)}")
        lines.append(dict(zip(header, cells, strict=True)))
    return lines


def save_table(out: Path, name: str, df: Any) -> Path:
    """Save a pandas DataFrame as ``<name>.csv`` in ``out``."""
    path = Path(out) / f"{name}.csv"
    df.to_csv(path, index=False)
    return path


def save_figure(out: Path, name: str, fig: Any, dpi: int = 120) -> Path:
    """Save a matplotlib figure as ``<name>.png`` in ``out`` (it also stays inline in the notebook)."""
    path = Path(out) / f"{name}.png"
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    return path


def progress(**event: Any) -> None:
    """Append one event (a finished benchmark row: matrix, i, n, label, ...) to the runner's progress file;
    nothing when no runner is listening."""
    path = os.environ.get(PROGRESS_ENV)
    if not path:
        return
    with open(path, "a") as f:
        f.write(json.dumps(jsonable(event)) + "\n")


def save_results(out: Path, **values: Any) -> None:
    """Merge ``values`` into ``out/results.json``: the notebook's headline results, read by the runner's
    summaries and by tests. Returns nothing, so that a notebook's last line shows nothing."""
    path = Path(out) / RESULTS_FILE
    current = read_json(path) if path.exists() else {}
    current.update(values)
    write_json(path, current)
