"""What a reader sees: the quick run's page and reports rendered by headless Chromium (the OS package, which
`.ci/run` installs), read as text: no log, warning or progress block, no path of this machine, the summary
first, every link present."""

from __future__ import annotations

import html.parser
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

BROWSER = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
# What must never reach a shared report: C++ log lines, Python warnings, tqdm bars, reprs of paths
NOISE = re.compile(r"\b[IWEF]\d{4} \d\d:\d\d|oneDNN custom operations|absl::InitializeLog|\w+Warning:|TqdmWarning|"
                   r"\d+%\|[█▏▎▍▌▋▊▉ ]*\||PosixPath\(|IProgress not found")


@pytest.fixture(scope="module")
def browser() -> str:
    if BROWSER is None:
        if os.environ.get("RESNET_LAB_REQUIRE_BROWSER"):
            pytest.fail("RESNET_LAB_REQUIRE_BROWSER is set but no chromium is installed (apt-get install chromium)")
        pytest.skip("no chromium on this machine (apt-get install chromium; .ci/run installs it)")
    return BROWSER


def render(browser: str, page: Path, screenshot: Path | None = None) -> str:
    """The DOM after Chromium loaded ``page`` (scripts run), and optionally a screenshot of it."""
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    if screenshot:
        subprocess.run([*flags, f"--screenshot={screenshot}", "--window-size=1280,2400", page.as_uri()],
                       capture_output=True, timeout=120, check=True)
    r = subprocess.run([*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120, check=True)
    return r.stdout


class _Reader(html.parser.HTMLParser):
    """Visible text (no script or style), the headings in order, links, and the output areas' MIME types."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.headings: list[str] = []
        self.links: list[str] = []
        self.mime: list[str] = []
        self._skip = 0
        self._heading: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag in ("script", "style"):
            self._skip += 1
        if tag in ("h1", "h2"):
            self._heading = []
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
        if a.get("data-mime-type"):
            self.mime.append(a["data-mime-type"])

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self._skip -= 1
        if tag in ("h1", "h2") and self._heading is not None:
            self.headings.append("".join(self._heading).replace("¶", "").strip())
            self._heading = None

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)
            if self._heading is not None:
                self._heading.append(data)


def read(dom: str) -> _Reader:
    r = _Reader()
    r.feed(dom)
    return r


def _local(links: list[str]) -> list[str]:
    return [h.split("#")[0] for h in links if h and not re.match(r"^(https?:|mailto:|#|data:)", h) and h.split("#")[0]]


def _machine_paths(run_dir: Path) -> list[str]:
    return [str(run_dir), str(run_dir.parent.parent), str(Path(__file__).resolve().parents[2]), "/tmp/", "/work/",
            str(Path.home()) + "/", "site-packages"]


def test_the_run_page_opens_with_every_summary_and_links_what_exists(quick_run, browser, tmp_path):
    run = quick_run.run_dir
    page = read(render(browser, run / "index.html", tmp_path / "run_page.png"))
    text = " ".join(" ".join(page.text).split())
    assert page.headings[0] == f"Run {run.name}"
    notebooks = [h.split()[0] for h in page.headings[1:]]
    assert notebooks == [p.stem for p in sorted((run).glob("*.ipynb"))]
    assert "Chosen:" in text and "Fastest training configuration" in text and "Distinct HLO opcodes" in text
    assert "Measured GEMM peak" in text and "verdict" in text
    # 05: against the record of this host kind, or saying there is none (the committed one is an Intel Xeon's)
    assert "Against " in text or "No comparable baseline" in text
    for path in _machine_paths(run):
        assert path not in text, path
    missing = [h for h in _local(page.links) if not (run / h).exists()]
    assert not missing and len(_local(page.links)) >= 4 * 6
    index = read(render(browser, run.parent.parent / "index.html"))
    assert "selected model:" in " ".join(index.text) and "best img/s:" in " ".join(index.text)
    assert not [h for h in _local(index.links) if not (run.parent.parent / h).exists()]


@pytest.mark.parametrize("notebook", ["02_op_extraction", "03_benchmarks"])
def test_a_shared_report_reads_as_a_document(quick_run, browser, notebook, tmp_path):
    run = quick_run.run_dir
    dom = render(browser, run / f"{notebook}.report.html", tmp_path / f"{notebook}.png")
    r = read(dom)
    text = "\n".join(r.text)
    assert r.headings[0].startswith(notebook[:2]) and r.headings[1] == "Summary", r.headings[:3]
    assert "application/vnd.jupyter.stderr" not in r.mime, "a stderr block reached the report"
    noise = NOISE.findall(text)
    assert not noise, noise[:5]
    for path in _machine_paths(run):
        assert path not in text, path
    assert not [h for h in _local(r.links) if not (run / h).exists()]
    assert any(h.endswith(".csv") for h in _local(r.links)), "each table links its full CSV"
    assert not re.search(r"\bNaN\b", text), "skipped rows are a sentence, not rows of NaN"
