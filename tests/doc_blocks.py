"""Fenced code blocks of the Markdown docs, with the HTML comment that precedes each (if any).

A comment `<!-- not runnable: REASON -->` right before a block exempts it from the docs test
(tests/test_docs.py); `<!-- example: NAME -->` names a block that a test loads by name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_FENCE = re.compile(
    r"(?:<!--\s*(?P<note>[^\n]*?)\s*-->\s*\n)?^```(?P<lang>[a-z]*)\n(?P<body>.*?)^```\s*$",
    re.MULTILINE | re.DOTALL,
)


@dataclass(frozen=True)
class Block:
    """One fenced block: its file, first line number, language, preceding note and text."""

    path: Path
    line: int
    lang: str
    note: str
    text: str

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """Every fenced block of `path`, in order."""
    text = path.read_text()
    found = []
    for match in _FENCE.finditer(text):
        line = text.count("\n", 0, match.start("body"))
        found.append(Block(path, line, match["lang"], match["note"] or "", match["body"]))
    return found


def example(path: Path, name: str) -> str:
    """The text of the block marked `<!-- example: NAME -->` in `path`."""
    for block in blocks(path):
        if block.note == f"example: {name}":
            return block.text
    raise LookupError(f"{path} has no block marked 'example: {name}'")
