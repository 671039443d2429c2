"""The precompiled-header build a first compile starts is never orphaned by the process exiting."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROGRAM = """
import torch
f = torch.compile(lambda x: (x * 2).sin(), backend="polyduct", options={"kernels": "cpp"})
x = torch.randn(37)
assert torch.allclose(f(x), (x * 2).sin())
"""


def test_a_short_process_leaves_the_header_built_and_no_temporary_directory(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "POLYDUCT_CACHE_DIR": str(tmp_path / "cache")}
    subprocess.run([sys.executable, "-c", PROGRAM], env=env, check=True, timeout=300)
    pch = tmp_path / "cache" / "cpp-pch"
    leftovers = [p.name for p in pch.iterdir() if p.name.startswith(".")]
    assert not leftovers, f"temporary build directories left behind: {leftovers}"
    assert list(pch.glob("*/polyduct_cpp.h.gch")), "the precompiled header never landed"
