"""``resnet-lab store``: push runs into the results store, list it, export it, gate a run on a rolling baseline.

The store (:mod:`resnet_lab.runs.store`) is ``outputs/store.sqlite`` unless ``--store URL`` or
``$RESNET_LAB_STORE`` names another (``postgresql://…`` for a team's). Every argument is checked, and the store
opened, before a file is read: one line and exit 2 for a bad URL, a store that does not connect, a store of a
newer schema, a run folder cut short.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from resnet_lab.core import artifacts, choices
from resnet_lab.core.errors import UsageError
from resnet_lab.core.paths import check_path
from resnet_lab.core.text import markdown_table
from resnet_lab.runs import gate as gate_mod
from resnet_lab.runs import interchange
from resnet_lab.runs import store as st

EPILOG = """\
  resnet-lab store push outputs/runs/<run>            # idempotent: a run already there adds nothing
  resnet-lab store list --format markdown              # host kinds and their runs
  resnet-lab store gate outputs/runs/<run> --window 5  # against the last 5 runs of its host kind and params
  resnet-lab store export --format lnt --out lnt/      # one LNT report v2 per run (also asv, csv, otava)
  resnet-lab store aa --params gate-aa --window 5      # the gate's A/A over the runs of one commit in the store
Exit status of `gate`: 0 stable or improved, 1 regressed, 3 insufficient baseline, 4 not comparable, 2 bad input;
of `aa`: 0 when no pairing cried wolf and >= 95 % of the planted slowdowns were found, else 1.
A team's store: --store postgresql://USER@HOST/DB (or RESNET_LAB_STORE)."""

LIST_FORMATS = ("table", "json", "markdown")


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="store_command", required=True, metavar="ACTION")
    for name, text in (("push", "add run folders to the store (idempotent)"), ("list", "host kinds and runs"),
                       ("export", "the store as LNT reports, asv results, CSV or Otava CSV"),
                       ("gate", "a run against the last N runs of its host kind and params"),
                       ("aa", "the gate's A/A: runs of one commit, each against every window of N others, as "
                              "measured and with one row slowed on purpose")):
        s = sub.add_parser(name, help=text, description=text)
        s.add_argument("--store", default=None, help="SQLAlchemy URL (default: $RESNET_LAB_STORE or "
                                                     "sqlite:///outputs/store.sqlite)")
        s.add_argument("--outputs", default=None, help="the outputs root whose store.sqlite is the default")
        if name == "push":
            s.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run folders")
        if name == "export":
            s.add_argument("--format", required=True, help=f"one of {', '.join(interchange.FORMATS)}")
            s.add_argument("--out", required=True, help="a new or empty folder")
            s.add_argument("--run", default=None, help="lnt: only this run (key, name or folder); default every run")
        if name == "aa":
            s.add_argument("--params", required=True, dest="params_name",
                           help="the params name of the runs (e.g. gate-aa: `resnet-lab run params/gate-aa.yaml`)")
            s.add_argument("--slowdown", type=float, default=10.0, help="the planted slowdown in %% (default 10)")
            s.add_argument("--out", default=None, help="also write aa.json and aa.md into this new or empty folder")
        if name == "gate":
            s.add_argument("run", metavar="RUN", help="a run in the store (its folder, name or key)")
        if name in ("gate", "aa"):
            s.add_argument("--window", type=int, default=None, help="baseline runs (default: params/gate.yaml's "
                                                                    f"store.window, else {gate_mod.GateParams.window})")
            s.add_argument("--min-runs", type=int, default=None,
                           help=f"runs a row needs (default: store.min_runs, else {gate_mod.GateParams.min_runs})")
        if name in ("gate", "aa", "list"):
            choices.add_format_option(s, LIST_FORMATS)


def _open(args: argparse.Namespace, create: bool) -> st.Store:
    outputs = Path(args.outputs) if args.outputs else artifacts.outputs_root()
    store = st.open_store(args.store, outputs, create=create)
    st.push_records(store, outputs)  # the committed records are in every store (once), never copied by hand
    return store


def run(args: argparse.Namespace) -> int:
    action = args.store_command
    if action == "push":
        for r in args.runs:
            check_path("RUN_DIR", r, "dir", optional=False)
            st.read_folder(r)  # a folder cut short is one line before the store is opened
        store = _open(args, create=True)
        try:
            for r in args.runs:
                done = st.push(store, r)
                what = (f"added, {done['rows']} rows, {done['ops']} op counts, {done['layers']} layer times"
                        if done["added"] else "already in the store, nothing added")
                print(f"{done['run']}: {what} ({done['kind']}) -> {store.shown}")
        finally:
            store.close()
        return 0
    if action == "export":
        fmt = args.format
        if fmt not in interchange.FORMATS:
            raise UsageError(f"--format: '{fmt}' is not an export format (allowed: {', '.join(interchange.FORMATS)})")
        check_path("--out", args.out, "out-dir")
        out = artifacts.check_out(args.out)
        store = _open(args, create=False)
        try:
            if fmt == "lnt":
                chosen = [st.find_run(store, args.run)] if args.run else st.runs(store)
                out.mkdir(parents=True, exist_ok=True)
                files = []
                for r in chosen:
                    path = out / f"{r['name']}.lnt.json"
                    path.write_text(json.dumps(interchange.lnt_report(store, r), indent=1))
                    files.append(path)
            else:
                files = {"asv": interchange.write_asv, "csv": interchange.write_csv,
                         "otava": interchange.write_otava}[fmt](store, out)
        finally:
            store.close()
        print(f"{len(files)} file(s) in {out} ({fmt})")
        return 0
    fmt = choices.check_format(args)
    if action == "aa":
        return _aa(args, fmt)
    store = _open(args, create=False)
    try:
        if action == "list":
            kinds = st.kinds(store)
            if fmt == "json":
                print(json.dumps({"store": store.shown, "host_kinds": kinds,
                                  "runs": st.runs(store)}, indent=1, default=str))
            else:
                table = markdown_table(["host kind", "runs", "newest", "hash"],
                                       [[k["description"], k["runs"], k["newest"] or "", k["facts_hash"][:12]]
                                        for k in kinds])
                print(f"store: {store.shown}", *table, sep="\n")
            return 0
        result = gate_mod.gate(store, args.run, _gate_params(args))
    finally:
        store.close()
    if fmt == "json":
        print(json.dumps(result, indent=1, default=str))
    else:
        print(gate_mod.summary(result))
        if result["rows"]:
            print(*markdown_table(["row", "verdict", "change %", "beside its run %", "MDE %", "baseline runs"],
                                  [[r["row"], r["verdict"], _pct(r["change_pct"]), _pct(r.get("relative_pct")),
                                    _pct(r["mde_pct"]), r["baseline_runs"]] for r in result["rows"]]), sep="\n")
        for side in ("only_candidate", "only_baseline"):
            if result[side]:
                print(f"{side.replace('_', ' ')} (not judged): {', '.join(result[side])}")
    return gate_mod.exit_code(result)


def _gate_params(args: argparse.Namespace) -> gate_mod.GateParams:
    given = {k: v for k, v in (("window", args.window), ("min_runs", args.min_runs)) if v is not None}
    return gate_mod.GateParams(**{**_gate_defaults(), **given}).check()


def _aa(args: argparse.Namespace, fmt: str) -> int:
    """``store aa``: every argument checked and the output folder free before the store opens."""
    params = _gate_params(args)
    if not 0 < args.slowdown < 100:
        raise UsageError(f"--slowdown: {args.slowdown} must lie in (0, 100) (a slowdown in %)")
    out = None
    if args.out:
        check_path("--out", args.out, "out-dir")
        out = artifacts.check_out(args.out)
    store = _open(args, create=False)
    try:
        result = gate_mod.aa(store, args.params_name, params, args.slowdown)
    finally:
        store.close()
    lines = [gate_mod.aa_summary(result)]
    if result.get("rows"):
        lines += markdown_table(["row", "planted found", "false alarms", "MDE % (median)", "MDE % (max)"],
                                [[r["row"], f"{r['found']}/{r['planted']}", r["false_alarms"],
                                  _num(r["mde_pct_median"]), _num(r["mde_pct_max"])] for r in result["rows"]])
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "aa.json").write_text(json.dumps(result, indent=1, default=str))
        (out / "aa.md").write_text("\n".join(lines) + "\n")
    print(json.dumps(result, indent=1, default=str) if fmt == "json" else "\n".join(lines))
    return 0 if result["held"] else 1


def _num(v: float | None) -> str:
    return "" if v is None else f"{v:.1f}"


def _pct(v: float | None) -> str:
    return "" if v is None else f"{v:+.1f}"


def _gate_defaults() -> dict[str, float]:
    """params/gate.yaml's ``store:`` section (window, min_runs, min_change_pct) where the checkout has one."""
    from resnet_lab.core import provenance

    path = provenance.package_root().parent / "params" / "gate.yaml"
    try:
        import yaml

        section = (yaml.safe_load(path.read_text()) or {}).get("store") or {}
        return {k: (float if k.endswith("_pct") else int)(v) for k, v in section.items()
                if k in ("window", "min_runs", "min_change_pct", "run_min_change_pct")}
    except (OSError, ValueError, TypeError, AttributeError):
        return {}
