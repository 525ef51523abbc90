"""The configurations a set of benchmark rows puts forward: the fastest training one, the fastest fp32 one,
the row counts (:func:`headline`). Notebook 03 records them in its ``results.json``
(:mod:`resnet_lab.report.speed_results`); ``resnet-lab history`` follows them over every run
(:mod:`resnet_lab.runs.history`), read from that file or, for a record without it, found here."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from resnet_lab.bench.identity import describe, is_measured, match_key


def candidates(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with a speed, less oneDNN-profiled ones (verbose logging slows them: not candidates for "best")."""
    return [r for r in rows if is_measured(r) and not r.get("onednn_profile")]


def headline(rows: Sequence[dict[str, Any]], model: str | None = None) -> dict[str, Any]:
    """The numbers results.json records: best configuration overall and best fp32 training one.

    A row that repeats an earlier run under another label (``same_run_as``) is counted once."""
    rows = [r for r in rows if not r.get("same_run_as")]
    ok_rows = candidates(rows)
    # "best" is picked among the rows of ``model`` where it has any; the counts are of every row
    ok = [r for r in ok_rows if r.get("model") == model] or ok_rows if model else ok_rows
    train = [r for r in ok if r.get("mode") == "train"]
    # fp32 means fp32 math: rows letting oneDNN multiply fp32 in bf16 (math_dtype bf16) do not count
    fp32 = [r for r in train if (r.get("math_dtype") or r.get("precision")) == "fp32"]
    best = max(train or ok, key=lambda r: r["images_per_sec"], default=None)
    best_fp32 = max(fp32, key=lambda r: r["images_per_sec"], default=None)
    best_mfu = max((r for r in fp32 if r.get("mfu") is not None), key=lambda r: r["mfu"], default=None)
    return {
        "n_rows": len(rows), "n_ok": sum(1 for r in rows if is_measured(r)),
        "n_failed": sum(1 for r in rows if not is_measured(r) and r.get("status") != "skipped"),
        "n_skipped": sum(1 for r in rows if r.get("status") == "skipped"),
        "best_config": describe(best) if best else None,
        "best_images_per_sec": best["images_per_sec"] if best else None,
        "best_mfu": best.get("mfu") if best else None,
        "best_fp32_config": describe(best_fp32) if best_fp32 else None,
        "best_fp32_images_per_sec": best_fp32["images_per_sec"] if best_fp32 else None,
        "best_fp32_mfu": best_mfu.get("mfu") if best_mfu else None,
        "best_fp32_cpu_util": best_fp32.get("cpu_util") if best_fp32 else None,
    }


def quoted_keys(rows: Sequence[dict[str, Any]], results: dict[str, Any] | None) -> set[tuple]:
    """The configurations (:func:`resnet_lab.bench.identity.match_key`) notebook 03's summary quotes: from its
    ``results.json`` (``results``: the best and best fp32 configurations, the 2017 rows, the backends), or, for a
    record without it (None), the fastest ones of ``rows`` (:func:`headline`)."""
    measured = [r for r in rows if is_measured(r) and not r.get("same_run_as")]
    if not isinstance(results, dict):  # a record of CSVs: the fastest configurations of its rows
        results = headline(measured)
    else:
        measured = [r for r in measured if str(r.get("source", "")).startswith("03_benchmarks/")]
    names = {results.get("best_config"), results.get("best_fp32_config")} - {None}
    in_2017 = set(results.get("images_per_sec_2017") or {})
    in_backends = set(results.get("images_per_sec_backends") or {})
    keys = set()
    for r in measured:
        source = str(r.get("source", ""))
        if (describe(r) in names or (source.endswith("bench_2017.json") and r.get("label") in in_2017)
                or (source.endswith("bench_backends.json") and f"{r.get('label')} {r.get('mode')}" in in_backends)):
            keys.add(match_key(r))
    return keys
