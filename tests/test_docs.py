"""Every page of the documentation stays true: each ```python block of README.md and of
every docs/*.md runs as written, on its own, in a temporary directory; and the site builds
with ``mkdocs build --strict``, so a broken link, a missing page or a missing anchor fails
the suite."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# A fence opens at the start of a line (indented inside a list item, too) and closes with
# the same indent; the block's own indent is taken off before it runs.
FENCE = re.compile(r"^(?P<indent>[ \t]*)```python\n(?P<body>.*?)^(?P=indent)```", re.S | re.M)


def python_blocks() -> list[tuple[str, int, str]]:
    """(page, block number from 1, code) for every ```python block of every page."""
    found = []
    for page in PAGES:
        for n, m in enumerate(FENCE.finditer(page.read_text()), 1):
            indent = len(m.group("indent"))
            code = "".join(line[indent:] for line in m.group("body").splitlines(keepends=True))
            found.append((str(page.relative_to(ROOT)), n, code))
    return found


BLOCKS = python_blocks()


def test_the_docs_have_python_examples():
    pages = {page for page, _, _ in BLOCKS}
    assert "README.md" in pages and len(pages) >= 5, pages


@pytest.mark.parametrize(("page", "n", "code"), BLOCKS, ids=[f"{p}#{n}" for p, n, _ in BLOCKS])
def test_every_python_block_runs_as_written(page, n, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # whatever a block writes lands in a temporary directory
    compiled = compile(code, f"{page} python block {n}", "exec")
    exec(compiled, {"__name__": "__docs__", "print": lambda *a, **k: None})


def test_the_site_builds_strictly(tmp_path):
    """The whole site, as `mkdocs build --strict` builds it: any warning fails the build."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    site = tmp_path / "site"
    home = (site / "index.html").read_text()
    assert 'src="demo.png"' in home, "the home page is not the README with its links made relative"
    # The 404 page carries the navigation and no content links: every page must be in it.
    nav = (site / "404.html").read_text()
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert (site / page.stem / "index.html").exists(), f"{page.name} was not built"
        assert re.search(rf'href="[^"]*/{page.stem}/"', nav), f"{page.name} is not in the navigation (docs/.nav.yml)"


def test_the_home_page_is_the_readme():
    """The site's home is README.md with its docs/ links made relative (docs/hooks.py)."""
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    home_page = hooks.home_page
    text = home_page("[a](docs/design.md#errors) ![b](docs/demo.png) [c](https://x.org) [d](#top)")
    assert text == "[a](design.md#errors) ![b](demo.png) [c](https://x.org) [d](#top)"
    from mkdocs.exceptions import PluginError

    with pytest.raises(PluginError, match="outside docs/"):
        home_page("[e](tests/test_docs.py)")
