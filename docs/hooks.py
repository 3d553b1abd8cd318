"""MkDocs hook: the repository files that pages link to outside ``docs/`` are published with the site.

A page links to a grammar or to the benchmark chart by its path in the repository, relative to the page
(``../grammars/schema.lark``, ``../bench/ratios.svg``), which is what works on GitHub and in a clone. MkDocs
only knows the files under ``docs/``, so here every such target that is a file (not a page: ``.md`` targets are
left to MkDocs) is added to the site at its repository path (``grammars/schema.lark``), and the link is pointed at
that copy. A target that does not exist is left as written, and ``mkdocs build --strict`` fails on it.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent

# `](../path)` of a link or an image, up to an anchor, a title or the closing parenthesis.
_OUTSIDE = re.compile(r"\]\((\.\./[^)\s#]+)")


def _repo_path(page_uri: str, target: str) -> str | None:
    """The repository path of ``target`` linked from the page ``docs/<page_uri>``, if it is a file outside docs/."""
    path = posixpath.normpath(posixpath.join("docs", posixpath.dirname(page_uri), target))
    if path.startswith("../") or path.startswith("docs/") or path.endswith(".md"):
        return None
    return path if (ROOT / path).is_file() else None


def on_files(files, config):  # noqa: ANN001, ANN201 (MkDocs' hook signature)
    wanted: set[str] = set()
    for page in files.documentation_pages():
        for target in _OUTSIDE.findall(page.content_string):
            path = _repo_path(page.src_uri, target)
            if path is not None:
                wanted.add(path)
    for path in sorted(wanted):
        if files.get_file_from_path(path) is None:
            files.append(File(path, str(ROOT), config["site_dir"], config["use_directory_urls"]))
    return files


def on_page_markdown(markdown, page, config, files):  # noqa: ANN001, ANN201
    def point_at_copy(match: re.Match[str]) -> str:
        target = match.group(1)
        path = _repo_path(page.file.src_uri, target)
        if path is None:
            return match.group(0)
        return "](" + posixpath.relpath(path, posixpath.dirname(page.file.src_uri) or ".")

    return _OUTSIDE.sub(point_at_copy, markdown)
