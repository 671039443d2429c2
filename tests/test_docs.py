"""The docs run verbatim: every code block of README.md, docs/ and the plugins' READMEs.

Python blocks run (each in a fresh namespace, in a temporary directory), shell blocks run their
`polyduct` commands in process, TOML blocks parse. A block that cannot run here says why in an
HTML comment right before it: `<!-- not runnable: REASON -->`. Blocks labelled `text` are output.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
import torch
from doc_blocks import ROOT, Block, blocks

from polyduct.cli import main

DOCS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").rglob("*.md")),
    *sorted((ROOT / "plugins").glob("*/README.md")),
]
BLOCKS = [b for path in DOCS for b in blocks(path) if b.lang != "text"]
SHELLS = ("bash", "sh", "console")


def _commands(text: str) -> list[list[str]]:
    joined = text.replace("\\\n", " ")
    return [argv for line in joined.splitlines() if (argv := shlex.split(line, comments=True))]


def _run_shell(block: Block) -> None:
    for argv in _commands(block.text):
        if argv[0] != "polyduct":
            pytest.fail(
                f"{block.id}: only `polyduct` commands run here, not {argv[0]!r}; "
                "mark the block <!-- not runnable: REASON -->"
            )
        try:
            status = main(argv[1:])
        except SystemExit as exit_:  # --version, --help
            status = int(exit_.code or 0)
        assert status == 0, f"{block.id}: {shlex.join(argv)} exited {status}"


def _run_python(block: Block) -> None:
    torch._dynamo.reset()
    try:
        code = compile(block.text, block.id, "exec")
        exec(code, {"__name__": "__doc_block__"})  # noqa: S102 -- running the docs is the test
    finally:
        torch._dynamo.reset()


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_doc_block_runs(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if block.note.startswith("not runnable:"):
        reason = block.note.removeprefix("not runnable:").strip()
        assert reason, f"{block.id}: say why the block is not runnable"
        pytest.skip(reason)
    monkeypatch.chdir(tmp_path)
    if block.lang == "python":
        _run_python(block)
    elif block.lang in SHELLS:
        _run_shell(block)
    elif block.lang == "toml":
        if sys.version_info < (3, 11):
            pytest.skip("tomllib needs Python 3.11")
        import tomllib

        tomllib.loads(block.text)
    else:
        pytest.fail(f"{block.id}: label the block (python, bash, toml; text for output)")
