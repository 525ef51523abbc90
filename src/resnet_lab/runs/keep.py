"""``resnet-lab record RUN_DIR``: keep a finished ``make report`` as its host kind's committed record.

A host kind without a record (:func:`resnet_lab.runs.record.reference_for` finds none) gets one in
``outputs/reference/hosts/<slug>/`` (:meth:`~resnet_lab.runs.record.HostKind.slug`): what ``compare`` and 05 judge
that kind's runs against and what 03 plans that kind's report by. A kind that has one gets the run as the record's
``timing/`` folder (:data:`resnet_lab.runs.budget.TIMING_DIR`): newer planning costs, the record's figures left as
they were measured. Everything is checked before a file is copied, one line per refusal:

- the folder is a run folder (``provenance.json``) whose every notebook finished ``ok``;
- it ran ``params/default.yaml`` (``params.name`` "default"): a quick run's tiny sizes would plan and judge nothing;
- its GEMM peak is a full measurement on a quiet host (:func:`resnet_lab.runs.record.measured_peaks`): without one
  the record would have no kind to be found by;
- every file a record needs is there (:data:`REQUIRED`);
- the destination does not hold a record already: ``--force`` replaces a ``timing/`` folder, and over a record's
  folder (one of the same name whose kind differs, e.g. by its peak) writes the run's files over those of the same
  name and leaves the rest; git keeps what was there.

The provenance is copied with the machine's paths made relative to the checkout (a record is shared), and a new
record gets a README stating its source (run, commit, times, host, peak) for its author to complete.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from resnet_lab.core import artifacts
from resnet_lab.core.errors import UsageError
from resnet_lab.core.paths import check_path
from resnet_lab.core.paths import here as shown
from resnet_lab.runs import budget, record

EPILOG = """\
  resnet-lab record outputs/runs/20261206-050043-default            # this host kind's record, or its timing/
  resnet-lab record outputs/runs/20261206-050043-default --dry-run  # what would be copied where
Then `git add` the folder it names, and say in its README what the rows show."""

REQUIRED = ("provenance.json", "00_environment/peak.json", "03_benchmarks/bench.csv",
            "03_benchmarks/wall_breakdown.csv")
# run folder file (a glob) -> the folder in the record it goes to ("" the record itself). A file that is not there is
# left out (a report without the per-layer section has no layers.json); REQUIRED ones are checked first.
RECORD_FILES: tuple[tuple[str, str], ...] = (
    ("provenance.json", ""), ("00_environment/peak.json", ""),
    ("03_benchmarks/bench.csv", ""), ("03_benchmarks/bench_*.json", ""), ("03_benchmarks/compilers.csv", ""),
    ("03_benchmarks/engine_knobs.csv", ""), ("03_benchmarks/engine_sources.csv", ""),
    ("01_model_selection/op_inventory.csv", ""),
    ("03_benchmarks/layers*.json", "layers"), ("03_benchmarks/layer_*.csv", "layers"),
    ("03_benchmarks/layer_heatmap.png", "layers"),
    *((f"03_benchmarks/{n}", budget.TIMING_DIR) for n in ("wall_breakdown.csv", "plan.csv", "plan_vs_measured.csv")),
    ("00_environment/peak.json", budget.TIMING_DIR), ("provenance.json", budget.TIMING_DIR),
    ("03_benchmarks/bench.csv", budget.TIMING_DIR),
)
# what a record's timing/ folder holds: the planning costs of its kind (resnet_lab.runs.budget)
TIMING_FILES = tuple((src, "") for src, dest in RECORD_FILES if dest == budget.TIMING_DIR)
README = "README.md"


def _refuse(run: Path, why: str) -> UsageError:
    return UsageError(f"'{shown(run)}' cannot be kept as a record: {why}")


def check_run(run: Path) -> dict[str, Any]:
    """The run's provenance if it may become a record; UsageError (one line) saying why not."""
    if not run.is_dir() or not (run / "provenance.json").is_file():
        raise _refuse(run, "not a run folder (it has no provenance.json; give outputs/runs/<run>)")
    prov = record.read_provenance(run)
    unfinished = [f"{n.get('name')} {n.get('status')}" for n in prov.get("notebooks") or [] if n.get("status") != "ok"]
    if prov.get("status") != "ok" or unfinished or not prov.get("notebooks"):
        raise _refuse(run, f"the run did not finish ok (status {prov.get('status')!r}"
                      + (f"; {', '.join(unfinished)}" if unfinished else "") + "): keep a report that ran whole")
    name = (prov.get("params") or {}).get("name")
    if name != "default":
        raise _refuse(run, f"it ran params '{name}', not params/default.yaml: a record is `make report`'s sizes")
    missing = [f for f in REQUIRED if not (run / f).is_file()]
    if missing:
        raise _refuse(run, f"it lacks {', '.join(missing)} (a record needs {', '.join(REQUIRED)})")
    try:
        peaks = record.measured_peaks(run)
    except ValueError as exc:
        raise _refuse(run, str(exc).splitlines()[0]) from exc
    if not peaks:
        raise _refuse(run, "its GEMM peak (00_environment/peak.json) is not a full measurement on a quiet host: "
                      "run `make report` again with nothing else running")
    return prov


def destination(run: Path, reference: Path) -> tuple[Path, str]:
    """Where ``run`` goes under ``reference`` (``outputs/reference``) and as what: ``("…/hosts/<slug>", "record")``
    for a kind without a record, ``("<its record>/timing", "timing")`` for one that has one."""
    kind = record.kind_of(run)
    have = record.reference_for(reference, kind) if reference.is_dir() else None
    if have is not None:
        return have / budget.TIMING_DIR, "timing"
    return reference / record.HOSTS_DIR / kind.slug(), "record"


def files_to_copy(run: Path, dest: Path, role: str) -> list[tuple[Path, Path]]:
    """(source, target) pairs: the record's files (:data:`RECORD_FILES`) or a timing folder's (:data:`TIMING_FILES`)."""
    pairs = []
    for pattern, sub in RECORD_FILES if role == "record" else TIMING_FILES:
        for src in sorted(run.glob(pattern)):
            pairs.append((src, dest / sub / src.name))
    return pairs


def portable(prov: Mapping[str, Any], root: str | None) -> Any:
    """The provenance with every string that starts with the checkout's path (``root``: git's top level, the
    venv's python, each notebook's output folder) made relative to it: a record is read on other machines."""
    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, str) and root and (v == root or v.startswith(root.rstrip("/") + "/")):
            return os.path.relpath(v, root)
        return v
    return walk(dict(prov))


def _readme(run: Path, prov: Mapping[str, Any], kind: record.HostKind, copied: list[Path], dest: Path) -> str:
    git = prov.get("git") or {}
    times = ", ".join(f"{n.get('name', '')[:2]} {float(n.get('seconds') or 0):.1f} s" for n in prov["notebooks"])
    files = ", ".join(f"`{p.relative_to(dest)}`" for p in copied)
    return (f"# {dest.name}/ — the committed record of the host kind {kind.describe()}\n\n"
            f"Source: `make report` (`params/default.yaml`), run folder `{run.name}`, at commit "
            f"`{(git.get('commit') or '?')[:7]}`{' (a dirty tree: say what was edited)' if git.get('dirty') else ''}, "
            f"{prov.get('started_at')} to {prov.get('finished_at')}; {float(prov.get('seconds') or 0) / 60:.1f} min "
            f"(the notebooks: {times}). Kept by `resnet-lab record`: {files}.\n\n"
            "Say here what the host measurably is, how quiet it was, and what its rows show.\n")


def keep(run: str | Path, outputs: str | Path, force: bool = False, dry_run: bool = False) -> dict[str, Any]:
    """Copy ``run`` into ``<outputs>/reference`` as its kind's record or that record's ``timing/``; every check
    first (:func:`check_run`, the destination), nothing written on a refusal or with ``dry_run``."""
    run, reference = Path(run), Path(outputs) / "reference"
    prov = check_run(run)
    dest, role = destination(run, reference)
    if dest.exists() and any(dest.iterdir()) and not force:
        raise _refuse(run, f"'{shown(dest)}' already holds a {role} of this host kind (--force replaces it; git keeps "
                      "the one before)")
    pairs = files_to_copy(run, dest, role)
    if not dry_run:
        if role == "timing" and dest.exists():  # a timing/ folder is one run's files and nothing else
            shutil.rmtree(dest)
        root = (prov.get("git") or {}).get("root")
        for src, target in pairs:
            target.parent.mkdir(parents=True, exist_ok=True)
            if src.name == "provenance.json":
                artifacts.write_json(target, portable(json.loads(src.read_text()), root))
            else:
                shutil.copy2(src, target)
        if role == "record" and not (dest / README).exists():
            (dest / README).write_text(_readme(run, prov, record.kind_of(run), [t for _, t in pairs], dest))
    return {"run": shown(run), "as": role, "destination": shown(dest), "files": [shown(t) for _, t in pairs],
            "kind": record.kind_of(run).describe(), "dry_run": dry_run}


# -------------------------------------------------------------------------------------------- CLI
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", metavar="RUN_DIR", help="a finished `make report` run folder, e.g. outputs/runs/<run>")
    p.add_argument("--outputs", default=None, help="the outputs folder whose reference/ gets it (default: ./outputs "
                                                   "or the checkout's)")
    p.add_argument("--force", action="store_true",
                   help="replace the timing/ folder that is there, or write over a record's files of the same name "
                   "(git keeps the ones before)")
    p.add_argument("--dry-run", action="store_true", help="say what would be copied where, copy nothing")


def run(args: argparse.Namespace) -> int:
    check_path("RUN_DIR", args.run, "dir", optional=False)
    check_path("--outputs", args.outputs, "out-dir")
    outputs = Path(args.outputs) if args.outputs else artifacts.outputs_root()
    done = keep(args.run, outputs, force=args.force, dry_run=args.dry_run)
    verb = "would copy" if done["dry_run"] else "copied"
    what = "the record of" if done["as"] == "record" else "the planning costs (timing/) of the record of"
    print(f"{done['run']}: {verb} {len(done['files'])} file(s) into {done['destination']}, {what} "
          f"{done['kind']}")
    if not done["dry_run"]:
        print(f"next: git add {done['destination']}" + (" (and complete its README)" if done["as"] == "record" else ""))
    return 0
