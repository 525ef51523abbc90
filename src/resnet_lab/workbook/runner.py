"""Batch runner: execute the notebooks with a params file into a new run folder, as shareable reports.

Everything is validated against the notebooks' own ``parameters`` cells (names and annotated types,
read as ``papermill.inspect_notebook`` reads them, without importing papermill) and the package's checks
before anything runs, so a typo costs half a second, not a run. Each notebook gets ``output_dir`` =
``<run>/<notebook>/`` for its CSV/JSON/PNG, and leaves beside it the executed ``<notebook>.ipynb``,
``<notebook>.html`` (self-contained) and ``<notebook>.report.html`` (code hidden, for sharing).
``<run>/provenance.json`` records commit, params, versions, machine and each notebook's status;
``outputs/index.html`` lists every run, newest first.

:data:`EPILOG` (what ``resnet-lab run --help`` ends with) gives the params file's format and what a run
shows and does on failure or interruption.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import datetime as _dt
import html
import io
import json
import math
import os
import re
import signal
import sys
import threading
import time
import tokenize
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from resnet_lab.core import artifacts, provenance
from resnet_lab.core.choices import check_keys
from resnet_lab.core.errors import UsageError
from resnet_lab.core.paths import check_path, here, shown
from resnet_lab.core.text import one_line, split_top_level
from resnet_lab.report import compare, history
from resnet_lab.workbook import kernel, notebooks, summary

RESERVED = frozenset({"output_dir"})  # set by the runner, never by a params file
TOP_LEVEL_KEYS = frozenset({"name", "description", "defaults", "notebooks", "only", "store"})
# `store:` of a params file: how `resnet-lab store gate` judges a run of it (resnet_lab.runs.gate.GateParams)
STORE_KEYS = {"window": int, "min_runs": int, "min_change_pct": float, "run_min_change_pct": float}
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
DEFAULT_NOTEBOOKS_DIR = "notebooks"
EPILOG = """\
A params file (YAML) names the run and gives the notebooks their parameters:

    name: default                  # the run folder: outputs/runs/<timestamp>-default/
    description: CPU main report   # shown in outputs/index.html
    defaults:                      # given to every notebook that declares the parameter
      batch_size: 32
    notebooks:                     # per-notebook overrides; every notebook in notebooks/ runs
      03_benchmarks:
        steps: 20
    only: [03_benchmarks]          # optional: run just these (default: every notebook in notebooks/)

params/default.yaml is the main job (make report); params/quick.yaml uses tiny sizes (tests, smoke runs: its
numbers are real but never quoted). A bad params file, or a value a notebook cannot take (a negative batch
size, an unknown model or precision, an image too small for the model), is one line before anything runs
and leaves no run folder.

The terminal shows one line per notebook (with the previous run's time as an estimate of what is left) and
one per benchmark row as it finishes; TensorFlow's, XLA's and oneDNN's C++ logs and Python warnings go to
<run>/<notebook>.log (linked from the run page), never into the terminal or a report. A failing notebook is
recorded (its HTML shows the error, its line names the log); the others still run and the command exits 1
naming it. Ctrl-C or SIGTERM stops the kernel and every benchmark worker, keeps the finished notebooks and
marks the run interrupted. outputs/README.md maps what a run folder holds."""


# ------------------------------------------------------------------------------------------ params
@dataclasses.dataclass(frozen=True)
class RunPlan:
    """A validated params file: which notebooks run, in order, with which parameters."""

    name: str
    description: str
    params_file: Path
    raw: dict[str, Any]
    notebooks: dict[str, Path]                 # name -> source .ipynb, in execution order
    parameters: dict[str, dict[str, Any]]      # name -> parameters to inject (output_dir added later)
    resolved: dict[str, dict[str, Any]]        # name -> every parameter it runs with (defaults included)


def discover_notebooks(notebooks_dir: str | os.PathLike) -> dict[str, Path]:
    """Every ``*.ipynb`` in ``notebooks_dir`` (not recursive), sorted by name: ``00_...`` runs first."""
    d = Path(notebooks_dir)
    if not d.is_dir():
        raise UsageError(f"notebooks folder {d} does not exist")
    return {p.stem: p for p in sorted(d.glob("*.ipynb"))}


def declared_parameters(notebook: Path) -> dict[str, dict[str, Any]]:
    """The notebook's parameters cell as ``papermill.inspect_notebook`` reads it: name -> {name,
    inferred_type_name, default, help} (each a string; "None" where a name has no annotation), in the cell's
    order. Read here with :mod:`ast` and :mod:`tokenize` instead: importing papermill (nbformat, jsonschema
    and the IRI grammar it compiles) takes 2 s, and the parameters are checked before anything heavy starts;
    tests/workbook/test_runner.py holds the two readers equal on every notebook."""
    cells = json.loads(Path(notebook).read_text())["cells"]
    cell = next((c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])), None)
    if cell is None:
        return {}
    source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
    comments = {tok.start[0]: tok.string.lstrip("#").strip()
                for tok in tokenize.generate_tokens(io.StringIO(source).readline) if tok.type == tokenize.COMMENT}
    out: dict[str, dict[str, Any]] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            name, annotation = node.target.id, ast.get_source_segment(source, node.annotation)
            if isinstance(node.annotation, ast.Constant) and isinstance(node.annotation.value, str):
                annotation = node.annotation.value  # a quoted annotation ("Optional[int]"), as papermill reads it
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, annotation = node.targets[0].id, "None"
        else:
            continue
        default = ast.get_source_segment(source, node.value)
        if "\n" in default:  # papermill joins a value's lines, each stripped, comments dropped
            default = "".join(line.split("#")[0].strip() for line in default.splitlines())
        out[name] = {"name": name, "inferred_type_name": annotation, "default": default,
                     "help": comments.get(node.end_lineno, "")}
    return out


def resolved_parameters(declared: dict[str, dict[str, Any]], values: dict[str, Any]) -> dict[str, Any]:
    """Every parameter a notebook runs with: its cell's defaults (the literals papermill read) with
    ``values`` over them. A default that is not a literal is recorded as its source text."""
    out: dict[str, Any] = {}
    for name, info in declared.items():
        text = info.get("default")
        try:
            out[name] = ast.literal_eval(text) if text is not None else None
        except (ValueError, SyntaxError):
            out[name] = text
    out.update(values)
    return out


def check_type(value: Any, annotation: str) -> bool:
    """Does ``value`` (from YAML) fit the parameters cell's annotation?

    Understood: int, float (ints accepted), str, bool, list[T], dict[K, V], tuple[...], bare list/dict, and
    Optional[T] (None or a T: a parameter whose None means a default set elsewhere). An unannotated parameter
    (papermill says "None") accepts anything.
    """
    annotation = annotation.strip()
    if annotation in ("None", ""):
        return True
    if m := re.fullmatch(r"Optional\[(.*)\]", annotation):
        return value is None or check_type(value, m.group(1))
    if annotation == "bool":
        return isinstance(value, bool)
    if annotation == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation == "float":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if annotation == "str":
        return isinstance(value, str)
    m = re.fullmatch(r"(list|tuple|dict)\s*(?:\[(.*)\])?", annotation)
    if not m:
        return True  # an annotation we do not model: papermill will inject the value as written
    kind, inner = m.group(1), m.group(2)
    if kind in ("list", "tuple"):
        if not isinstance(value, list | tuple):
            return False
        if not inner:
            return True
        parts = split_top_level(inner)
        item_type = parts[0] if kind == "list" or (len(parts) == 2 and parts[1] == "...") else None
        if item_type is None:
            return len(parts) == len(value) and all(check_type(v, t) for v, t in zip(value, parts, strict=True))
        return all(check_type(v, item_type) for v in value)
    if not isinstance(value, dict):
        return False
    if not inner:
        return True
    kt, vt = ([*split_top_level(inner), "None", "None"])[:2]
    return all(check_type(k, kt) and check_type(v, vt) for k, v in value.items())


def load_plan(
    params_file: str | os.PathLike,
    notebooks_dir: str | os.PathLike = DEFAULT_NOTEBOOKS_DIR,
    only: Sequence[str] | None = None,
) -> RunPlan:
    """Read and validate a params file against the notebooks. Raises :class:`UsageError` (one line)."""
    import yaml

    path = Path(params_file)
    if not path.is_file():
        raise UsageError(f"params file {path} does not exist")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
        problem = getattr(e, "problem", None) or one_line(e)
        raise UsageError(f"{path}: invalid YAML{at}: {problem}") from None
    if not isinstance(raw, dict):
        raise UsageError(f"{path}: expected a mapping with keys {sorted(TOP_LEVEL_KEYS)}, got {type(raw).__name__}")
    check_keys(str(path), raw, sorted(TOP_LEVEL_KEYS))
    name = raw.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise UsageError(f"{path}: 'name' must be a short name of letters, digits, '.', '_' or '-', got {name!r}")
    description = raw.get("description") or ""
    defaults = raw.get("defaults") or {}
    overrides = raw.get("notebooks") or {}
    for key, value in (("defaults", defaults), ("notebooks", overrides)):
        if not isinstance(value, dict):
            raise UsageError(f"{path}: '{key}' must be a mapping, got {type(value).__name__}")

    available = discover_notebooks(notebooks_dir)
    if not available:
        raise UsageError(f"no notebooks (*.ipynb) in {notebooks_dir}")
    store_section = raw.get("store") or {}
    if not isinstance(store_section, dict) or any(k not in STORE_KEYS or type(v) is not STORE_KEYS[k]
                                                  for k, v in store_section.items()):
        kinds = ", ".join(f"{k} ({t.__name__})" for k, t in STORE_KEYS.items())
        raise UsageError(f"{path}: 'store' must be a mapping of {kinds}, got {store_section!r}")
    file_only = raw.get("only")
    if file_only is not None and (not isinstance(file_only, list) or not all(isinstance(n, str) for n in file_only)):
        raise UsageError(f"{path}: 'only' must be a list of notebook names, got {file_only!r}")
    for nb in list(overrides) + list(only or []) + list(file_only or []):
        if nb not in available:
            raise UsageError(f"{path}: unknown notebook {nb!r}; notebooks are: {', '.join(available)}")
    only = only or file_only  # the command line's --only wins over the file's
    selected = {k: v for k, v in available.items() if not only or k in only}

    parameters: dict[str, dict[str, Any]] = {}
    resolved: dict[str, dict[str, Any]] = {}
    used_defaults: set[str] = set()
    for nb, nb_path in selected.items():
        declared = declared_parameters(nb_path)
        nb_over = overrides.get(nb) or {}
        if not isinstance(nb_over, dict):
            raise UsageError(f"{path}: notebooks.{nb} must be a mapping of parameters, got {type(nb_over).__name__}")
        values: dict[str, Any] = {}
        for key, value in defaults.items():
            if key in declared:
                values[key] = value
                used_defaults.add(key)
        for key, value in nb_over.items():
            if key not in declared:
                allowed = ", ".join(k for k in declared if k not in RESERVED)
                raise UsageError(f"{path}: notebooks.{nb}.{key}: unknown parameter; {nb} takes: {allowed}")
            values[key] = value
        for key, value in values.items():
            if key in RESERVED:
                raise UsageError(f"{path}: '{key}' is set by the runner and cannot be given in a params file")
            annotation = declared[key]["inferred_type_name"]
            if not check_type(value, annotation):
                where = f"notebooks.{nb}.{key}" if key in nb_over else f"defaults.{key}"
                raise UsageError(f"{path}: {where}: expected {annotation}, got {type(value).__name__} {value!r}")
        parameters[nb] = values
        resolved[nb] = resolved_parameters(declared, values)
        try:  # the package's own validators: ranges, choices, model names, sizes against the model
            notebooks.check(nb, resolved[nb])
        except UsageError as e:
            where = "notebooks." + nb if nb in overrides else f"{nb} (its parameters cell or defaults)"
            raise UsageError(f"{path}: {where}: {e}") from None
    if not only:
        unused = set(defaults) - used_defaults
        if unused:
            raise UsageError(f"{path}: defaults {sorted(unused)} are not a parameter of any notebook")
    return RunPlan(name, description, path, raw, selected, parameters, resolved)


# ------------------------------------------------------------------------------------------- HTML
def export_html(executed: Path, html_path: Path, hide_code: bool = False, summary_text: str | None = None) -> Path:
    """Self-contained HTML of an executed notebook (plots are inline data URIs); optionally code-hidden, and
    with ``summary_text`` (the notebook's answer, :func:`resnet_lab.workbook.summary.summarize`) as a
    "Summary" section right under its title."""
    import nbformat
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="lab", embed_images=True)
    if hide_code:
        exporter.exclude_input = True
        exporter.exclude_input_prompt = True
        exporter.exclude_output_prompt = True
    nb = nbformat.read(executed, as_version=4)
    if summary_text:
        nb.cells.insert(1, nbformat.v4.new_markdown_cell(f"{summary.SUMMARY_HEADING}\n\n{summary_text}"))
    body, _ = exporter.from_notebook_node(nb)
    html_path.write_text(body)
    return html_path


def _comparison_cell(run_dir: Path, rel: str) -> str:
    """The run's comparison with the one before it (notebook 05's headline), linked to its report."""
    path = run_dir / compare.NOTEBOOK / "comparison.json"
    try:
        result = artifacts.read_json(path)
    except (OSError, ValueError):
        return ""
    cls = "failed" if result.get("regressions") else "ok"
    return (f'<a class="{cls}" href="{rel}/{compare.NOTEBOOK}.report.html">'
            f"{html.escape(compare.headline(result))}</a>")


def _store_cell(run_dir: Path, rel: str) -> str:
    """The run against the last runs of its host kind and params in the results store (``store_gate.json``):
    its verdict, the MDE its rows reach and the commits of the window."""
    try:
        result = artifacts.read_json(run_dir / STORE_GATE)
    except (OSError, ValueError):
        return ""
    cls = {"regressed": "failed", "improved": "ok", "stable": "ok"}.get(result.get("verdict"), "other")
    commits = ", ".join(html.escape((c or "?")[:7]) for c in result.get("commits") or [])
    return (f'<a class="{cls}" href="{rel}/{STORE_GATE}">{html.escape(result.get("summary") or "")}</a>'
            + (f"<br><small>window commits: {commits}</small>" if commits else ""))


HISTORY_DIR = "history"  # outputs/history/: the history the index shows, rewritten with it


def _history_section(outputs: Path) -> str:
    """The headline speeds over every run (:mod:`resnet_lab.runs.history`): one line per configuration and host
    kind, linked to its figure (``outputs/history/``), and the folders that could not be read."""
    result = history.history(outputs)
    if not result["configurations"] and not result["skipped"]:
        return ""
    history.write(outputs / HISTORY_DIR, result, fresh=False)
    lines = []
    for c in result["configurations"]:
        for row in history.table_rows({"configurations": [c]}):  # one per host kind
            lines.append(f'<tr><td><a href="{HISTORY_DIR}/{html.escape(c["figure"])}">'
                         f'{html.escape(row["configuration"])}</a></td><td>{html.escape(row["host kind"])}</td>'
                         f'<td>{row["runs"]}</td><td>{html.escape(row["last img/s"])}</td>'
                         f'<td>{html.escape(row["change points"])}</td></tr>')
    skipped = "".join(f"<li>skipped <code>{html.escape(x['folder'])}</code>: {html.escape(x['reason'])}</li>"
                      for x in result["skipped"])
    table = ("<table><tr><th>configuration</th><th>host kind</th><th>runs</th><th>last img/s (95 %)</th>"
             "<th>change points</th></tr>" + "".join(lines) + "</table>") if lines else ""
    return (f'<h2>Speed history</h2>\n<p>The headline configurations of notebook 03 over every run, one series per '
            f'host kind (a change of host is where a series ends, never a change point); change points by '
            f'{html.escape(result["method"]["change_points"])}. <a href="{HISTORY_DIR}/history.md">history.md</a> · '
            f'<a href="{HISTORY_DIR}/history.json">history.json</a></p>\n{table}'
            + (f"<ul>{skipped}</ul>" if skipped else "") + "\n")


def write_index(outputs: Path) -> Path:
    """``outputs/index.html``: every run folder with a provenance.json, newest first, then the speed history."""
    rows = artifacts.list_runs(outputs)[::-1]  # newest first
    lines = []
    for started, run_dir, prov in rows:
        rel = run_dir.relative_to(outputs).as_posix()
        git = prov.get("git") or {}
        commit = (git.get("commit") or "?")[:10] + ("+dirty" if git.get("dirty") else "")
        links = []
        for nb in prov.get("notebooks", []):
            cls = {"ok": "ok", "failed": "failed"}.get(nb.get("status"), "other")
            took = f", {nb['seconds'] / 60:.1f} min" if nb.get("seconds") is not None else ""
            links.append(
                f'<span class="{cls}">{html.escape(nb["name"])}: '
                f'<a href="{rel}/{nb["name"]}.report.html">report</a> · '
                f'<a href="{rel}/{nb["name"]}.html">with code</a> · '
                f'<a href="{rel}/{nb["name"]}.ipynb">ipynb</a> · '
                f'<a href="{rel}/{nb["name"]}/">files</a> · '
                f'<a href="{rel}/{nb["name"]}.log">log</a> ({html.escape(str(nb.get("status")))}{took})</span>'
            )
        status = prov.get("status", "?")
        compared = "<br>".join(c for c in (_comparison_cell(run_dir, rel), _store_cell(run_dir, rel)) if c)
        figures = "<br>".join(f"{html.escape(k)}: <b>{html.escape(str(v))}</b>"
                              for k, v in summary.headline_figures(run_dir).items() if v is not None)
        description = html.escape(prov.get("description") or "")
        cpu_model = html.escape((prov.get("cpu") or {}).get("model") or "")
        lines.append(
            "<tr>"
            f'<td><a href="{rel}/index.html">{html.escape(run_dir.name)}</a><br><small>{description}</small></td>'
            f'<td class="{html.escape(status)}">{html.escape(status)}</td><td>{figures}</td>'
            f"<td>{html.escape(started)}</td><td><code>{html.escape(commit)}</code></td>"
            f"<td>{html.escape(prov.get('host') or '?')}<br><small>{cpu_model}</small></td>"
            f"<td>{'<br>'.join(links)}</td><td>{compared}</td>"
            f'<td><a href="{rel}/provenance.json">provenance</a></td></tr>'
        )
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>resnet-lab runs</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; }}
table {{ border-collapse: collapse; }} td, th {{ border: 1px solid #ccc; padding: .4em .6em; vertical-align: top; }}
.ok {{ color: #17692b; }} .failed, .interrupted {{ color: #b00020; font-weight: bold; }}
.running, .other {{ color: #8a6d00; }}
</style></head><body>
<h1>resnet-lab runs</h1>
<p>{len(rows)} run(s), newest first. Generated {html.escape(provenance.now_iso())} by <code>resnet-lab run</code>.</p>
<table><tr><th>run</th><th>status</th><th>headline figures</th><th>started (UTC)</th><th>commit</th><th>host</th>
<th>notebooks</th><th>against the run before; against the last runs of its host kind (store)</th><th></th></tr>
{chr(10).join(lines)}
</table>
{_history_section(outputs)}</body></html>
"""
    path = outputs / "index.html"
    path.write_text(page)
    return path


# -------------------------------------------------------------------------------------------- run
@dataclasses.dataclass
class RunResult:
    run_dir: Path
    statuses: dict[str, str]                   # notebook -> "ok" | "failed"
    errors: dict[str, str]                     # notebook -> one-line reason

    @property
    def ok(self) -> bool:
        return all(s == "ok" for s in self.statuses.values())


def new_run_dir(outputs: Path, name: str) -> Path:
    """A fresh ``outputs/runs/<timestamp>-<name>/``; never an existing folder."""
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = outputs / "runs" / f"{stamp}-{name}"
    for i in range(1, 1000):
        candidate = base if i == 1 else base.with_name(f"{base.name}-{i}")
        try:
            candidate.mkdir(parents=True, exist_ok=False)
            return candidate
        except FileExistsError:
            continue
    raise RuntimeError(f"could not create a new run folder next to {base}")


def _one_line(exc: BaseException) -> str:
    """A failed notebook's error as one line: the cell's exception where papermill names it (``ename``, its
    ``evalue`` on one line), else :func:`resnet_lab.core.text.one_line`."""
    if getattr(exc, "ename", None):
        return f"{exc.ename}: {' '.join(str(getattr(exc, 'evalue', '') or '').split())}"[:500]
    return one_line(exc)


class _Terminal:
    """The runner's own view of the terminal while a notebook runs with fds 1 and 2 sent to its log.

    Everything a notebook's kernel and its worker processes write at the C level (TensorFlow's and XLA's
    logs, Jupyter's transport warnings) goes to ``<run>/<notebook>.log``; the runner's progress lines go
    to the terminal through copies of the original descriptors.
    """

    def __init__(self) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        self.out = os.fdopen(os.dup(1), "w", buffering=1)
        self.saved = (os.dup(1), os.dup(2))

    def say(self, line: str) -> None:
        self.out.write(line + "\n")
        self.out.flush()

    @contextlib.contextmanager
    def into(self, log_path: Path):
        sys.stdout.flush()
        sys.stderr.flush()
        with open(log_path, "a") as log:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            try:
                yield
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os.dup2(self.saved[0], 1)
                os.dup2(self.saved[1], 2)

    def close(self) -> None:
        for fd in self.saved:
            os.close(fd)
        self.out.close()


def progress_line(notebook: str, event: dict[str, Any]) -> str:
    """One finished benchmark configuration, as the terminal shows it, with what is left of its matrix."""
    ips = event.get("images_per_sec")
    what = f"{ips:.2f} img/s" if isinstance(ips, int | float) else str(event.get("status"))
    if event.get("same_run_as"):
        what += f" (same run as {event['same_run_as']})"
    left = ""
    done, n, elapsed = event.get("i", 0), event.get("n", 0), event.get("elapsed_s") or 0.0
    if 0 < done < n and elapsed > 0:
        left = f"; ~{elapsed / done * (n - done) / 60:.1f} min left in {event.get('matrix')}"
    label, mode = event.get("label") or "", event.get("mode") or ""
    name = label if label.endswith(mode) else f"{label} {mode}".strip()
    return (f"  {notebook} {event.get('matrix')} [{done}/{n}] {name} b{event.get('batch_size')}: {what} "
            f"({event.get('wall_s') or 0:.0f} s){left}")


def _tail(path: Path, notebook: str, terminal: _Terminal, stop: threading.Event) -> None:
    """Print each JSON line appended to ``path`` as a progress line until ``stop`` (then drain)."""
    pos = 0
    while True:
        done = stop.is_set()
        if path.exists():
            with open(path) as f:
                f.seek(pos)
                for line in f:
                    if not line.endswith("\n"):
                        break
                    pos += len(line.encode())
                    try:
                        terminal.say(progress_line(notebook, json.loads(line)))
                    except ValueError:
                        continue
        if done:
            return
        stop.wait(0.5)


def previous_seconds(outputs: Path, name: str, exclude: Path) -> dict[str, float]:
    """Each notebook's seconds in the newest finished earlier run of the same params name (an estimate)."""
    for _, folder, prov in reversed(artifacts.list_runs(outputs, name)):
        times = {n["name"]: n["seconds"] for n in prov.get("notebooks", [])
                 if n.get("status") == "ok" and n.get("seconds")}
        if folder != exclude and times:
            return times
    return {}


def _descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (children first found by /proc's parent ids), deepest last."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def stop_children() -> list[int]:
    """Kill every process this one started, and theirs (kernels, benchmark workers in their own sessions)."""
    pids = _descendants(os.getpid())
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return pids


def run_notebooks(
    params_file: str | os.PathLike,
    out: str | os.PathLike | None = None,
    only: Sequence[str] | None = None,
    notebooks_dir: str | os.PathLike = DEFAULT_NOTEBOOKS_DIR,
    progress: bool = True,
    kernel_name: str = "python3",
) -> RunResult:
    """Validate ``params_file``, then execute each notebook into a new run folder.

    Args:
        params_file: the YAML params file (see module doc).
        out: the outputs root (default ``$RESNET_LAB_OUTPUTS`` or ``./outputs``); the run folder is
            ``<out>/runs/<timestamp>-<name>/`` and the index ``<out>/index.html``.
        only: run just these notebooks (names without ``.ipynb``).
        notebooks_dir: where the source notebooks are.
        progress: one terminal line per notebook started and finished and per benchmark configuration
            measured inside one, with estimates of what is left; the notebooks' own output (and every C++
            log line) goes to ``<run>/<notebook>.log`` either way.
        kernel_name: Jupyter kernel; ``python3`` is this environment's own interpreter.

    Returns:
        A :class:`RunResult`; a failing notebook does not stop the others. Ctrl-C or SIGTERM stops the
        kernel and every worker process, keeps the finished notebooks and marks the run ``interrupted``.
    """
    plan = load_plan(params_file, notebooks_dir, only)  # raises before anything is created
    outputs = (Path(out) if out else artifacts.outputs_root()).resolve()
    run_dir = new_run_dir(outputs, plan.name)
    (run_dir / "params.yaml").write_text(plan.params_file.read_text())
    before = previous_seconds(outputs, plan.name, run_dir)
    prov = provenance.collect(
        run=run_dir.name, description=plan.description, params_file=str(plan.params_file),
        params=plan.raw, started_at=provenance.now_iso(), finished_at=None, status="running",
        notebooks=[{"name": nb, "status": "pending", "parameters": plan.resolved[nb]} for nb in plan.notebooks],
    )
    run = _Run(plan, outputs, run_dir, prov, artifacts.write_json(run_dir / "provenance.json", prov), _Terminal(),
               progress, kernel_name, before)
    write_index(outputs)
    t_run = time.perf_counter()
    try:
        with _kernel_environment(run_dir, outputs), _signals_stop_children(run.stopped):
            run.all_notebooks()
    finally:
        run.finish(time.perf_counter() - t_run)
    return RunResult(run_dir, run.statuses, run.errors)


STORE_GATE = "store_gate.json"  # <run>/: the run against the last runs of its host kind and params in the store


def push_to_store(run_dir: Path, outputs: Path, store_params: dict[str, Any] | None = None) -> tuple[str, str | None]:
    """A finished run into the results store (``outputs/store.sqlite``, or ``$RESNET_LAB_STORE``: a team's), as
    ``resnet-lab store push`` does, then judged there against the last runs of its host kind and params
    (:func:`resnet_lab.runs.gate.gate`, ``store_params``: the params file's ``store:`` section), the result in
    ``<run>/store_gate.json``; the two lines to print. A store that cannot be reached costs the run nothing: the
    line says so, and ``resnet-lab store push`` adds it later."""
    from resnet_lab.runs import gate, store

    verdict = None
    try:
        opened = store.open_store(None, outputs)
        try:
            store.push_records(opened, outputs)  # a new store starts with the committed records (once)
            done = store.push(opened, run_dir)
            judged = gate.gate(opened, str(run_dir), gate.GateParams(**(store_params or {})).check())
            verdict = f"store gate: {gate.summary(judged)} (exit {gate.exit_code(judged)})"
            artifacts.write_json(run_dir / STORE_GATE, {**judged, "summary": verdict})
        finally:
            opened.close()
    except Exception as e:  # a finished run is never lost over its store: the line says what to do
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        return f"store: not pushed ({first}); later: resnet-lab store push {shown(run_dir, outputs.parent)}", None
    what = f"{done['rows']} rows" if done["added"] else "already there"
    # the lines go on the run's page too: a path from the outputs root's parent, never the machine's
    where = shown(outputs / store.DEFAULT_FILE, outputs.parent) if opened.url.startswith("sqlite") else opened.shown
    return f"store: {done['run'].split('@')[0]} -> {where} ({what})", verdict


@contextlib.contextmanager
def _kernel_environment(run_dir: Path, outputs: Path):
    """The variables the notebooks' kernels read while the run lasts; the caller's values come back after."""
    keys = ("RESNET_LAB_RUN_DIR", "RESNET_LAB_OUTPUTS", "PYTHONUNBUFFERED", "TQDM_DISABLE", artifacts.PROGRESS_ENV)
    saved_env = {k: os.environ.get(k) for k in keys}
    # TQDM_DISABLE: the runner prints each finished configuration itself; a bar's text has no place in a report
    os.environ.update(RESNET_LAB_RUN_DIR=str(run_dir), RESNET_LAB_OUTPUTS=str(outputs), PYTHONUNBUFFERED="1",
                      TQDM_DISABLE="1")
    try:
        yield
    finally:
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def _signals_stop_children(stopped: list[int]):
    """SIGINT and SIGTERM kill every process the run started (adding their ids to ``stopped``), then
    interrupt it as Ctrl-C does; the previous handlers come back after."""
    def interrupt(signum: int, frame: Any) -> None:  # before papermill unwinds: its kernel's children live
        stopped.extend(stop_children())
        raise KeyboardInterrupt(f"signal {signum}")

    main = threading.current_thread() is threading.main_thread()  # signals can be caught there only
    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, signal.SIGTERM)} if main else {}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@dataclasses.dataclass
class _Run:
    """One :func:`run_notebooks` while it executes: its plan, folder, provenance record and terminal."""

    plan: RunPlan
    outputs: Path
    run_dir: Path
    prov: dict[str, Any]
    prov_path: Path
    terminal: _Terminal
    progress: bool
    kernel_name: str
    before: dict[str, float]  # each notebook's seconds in the previous run of the same params: the estimates
    statuses: dict[str, str] = dataclasses.field(default_factory=dict)
    errors: dict[str, str] = dataclasses.field(default_factory=dict)
    stopped: list[int] = dataclasses.field(default_factory=list)  # processes killed on an interrupt
    current: int | None = None  # the notebook running now

    def say(self, line: str) -> None:
        if self.progress:
            self.terminal.say(line)

    def all_notebooks(self) -> None:
        """Each notebook in turn; an interrupt stops everything the run started and keeps what finished."""
        try:
            self.say(f"run {self.run_dir.name}: {len(self.plan.notebooks)} notebook(s) -> {here(self.run_dir)}")
            for i, (nb, src) in enumerate(self.plan.notebooks.items()):
                self.current = i
                self.notebook(i, nb, src)
                self.current = None
        except BaseException:  # Ctrl-C, SIGTERM: stop everything this run started, keep what finished
            self.interrupted()
            raise

    def notebook(self, i: int, nb: str, src: Path) -> None:
        """Execute one notebook, record its status, time and summary, export its HTML reports."""
        n = len(self.plan.notebooks)
        params, everything = self._write_parameters(nb)
        left = sum(self.before.get(name, math.nan) for name in list(self.plan.notebooks)[i:])
        hint = f"; last time {self.before[nb] / 60:.1f} min" if nb in self.before else ""
        hint += f", ~{left / 60:.0f} min left in the run" if left == left else ""
        self.say(f"[{i + 1}/{n}] {nb} ...{hint}")
        self.prov["notebooks"][i].update(status="running")
        artifacts.write_json(self.prov_path, self.prov)
        t0 = time.perf_counter()
        executed = self.run_dir / f"{nb}.ipynb"
        self._execute(nb, src, executed, params)
        seconds = time.perf_counter() - t0
        entry = self.prov["notebooks"][i]
        entry.update(status=self.statuses[nb], seconds=round(seconds, 2), error=self.errors.get(nb),
                     parameters=everything, injected=params, ipynb=executed.name, log=f"{nb}.log")
        ok = self.statuses[nb] == "ok"
        entry["summary"] = summary.summarize(nb, summary.read_results(self.run_dir, nb)) if ok else None
        if executed.exists():
            self._export_reports(nb, executed, entry)
        artifacts.write_json(self.prov_path, self.prov)
        summary.write_run_page(self.run_dir, self.prov)
        what = "ok" if ok else f"FAILED: {self.errors[nb]} (log: {here(self.run_dir / (nb + '.log'))})"
        self.say(f"[{i + 1}/{n}] {nb} {what} in {seconds / 60:.1f} min")

    def _write_parameters(self, nb: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """What papermill injects, and every parameter the notebook runs with (written for it to record)."""
        # relative to the outputs root (the kernel's $RESNET_LAB_OUTPUTS, artifacts.prepare_output_dir): the executed
        # notebook and its HTML show the injected cell, and a shared report never holds the machine's paths
        params = dict(self.plan.parameters[nb], output_dir=str((self.run_dir / nb).relative_to(self.outputs)))
        everything = dict(self.plan.resolved[nb], output_dir=params["output_dir"])
        (self.run_dir / nb).mkdir(parents=True, exist_ok=True)
        artifacts.write_json(self.run_dir / nb / artifacts.PARAMETERS_FILE, everything)  # read by the notebook
        return params, everything

    def _execute(self, nb: str, src: Path, executed: Path, params: dict[str, Any]) -> None:
        """papermill with the notebook's output in its log and its benchmark rows as progress lines."""
        import papermill

        events = self.run_dir / nb / "progress.jsonl"
        os.environ[artifacts.PROGRESS_ENV] = str(events)
        stop = threading.Event()
        tail = threading.Thread(target=_tail, args=(events, nb, self.terminal, stop), daemon=True)
        if self.progress:
            tail.start()
        try:
            with self.terminal.into(self.run_dir / f"{nb}.log"):
                papermill.execute_notebook(
                    str(src), str(executed), parameters=params, kernel_name=self.kernel_name,
                    progress_bar=False, cwd=str(src.parent.resolve()), report_mode=False,
                    extra_arguments=kernel.KERNEL_ARGUMENTS,
                )
            self.statuses[nb] = "ok"
        except Exception as e:  # a failing notebook is recorded, the others still run
            self.statuses[nb] = "failed"
            self.errors[nb] = _one_line(e)
        finally:
            stop.set()
            if self.progress:
                tail.join()

    def _export_reports(self, nb: str, executed: Path, entry: dict[str, Any]) -> None:
        """``<nb>.html`` and the code-hidden ``<nb>.report.html``; a failed export is recorded, not raised."""
        for hide_code, suffix in ((False, ".html"), (True, ".report.html")):
            try:
                with self.terminal.into(self.run_dir / f"{nb}.log"):
                    export_html(executed, self.run_dir / f"{nb}{suffix}", hide_code=hide_code,
                                summary_text=entry["summary"])
            except Exception as e:
                entry.setdefault("html_errors", []).append(_one_line(e))

    def interrupted(self) -> None:
        """Stop every process the run started; mark the running notebook interrupted, the rest not run."""
        self.stopped.extend(stop_children())
        self.prov["status"] = "interrupted"
        self.prov["stopped_processes"] = len(set(self.stopped))
        if self.current is not None:
            self.prov["notebooks"][self.current].update(status="interrupted", seconds=None,
                                                        error="interrupted (Ctrl-C or SIGTERM)")
        for entry in self.prov["notebooks"]:
            if entry["status"] == "pending":
                entry["status"] = "not run"
        self.say(f"interrupted: {len(set(self.stopped))} process(es) stopped; finished notebooks kept in "
                 f"{here(self.run_dir)}")

    def finish(self, seconds: float) -> None:
        """The run's end time and status in its provenance, its page and the index; the terminal released."""
        prov = self.prov
        prov["finished_at"] = provenance.now_iso()
        prov["seconds"] = round(seconds, 2)
        if prov["status"] == "running":
            prov["status"] = "ok" if all(s == "ok" for s in self.statuses.values()) else "failed"
        artifacts.write_json(self.prov_path, prov)
        if prov["status"] == "ok":  # a finished run goes into the results store (a failed one is not judged)
            prov["store"], prov["store_gate"] = push_to_store(self.run_dir, self.outputs,
                                                              (prov.get("params") or {}).get("store"))
            artifacts.write_json(self.prov_path, prov)
            self.say(prov["store"])
            if prov["store_gate"]:
                self.say(prov["store_gate"])
        summary.write_run_page(self.run_dir, prov)
        write_index(self.outputs)
        self.terminal.close()


# -------------------------------------------------------------------------------------------- CLI
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("params", help="params YAML file, e.g. params/default.yaml")
    p.add_argument("--out", default=None, help="outputs root (default: ./outputs); the run goes to OUT/runs/")
    p.add_argument("--only", nargs="+", metavar="NOTEBOOK", help="run only these notebooks (e.g. 00_environment)")
    p.add_argument("--notebooks", default=DEFAULT_NOTEBOOKS_DIR, help="folder of the source notebooks")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")


def run(args: argparse.Namespace) -> int:
    check_path("params", args.params, "file", optional=False)
    check_path("--out", args.out, "out-dir")
    check_path("--notebooks", args.notebooks, "dir")
    only = [n.removesuffix(".ipynb") for n in args.only] if args.only else None
    result = run_notebooks(args.params, args.out, only, args.notebooks, progress=not args.no_progress)
    print(f"run folder: {here(result.run_dir)}")
    for nb, status in result.statuses.items():
        print(f"  {status:6s} {nb}" + (f"  ({result.errors[nb]})" if nb in result.errors else ""))
    print(f"index: {here(result.run_dir.parent.parent / 'index.html')}")
    if not result.ok:
        failed = [nb for nb, s in result.statuses.items() if s != "ok"]
        print(f"resnet-lab run: {len(failed)} notebook(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0
