"""The documentation site builds strictly, documents every public name, and lists every version.

Needs the ``docs`` extra (``pip install -e ".[docs]"``); skipped with a reason without it.
"""

from __future__ import annotations

import html
import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

import gather_scatter
from gather_scatter.rules.versions import REGISTRY

ROOT = pathlib.Path(__file__).resolve().parents[1]
NEEDED = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")

pytestmark = pytest.mark.skipif(
    not all(importlib.util.find_spec(name.split(".")[0]) for name in NEEDED),
    reason="the docs tools are not installed (pip install -e '.[docs]')",
)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", PYTHONDONTWRITEBYTECODE="1")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-f", str(ROOT / "mkdocs.yml"),
         "-d", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"
    return out


def test_api_reference_renders_every_public_name(site):
    page = (site / "api" / "index.html").read_text(encoding="utf-8")
    # mkdocstrings gives each documented object a heading whose id is its path; the lazily
    # imported names (Session, run_model, infer_model_shapes) are documented at their module.
    headings = set(re.findall(r'<h[1-6] id="(gather_scatter\.[\w.]+)" class="doc doc-heading"', page))
    assert headings, "the API page has no rendered mkdocstrings entry"
    missing = [name for name in gather_scatter.__all__
               if not any(h == f"gather_scatter.{name}" or h.endswith(f".{name}") for h in headings)]
    assert not missing, f"no API entry for {missing}"
    # each entry has its docstring rendered, not only a heading: the numpy sections become tables
    assert page.count("doc-section-title") >= 10 or page.count("<table>") >= 10


def test_versions_page_lists_every_registered_version(site):
    page = html.unescape((site / "versions" / "index.html").read_text(encoding="utf-8"))
    rows = re.findall(r"<tr>\s*<td>(\w+)</td>\s*<td>([\w.]+)</td>\s*<td>(\d+)</td>", page)
    listed = {("" if domain == "ai.onnx" else domain, op, int(since)) for op, domain, since in rows}
    assert listed == set(REGISTRY)


def test_directives_are_expanded_and_images_resolve(site):
    # the pages hold their own text (issue 26 item 15): no directive is left unexpanded, and
    # the README-inclusion directive of 0.2 is gone with it
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert "<!-- readme:" not in text and "<!-- versions-table" not in text, page
        for src in re.findall(r'<img[^>]+src="([^"]+)"', text):
            if not src.startswith(("http:", "https:", "data:")):
                assert (page.parent / src).resolve().is_file(), (page, src)
    performance = (site / "performance" / "index.html").read_text(encoding="utf-8")
    assert "sizes.png" in performance and "reductions.png" in performance and performance.count("<table>") >= 7
