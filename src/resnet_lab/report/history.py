"""The speed history's view (:mod:`resnet_lab.runs.history`) and ``resnet-lab history``: one line per series
(:func:`table_rows`, what ``outputs/index.html`` shows), the Markdown, the one PNG per configuration, the files
written (``history.json``, ``history.md``, ``history-NN-<config>.png``).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import itertools
import math
import re
import statistics
from pathlib import Path
from typing import Any

from resnet_lab.core import artifacts, style
from resnet_lab.core.paths import check_path
from resnet_lab.runs import command
from resnet_lab.runs.history import history  # the runner's index computes it through here too


def _short(commit: str | None) -> str:
    return (commit or "?")[:7]


def _clip(text: str, n: int) -> str:
    """``text`` cut to ``n`` characters, an ellipsis saying so (a host kind's name along a plot's height)."""
    return text if len(text) <= n else text[:n - 1] + "…"


def describe_change(c: dict[str, Any]) -> str:
    """E.g. "−15.2 % at 2026-12-06 (run r06, commit abc1234; after def5678)", "tentative: 2 runs at the new
    level" added where the next run can still move it."""
    tentative = f", tentative: {c['runs_after']} runs at the new level" if c.get("tentative") else ""
    return (f"{c['step_pct']:+.1f} % at {c['date'][:10]} (run {c['run']}, commit {_short(c['commit'])}; "
            f"after {_short(c['after_commit'])}{tentative})")


def _last(s: dict[str, Any]) -> str:
    last = s["last"]
    ci = (f" ({last['ci95_low']:.2f}–{last['ci95_high']:.2f})" if last["ci95_low"] is not None
          and last["ci95_high"] is not None else "")
    return f"{last['images_per_sec']:.2f}{ci} on {last['date'][:10]}"


def table_rows(result: dict[str, Any]) -> list[dict[str, str]]:
    """One line per series: configuration, host kind, runs, last value, change points."""
    return [{"configuration": c["config"], "host kind": s["host_kind"], "runs": str(s["runs"]), "last img/s": _last(s),
             "change points": "; ".join(describe_change(x) for x in s["change_points"]) or "none"}
            for c in result["configurations"] for s in c["series"]]


def to_markdown(result: dict[str, Any]) -> str:
    lines = ["# Speed history", "",
             f"{len(result['configurations'])} headline configuration(s) over {result['records']} record(s); one "
             "series per host kind (a change of host is where a series ends, never a step). Change points: "
             f"{result['method']['change_points']}, penalty {result['method']['penalty']}.", ""]
    rows = table_rows(result)
    if rows:
        lines += ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
        lines += ["| " + " | ".join(r.values()) + " |" for r in rows]
    else:
        lines.append("No headline configuration was measured in two records yet.")
    for c in result["configurations"]:
        for sw in c["host_kind_changes"]:
            lines.append(f"- {c['config']}: host kind {sw['from']} → {sw['to']} at {sw['date'][:10]} "
                         f"(run {sw['run']}): a new series, not a change point")
    lines += [f"- skipped {s['folder']}: {s['reason']}" for s in result["skipped"]]
    return "\n".join(lines) + "\n"


def to_table(result: dict[str, Any]) -> str:
    rows = table_rows(result)
    lines = []
    for r in rows:
        lines.append(f"{r['configuration'][:48]:48}  {r['host kind'][:32]:32}  {r['runs']:>3} runs  "
                     f"last {r['last img/s']}  change points: {r['change points']}")
    if not rows:
        lines.append("no headline configuration measured in two records yet")
    lines += [f"skipped {s['folder']}: {s['reason']}" for s in result["skipped"]]
    return "\n".join(lines) + "\n"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60]


def figure_name(i: int, config: str) -> str:
    return f"history-{i + 1:02d}-{_slug(config)}.png"


def plot(config: dict[str, Any], path: Path) -> Path:
    """:func:`figure` of one configuration saved as ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = figure(config)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def figure(config: dict[str, Any]):
    """images/sec of one configuration over time: one colour per host kind, each run's 95 % interval, its
    processes' images/sec as small dots, each segment's level, change points (red, with their step and
    commit) and changes of host kind (grey, dotted: an annotation)."""
    import matplotlib.pyplot as plt

    style.apply()
    fig, ax = plt.subplots(figsize=(9, 3.6))
    colors = plt.rcParams["axes.prop_cycle"].by_key().get("color", ["#1f77b4", "#ff7f0e", "#2ca02c"])
    for j, s in enumerate(config["series"]):
        color = colors[j % len(colors)]
        pts = s["points"]
        xs = [_dt.datetime.fromisoformat(p["date"]) for p in pts]
        ys = [p["images_per_sec"] for p in pts]
        lo = [p["images_per_sec"] - (p["ci95_low"] if p["ci95_low"] is not None else p["images_per_sec"])
              for p in pts]
        hi = [(p["ci95_high"] if p["ci95_high"] is not None else p["images_per_sec"]) - p["images_per_sec"]
              for p in pts]
        ax.errorbar(xs, ys, yerr=[lo, hi], fmt="o-", color=color, capsize=2, lw=1, ms=4, label=s["host_kind"])
        for x, p in zip(xs, pts, strict=True):
            if p["process_images_per_sec"]:
                ax.plot([x] * len(p["process_images_per_sec"]), p["process_images_per_sec"], ".", color=color,
                        alpha=0.4, ms=3)
        bounds = [0, *(c["index"] for c in s["change_points"]), len(pts)]
        levels = [s["change_points"][0]["level_before"]] if s["change_points"] else [
            math.exp(statistics.fmean(math.log(y) for y in ys))]
        levels += [c["level_after"] for c in s["change_points"]]
        for (a, b), level in zip(itertools.pairwise(bounds), levels, strict=False):
            ax.hlines(level, xs[a], xs[b - 1], color=color, lw=2, alpha=0.35)
        for c in s["change_points"]:
            x = _dt.datetime.fromisoformat(c["date"])
            ax.axvline(x, color="#b00020", ls=":" if c.get("tentative") else "--", lw=1)
            mark = "?" if c.get("tentative") else ""
            ax.annotate(f"{c['step_pct']:+.1f} %{mark}\n{_short(c['commit'])}", (x, max(ys)), fontsize=7,
                        color="#b00020", xytext=(3, 0), textcoords="offset points", va="top").set_in_layout(False)
    for sw in config["host_kind_changes"]:
        x = _dt.datetime.fromisoformat(sw["date"])
        ax.axvline(x, color="#777777", ls=":", lw=1)
        ax.annotate(f"host: {_clip(sw['to'], 48)}", (x, ax.get_ylim()[0]), fontsize=7, color="#555555",
                    rotation=90,
                    xytext=(2, 4), textcoords="offset points", va="bottom").set_in_layout(False)  # inside the axes: not
        # a decoration tight_layout must make room for (a long host name left it none: a warning, no layout)
    ax.set_ylabel("images/sec (95 % interval)")
    ax.set_title(config["config"][:90], fontsize=9)
    ax.legend(fontsize=7, loc="best")
    fig.autofmt_xdate()
    fig.tight_layout()
    return fig


def write(out: str | Path, result: dict[str, Any], fresh: bool = True) -> list[Path]:
    """history.json, history.md and one PNG per configuration in ``out`` (new or empty unless not ``fresh``:
    the index's own ``outputs/history/``, rewritten with the index). Each configuration's PNG name is in the
    result (``figure``)."""
    out = artifacts.check_out(out) if fresh else Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("history-*.png"):  # the index's folder: figures of configurations no longer shown go
        old.unlink()
    paths = []
    for i, c in enumerate(result["configurations"]):
        c["figure"] = figure_name(i, c["config"])
        paths.append(plot(c, out / c["figure"]))
    (out / "history.md").write_text(to_markdown(result))
    paths = [artifacts.write_json(out / "history.json", result), out / "history.md", *paths]
    return paths


# ------------------------------------------------------------------------------------------ CLI
EPILOG = """\
Each headline configuration of notebook 03 (the fastest training row, the fastest fp32 one, the 2017 rows, the
backends) measured in two records or more, over every run in the results store (OUTPUTS_DIR/store.sqlite, or
--store / $RESNET_LAB_STORE: a team's), after the runs under OUTPUTS_DIR/runs and the committed records of
OUTPUTS_DIR/reference are pushed where it lacks them: one series per host kind (CPU model, available CPUs,
GPUs), each run's images/sec with its 95 % interval, and the change points PELT finds in the log of the speed
(ruptures; penalty 6 σ² ln n, σ the series' run-to-run noise). A change of host kind starts a new series: never
a change point. A folder that cannot be read is skipped and named.

    resnet-lab history                        # the checkout's outputs/ and its store
    resnet-lab history --store postgresql://ci@perf-db/resnet   # every host's runs in the team's store
    resnet-lab history /data/outputs --format markdown --out /tmp/history   # with a PNG per configuration"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("outputs", metavar="OUTPUTS_DIR", nargs="?", default=None,
                   help="the outputs root with runs/ and reference/ (default: the checkout's outputs/)")
    p.add_argument("--store", default=None, help="the results store's SQLAlchemy URL (default: $RESNET_LAB_STORE "
                                                 "or sqlite:///OUTPUTS_DIR/store.sqlite)")
    command.add_output_options(p, "write history.json, history.md and a PNG per configuration into this new folder")


VIEWS = {"table": to_table, "markdown": to_markdown, "json": command.as_json}


def run(args: argparse.Namespace) -> int:
    check_path("OUTPUTS_DIR", args.outputs, "dir")
    if args.store is not None:
        from resnet_lab.runs import store as st

        st.resolve_url(args.store, ".")  # a URL that is not a store's: one line before anything is read
    return command.run(args, lambda: history(args.outputs or artifacts.outputs_root(), args.store), write, VIEWS)
