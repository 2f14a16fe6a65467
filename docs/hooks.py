"""MkDocs hook: the files at the repository's root that the documentation links to.

The pages in docs/ link to ARCHITECTURE.md, CONTRIBUTING.md, the screenshots and the example
configuration where they lie in the repository (`../../screenshots/board.svg`), so the links
also work where the Markdown is read as it is, on a forge or in an editor. MkDocs sees only
docs/: this hook adds each root file a page links to, at its path from the root
(`screenshots/board.svg`), and rewrites the link to reach it there; a root page's link into
docs/ (`docs/index.md`) is rewritten the same way. A link to a file that does not exist is
left as it is, for `mkdocs build --strict` to refuse.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
# The contributor's documents live at the root and are pages of the site too.
ROOT_PAGES = ("ARCHITECTURE.md", "CONTRIBUTING.md", "CHANGELOG.md")
LINK = re.compile(r"\]\(([^)\s#]+)(#[^)\s]*)?\)")


def _outside(source: Path, target: str) -> Path | None:
    """The root file `target` names, written relative to `source`, when it lies outside docs/."""
    if "://" in target or target.startswith(("/", "mailto:")):
        return None
    path = (source.parent / target).resolve()
    if path.is_relative_to(DOCS) or not path.is_relative_to(ROOT) or not path.is_file():
        return None
    return path


def on_files(files: Files, config: Any) -> Files:
    """Add the root pages, and every root file a page links to, at their paths from the root."""
    wanted = {ROOT / name for name in ROOT_PAGES}
    for source in [*DOCS.rglob("*.md"), *wanted]:
        for target, _ in LINK.findall(source.read_text()):
            if found := _outside(source, target):
                wanted.add(found)
    for path in sorted(wanted):
        uri = path.relative_to(ROOT).as_posix()
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files


def _uri(source: Path, target: str) -> str | None:
    """Where in the site the file `target` (written relative to `source`) is, if it is one."""
    if found := _outside(source, target):
        return found.relative_to(ROOT).as_posix()
    path = (source.parent / target).resolve()
    if "://" in target or not path.is_relative_to(DOCS) or not path.is_file():
        return None
    return path.relative_to(DOCS).as_posix()


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Links to a file go to where it is in the site."""
    source = Path(page.file.abs_src_path)
    here = posixpath.dirname(page.file.src_uri)

    def moved(link: re.Match[str]) -> str:
        uri = _uri(source, link[1])
        if uri is None:
            return link[0]
        return f"]({posixpath.relpath(uri, here or '.')}{link[2] or ''})"

    return LINK.sub(moved, markdown)
