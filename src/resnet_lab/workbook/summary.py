"""Each report's answer in a few sentences, and the run's one page: written from the numbers a notebook
recorded in ``results.json``, never typed by hand.

:func:`summarize` turns one notebook's results into Markdown; the runner puts it at the top of that
notebook's HTML reports and on the run page. :func:`headline_figures` picks the figures a list of runs shows
(selected model, distinct ops, best images/sec and MFU). :func:`write_run_page` writes ``<run>/index.html``:
the host, every notebook's summary and status, links to the full reports and the files beside them.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from resnet_lab.core import artifacts
from resnet_lab.workbook import notebooks

SUMMARY_HEADING = "## Summary"


def summarize(notebook: str, results: dict[str, Any]) -> str | None:
    """The notebook's answer as Markdown sentences, or None for a notebook without a summary."""
    nb = notebooks.NOTEBOOKS.get(notebook)
    if nb is None or not results:
        return None
    return " ".join(line for line in nb.summary(results) if line)


def read_results(run_dir: Path, notebook: str) -> dict[str, Any]:
    try:
        return artifacts.read_json(run_dir / notebook / "results.json")
    except (OSError, ValueError):
        return {}


def headline_figures(run_dir: Path) -> dict[str, Any]:
    """The figures a list of runs shows: selected model, distinct ops of its training step, best img/s, MFU (each
    notebook's :attr:`~resnet_lab.workbook.notebooks.Notebook.figures`, in the notebooks' order)."""
    figures: dict[str, Any] = {}
    for nb in notebooks.NOTEBOOKS.values():
        if nb.figures is not None:
            figures.update(nb.figures(read_results(run_dir, nb.name)))
    return figures


def write_run_page(run_dir: Path, prov: dict[str, Any]) -> Path:
    """``<run>/index.html``: the host, each notebook's summary and status, links to its reports and files."""
    cpu = prov.get("cpu") or {}
    git = prov.get("git") or {}
    sections = []
    for nb in prov.get("notebooks", []):
        name = nb["name"]
        text = summarize(name, read_results(run_dir, name)) or ""
        status = nb.get("status") or "?"
        took = f", {nb['seconds'] / 60:.1f} min" if nb.get("seconds") is not None else ""
        links = " · ".join(f'<a href="{href}">{label}</a>' for label, href in (
            ("report", f"{name}.report.html"), ("with code", f"{name}.html"), ("files", f"{name}/"),
            ("log", f"{name}.log")) if (run_dir / href).exists())
        error = f'<p class="failed">{html.escape(nb.get("error") or "")}</p>' if nb.get("error") else ""
        sections.append(f'<section><h2>{html.escape(name)} <small class="{html.escape(status)}">'
                        f"{html.escape(status)}{took}</small></h2>{error}<p>{_md_inline(text)}</p>"
                        f"<p><small>{links}</small></p></section>")
    figures = headline_figures(run_dir)
    facts = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
                    for k, v in figures.items() if v is not None)
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(run_dir.name)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: 60em; line-height: 1.45; }}
table {{ border-collapse: collapse; }} td, th {{ border: 1px solid #ccc; padding: .3em .6em; text-align: left; }}
.ok {{ color: #17692b; }} .failed, .interrupted {{ color: #b00020; font-weight: bold; }}
.running, .pending {{ color: #8a6d00; }} h2 small {{ font-weight: normal; font-size: .7em; }}
</style></head><body>
<h1>Run {html.escape(run_dir.name)}</h1>
<p>{html.escape(prov.get("description") or "")} · status <b class="{html.escape(prov.get("status") or "")}">
{html.escape(prov.get("status") or "?")}</b> · commit <code>{html.escape((git.get("commit") or "?")[:10])}
{"+dirty" if git.get("dirty") else ""}</code> · started {html.escape(prov.get("started_at") or "?")} UTC</p>
<p>Host {html.escape(prov.get("host") or "?")}: {html.escape(cpu.get("model") or "?")},
{html.escape(str(cpu.get("available_cpus") or "?"))} CPUs available, {len(prov.get("gpus") or [])} GPU(s).
<a href="provenance.json">provenance</a> · <a href="params.yaml">params</a></p>
{"".join(f"<p>{html.escape(prov[k])}</p>" for k in ("store", "store_gate") if prov.get(k))}
{"<table>" + facts + "</table>" if facts else ""}
{"".join(sections)}
</body></html>
"""
    path = run_dir / "index.html"
    path.write_text(page)
    return path


def _md_inline(text: str) -> str:
    """The summaries' little Markdown (``**bold**``, ``code``) as HTML, everything else escaped."""
    import re

    out = html.escape(text)
    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", out)
