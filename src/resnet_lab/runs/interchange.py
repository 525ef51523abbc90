"""The store's runs in the formats perf-tracking servers read: LNT's report v2, asv's results, flat CSV.

- **LNT** (``lnt import`` / ``submitRun``; ``docs/importing_data.rst``, format_version "2"): one report per run —
  ``machine`` (name: the host kind's slug, its facts as strings), ``run`` (``start_time``, ``end_time``,
  ``llvm_project_revision``: the commit's ordinal in the store, which LNT's default ``nts`` schema orders runs by,
  and the commit's sha), ``tests`` (one per row: ``score``, images/sec per process, higher is better; and
  ``execution_time``, seconds per image per process, lower is better).
- **asv** (``asv publish``; results api_version 2): ``<out>/<machine>/machine.json`` and one
  ``<sha[:8]>-<env>.json`` per run, ``result_columns`` as asv writes them, each row a benchmark whose result is its
  median images/sec and whose samples are its processes'.
- **CSV**: every sample, one line (``samples.csv``); **Otava** (Hunter): per host kind a wide table, one line per
  run in time order, a column per row (its mean images/sec), ``time`` and ``commit`` as attributes.
"""

from __future__ import annotations

import csv
import json
import re
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from resnet_lab.bench import identity
from resnet_lab.runs import store as st

FORMATS = ("lnt", "asv", "csv", "otava")
ASV_COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a", "stats_ci_99_b",
               "stats_q_25", "stats_q_75", "stats_number", "stats_repeat", "samples", "profile"]


def _kinds(store: st.Store) -> dict[int, dict[str, Any]]:
    import sqlalchemy as sa

    with store.engine.connect() as conn:
        return {int(m["id"]): dict(m) for m in conn.execute(sa.select(store.t("host_kinds"))).mappings()}


def _test_name(row: dict[str, Any]) -> str:
    """A row as a test name: model, mode, batch, precision, backend, then the label (LNT's ``a/b/c`` style)."""
    ident = dict(zip(identity.IDENTITY, json.loads(row["identity"]), strict=False))  # the store keeps match_key
    label = re.sub(r"[^A-Za-z0-9_.+-]+", "_", str(row.get("label") or "")).strip("_")
    parts = (ident.get("model"), ident.get("mode"), f"b{ident.get('batch_size')}", ident.get("precision"),
             row.get("backend") or "tensorflow", label or row["identity_hash"][:8])
    return "/".join(str(x) for x in parts)


def lnt_report(store: st.Store, run: dict[str, Any]) -> dict[str, Any]:
    """One run as an LNT report, format_version 2."""
    kind = _kinds(store)[run["host_kind_id"]]
    facts = json.loads(kind["facts"])
    machine = {"name": kind["slug"], "description": kind["description"], "facts_hash": kind["facts_hash"],
               **{str(k): str(v) for k, v in facts.get("facts") or []},
               "peaks": ", ".join(f"{d} {v:.0f} GFLOP/s" for d, v in json.loads(kind["peaks"]))}
    rows = st.rows_of(store, [run["id"]])
    tests = []
    seen: dict[str, int] = defaultdict(int)
    for r in rows:
        samples = r["samples"] or ([r["images_per_sec"]] if r["images_per_sec"] else [])
        if not samples:
            continue
        name = _test_name(r)
        seen[name] += 1
        name = name if seen[name] == 1 else f"{name}#{seen[name]}"
        tests.append({"name": name, "score": samples, "execution_time": [1.0 / s for s in samples if s]})
    return {"format_version": "2", "machine": machine,
            "run": {"start_time": _iso(run["started_at"]), "end_time": _iso(run["finished_at"] or run["started_at"]),
                    "llvm_project_revision": str(run["ordinal"] or 0), "git_sha": run["sha"] or "",
                    "run_key": run["run_key"], "params": run["params_name"] or ""},
            "tests": tests}


def _iso(t: str | None) -> str:
    """LNT's ``%Y-%m-%dT%H:%M:%S`` (no zone, no fraction)."""
    return (t or "1970-01-01T00:00:00")[:19]


def _js_ms(t: str | None) -> int:
    import datetime as dt

    try:
        return int(dt.datetime.fromisoformat(t or "").timestamp() * 1000)
    except ValueError:
        return 0


def write_asv(store: st.Store, out: Path) -> list[Path]:
    """asv's results tree under ``out``: per host kind a machine folder, per run a results file."""
    out.mkdir(parents=True, exist_ok=True)
    kinds, written = _kinds(store), []
    for run in st.runs(store):
        kind = kinds[run["host_kind_id"]]
        facts = json.loads(kind["facts"])
        mdir = out / kind["slug"]
        mdir.mkdir(exist_ok=True)
        machine = {"machine": kind["slug"], "arch": "x86_64", "cpu": facts.get("cpu") or "",
                   "num_cpu": str(facts.get("cpus") or ""), "os": "Linux", "ram": "", "version": 1}
        (mdir / "machine.json").write_text(json.dumps(machine, indent=1))
        results = {}
        for r in st.rows_of(store, [run["id"]]):
            samples = r["samples"] or ([r["images_per_sec"]] if r["images_per_sec"] else [])
            if not samples:
                continue
            q = statistics.quantiles(samples, n=4) if len(samples) > 1 else [samples[0]] * 3
            results[_test_name(r)] = [[statistics.median(samples)], [], r["identity_hash"][:16],
                                      _js_ms(run["started_at"]), None, [min(samples)], [max(samples)], [q[0]], [q[2]],
                                      [1], [len(samples)], [samples]]
        env = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{run['params_name'] or 'run'}-{run['name']}")
        sha = run["sha"] or "0" * 40
        doc = {"commit_hash": sha, "env_name": env, "date": _js_ms(run["started_at"]),
               "params": {"machine": kind["slug"], "python": "3"}, "python": "3", "requirements": {},
               "env_vars": {}, "result_columns": ASV_COLUMNS, "results": results, "durations": {}, "version": 2}
        path = mdir / f"{sha[:8]}-{env}.json"
        path.write_text(json.dumps(doc))
        written.append(path)
    return written


def write_csv(store: st.Store, out: Path) -> list[Path]:
    """``samples.csv``: one line per process sample of every row of every run."""
    out.mkdir(parents=True, exist_ok=True)
    kinds = _kinds(store)
    path = out / "samples.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["time", "run", "commit", "order", "host_kind", "params", "test", "identity_hash", "process",
                    "images_per_sec"])
        for run in st.runs(store):
            for r in st.rows_of(store, [run["id"]]):
                for i, s in enumerate(r["samples"]):
                    w.writerow([run["started_at"], run["run_key"], run["sha"] or "", run["ordinal"] or "",
                                kinds[run["host_kind_id"]]["slug"], run["params_name"] or "", _test_name(r),
                                r["identity_hash"], i, s])
    return [path]


def write_otava(store: st.Store, out: Path) -> list[Path]:
    """Per host kind and params a wide CSV Otava reads: time, commit, then one column per test (mean img/s)."""
    out.mkdir(parents=True, exist_ok=True)
    kinds, written = _kinds(store), []
    series: dict[tuple[int, str], list[tuple[dict[str, Any], dict[str, float]]]] = defaultdict(list)
    for run in st.runs(store):
        values = {}
        for r in st.rows_of(store, [run["id"]]):
            samples = r["samples"] or ([r["images_per_sec"]] if r["images_per_sec"] else [])
            if samples:
                values[_test_name(r)] = statistics.fmean(samples)
        series[(run["host_kind_id"], run["params_name"] or "run")].append((run, values))
    for (kind_id, params), points in series.items():
        tests = sorted({t for _, v in points for t in v})
        path = out / f"otava-{kinds[kind_id]['slug']}-{params}.csv"
        with path.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["time", "commit", *tests])
            for run, v in points:
                w.writerow([run["started_at"], run["sha"] or "", *(v.get(t, "") for t in tests)])
        written.append(path)
    return written
