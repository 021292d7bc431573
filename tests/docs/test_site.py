"""The built docs site renders right with no network: what a reader sees, not what the Markdown says.

Each check reads the HTML that `mkdocs build --strict` writes and fails on a mark that a page did not render:
- a cross-reference left as literal link text, `[<code>Name</code>]` (an HF-style `[`Name`]` that mkdocstrings
  could not resolve);
- math left as raw text outside MathJax's `arithmatex` spans: a `\\(`, `\\[` or `$$` delimiter, or a TeX command or
  that Markdown left behind after eating a delimiter's backslash;
- a nested list flattened into its parent item: a line of a paragraph that starts with a literal "- ";
- a script or stylesheet fetched from the network: the site must render offline.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    site_dir = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return site_dir


def pages(site_dir: Path) -> list[Path]:
    return sorted(path for path in site_dir.rglob("*.html") if path.name != "404.html")


class ProseText(HTMLParser):
    """The text a reader sees as prose: not code, scripts, styles, or math that MathJax typesets."""

    SKIPPED = {"script", "style", "code", "pre"}

    def __init__(self) -> None:
        super().__init__()
        self.open_skips: list[str] = []
        self.chunks: list[str] = []

    def handle_starttag(self, tag, attrs):
        classes = (dict(attrs).get("class") or "").split()
        if tag in self.SKIPPED or "arithmatex" in classes:
            self.open_skips.append(tag)

    def handle_endtag(self, tag):
        if self.open_skips and self.open_skips[-1] == tag:
            self.open_skips.pop()

    def handle_data(self, data):
        if not self.open_skips:
            self.chunks.append(data)


def prose(html: str) -> str:
    parser = ProseText()
    parser.feed(html)
    return "".join(parser.chunks)


def unrendered_marks(html: str) -> list[str]:
    """Every unrendered cross-reference, math delimiter or flattened list in one page's HTML."""
    text = prose(html)
    marks = [match.group(0) for match in re.finditer(r"\[<code>[^<]*</code>\]", html)]
    marks += [match.group(0) for match in re.finditer(r"\\\(|\\\[|\$\$|\\[A-Za-z]+\b", text)]
    marks += [match.group(0).strip() for match in re.finditer(r"\n[ \t]*- \S", text)]
    return marks


def test_the_checks_see_each_unrendered_mark():
    # Hand-written pages with one mark each, and one with the same content rendered.
    assert unrendered_marks("<p>every [<code>trl.GRPOConfig</code>] field</p>") == ["[<code>trl.GRPOConfig</code>]"]
    assert unrendered_marks(r"<p>the group \(G\) of size</p>") == [r"\("]
    # Markdown turns an inline `\[ A^{x} \]` into `[ A^{x} ]`: the TeX commands are what is left to see.
    assert unrendered_marks(r"<p>advantage: [ A^{\text{out}} \cdot c ]</p>") == [r"\text", r"\cdot"]
    flattened = "<p>Findings:\n  - <em>Process oracle</em> marks\n  - <em>Outcome</em></p>"
    assert unrendered_marks(flattened) == ["- P", "- O"]
    rendered = (
        '<p>every <a href="x"><code>GRPOConfig</code></a> field, the group <span class="arithmatex">\\(G\\)</span>'
        "</p><ul>\n<li><em>Process oracle</em></li>\n</ul><pre><code>x\n- *x* \\(y\\)</code></pre>"
    )
    assert unrendered_marks(rendered) == []


def test_no_page_shows_unrendered_markup(site):
    found = {}
    for page in pages(site):
        marks = unrendered_marks(page.read_text(encoding="utf-8"))
        if marks:
            found[str(page.relative_to(site))] = marks[:3]
    assert not found, f"pages with unrendered markup: {found}"


def test_the_pages_with_math_load_the_bundled_renderer(site):
    math_pages = [page for page in pages(site) if 'class="arithmatex"' in page.read_text(encoding="utf-8")]
    assert math_pages, "no page has math: the check below would pass vacuously"
    for page in math_pages:
        html = page.read_text(encoding="utf-8")
        assert "vendor/mathjax/tex-svg.js" in html, page
    bundled = site / "javascripts" / "vendor" / "mathjax" / "tex-svg.js"
    assert bundled.stat().st_size > 1_000_000, "the bundled MathJax is missing or truncated"


def test_no_page_loads_anything_from_the_network(site):
    remote = re.compile(r"<(?:script|link)\b[^>]*\b(?:src|href)=\"(?:https?:)?//[^\"]+\"[^>]*>")
    for page in pages(site):
        loads = [tag for tag in remote.findall(page.read_text(encoding="utf-8")) if 'rel="canonical"' not in tag]
        assert not loads, f"{page.relative_to(site)} loads {loads[:2]}"


def config_classes() -> list[type]:
    """Every config class `trl_verigate` exports (a dataclass named ...Config or ...Arguments), and the pool's."""
    import dataclasses

    import trl_verigate
    from trl_verigate.prover_pool.config import ProverPoolConfig

    exported = [getattr(trl_verigate, name) for name in trl_verigate.__all__]
    configs = [
        obj for obj in exported if dataclasses.is_dataclass(obj) and obj.__name__.endswith(("Config", "Arguments"))
    ]
    return [*configs, ProverPoolConfig]


def test_the_api_reference_lists_every_config_field_with_its_help(site):
    import dataclasses
    import html as html_module

    from trl import GRPOConfig

    tables = {}
    for page in (site / "api").rglob("*.html"):
        for name, body in re.findall(
            r'<table class="config-fields" data-config="[\w.]*\.(\w+)">(.*?)</table>',
            page.read_text(encoding="utf-8"),
            re.S,
        ):
            tables[name] = body
    configs = config_classes()
    assert {"VeriGateConfig", "ESConfig", "LeanServerConfig", "CoqServerConfig", "ProverPoolConfig"} <= {
        c.__name__ for c in configs
    }
    inherited = {field.name for field in dataclasses.fields(GRPOConfig)}
    for config in configs:
        assert config.__name__ in tables, f"no field table for {config.__name__}"
        rows = re.findall(r"<tr><td><code>(\w+)</code></td>(.*?)</tr>", tables[config.__name__], re.S)
        # Backticks dropped on both sides: the table shows a help's `code` spans as code.
        listed = {name: html_module.unescape(re.sub(r"<[^>]+>", "", cells)).replace("`", "") for name, cells in rows}
        # A field TRL's GRPOConfig does not have is this package's: each must be listed, with its help if it has one.
        for field in dataclasses.fields(config):
            if field.name in inherited and field.name not in listed:
                continue
            assert field.name in listed, f"{config.__name__}.{field.name} is not in the API reference"
            help_text = " ".join(field.metadata.get("help", "").split()).replace("`", "")
            assert help_text in listed[field.name], f"{config.__name__}.{field.name}: its help is not shown"
