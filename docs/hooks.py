"""MkDocs hook: the site's home page is the repository's README.md.

The README is written for a reader of the repository, so its links point into ``docs/``
(``docs/design.md``, ``docs/demo.png``). The site is built from ``docs/`` itself, so the home
page is the README with that prefix taken off each link. A README link that leads anywhere
else in the repository would be broken on the site: the build stops and names it.
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

README = Path(__file__).resolve().parents[1] / "README.md"
LINK = re.compile(r"(\]\()([^)\s]+)(\))")


def home_page(text: str) -> str:
    """The README's Markdown with its links made relative to ``docs/``.

    :raises PluginError: for a relative link outside ``docs/`` (the site could not serve it).
    """

    def relink(m: re.Match[str]) -> str:
        target = m.group(2)
        if target.startswith(("http://", "https://", "mailto:", "#")):
            return m.group(0)
        if not target.startswith("docs/"):
            raise PluginError(f"README.md links to {target!r}, outside docs/: the site cannot serve it")
        return m.group(1) + target.removeprefix("docs/") + m.group(3)

    return LINK.sub(relink, text)


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the README as ``index.md`` (no such file exists under ``docs/``)."""
    files.append(File.generated(config, "index.md", content=home_page(README.read_text())))
    return files


def on_page_markdown(markdown: str, **kwargs: object) -> str:
    """A page's links to the README (``../README.md#using-it``, which a reader of the repository
    can follow) lead to the home page on the site, which is that README."""
    return markdown.replace("](../README.md", "](index.md")
