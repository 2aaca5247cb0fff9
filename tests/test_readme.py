"""The README is a page a newcomer reads in five minutes and that stands alone in a clone:
short, no link leaving the repository, every seed it cites explained, the demo's picture
present. (Its Python blocks run with every other page's: tests/test_docs.py.)"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
MAX_LINES = 250


def test_the_readme_is_short():
    lines = README.count("\n")
    assert lines <= MAX_LINES, f"README.md has {lines} lines; keep it under {MAX_LINES} and move the rest to docs/"


def test_the_readme_has_a_first_program():
    assert "```python\n" in README


def test_no_link_leaves_the_repository():
    for target in re.findall(r"\]\(([^)]+)\)", README):
        if target.startswith(("http://", "https://", "#")):
            continue
        assert not target.startswith(("..", "/")), f"README links outside the repository: {target}"
        path = target.split("#", 1)[0]
        assert (ROOT / path).exists(), f"README links to a missing file: {target}"
    assert "../shared" not in README


def test_every_seed_it_cites_is_explained():
    for seed in sorted(set(re.findall(r"seeds? (\d{3})(?!\d)", README))):
        assert re.search(rf"\*\*{seed}\*\* \w", README), f"seed {seed} is cited but never said what it is"


def test_the_demo_picture_is_in_the_repository():
    pictures = re.findall(r"!\[[^]]*\]\(([^)]+)\)", README)
    assert pictures, "the README lost the demo's picture"
    for target in pictures:
        assert (ROOT / target).stat().st_size > 10_000
