"""Griffe extension for the API reference: the package's docstrings use a little reStructuredText, shown as Markdown.

The docstrings follow the house style of torchgen and the standard library: Sphinx roles (``:func:`name```) and
``Note [title]`` blocks underlined with ``~~~``. Markdown has neither, so for the site (and only there: the
source is not touched) a role becomes a code span and a note's underline makes its title bold.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:func|class|meth|attr|data|mod|exc|obj):`~?([^`]+)`")
_UNDERLINED = re.compile(r"^(?P<title>\S[^\n]*)\n(?P<line>[~=-]{3,})[ \t]*$", re.M)


def rst_to_markdown(text: str) -> str:
    text = _ROLE.sub(r"`\1`", text)
    return _UNDERLINED.sub(
        lambda m: f"**{m['title']}**" if len(m["line"]) >= len(m["title"].rstrip()) else m[0], text
    )


class RstToMarkdown(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:  # noqa: ARG002
        if obj.docstring is not None:
            obj.docstring.value = rst_to_markdown(obj.docstring.value)
