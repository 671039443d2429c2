"""TORCH_LOGS shows polyduct: the pipeline under "polyduct", generated code under "output_code"."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

PROGRAM = """
import torch
def f(x):
    return (torch.sin(x) * 2).sum(0) + 1
torch.compile(f, backend="polyduct", options={"kernels": "reference"})(torch.randn(8, 5))
"""


def test_torch_logs_show_the_pipeline_and_readable_output_code(tmp_path: Path) -> None:
    env = dict(os.environ, TORCH_LOGS="polyduct,output_code", POLYDUCT_CACHE_DIR=str(tmp_path))
    run = subprocess.run(
        [sys.executable, "-c", PROGRAM],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    log = run.stderr
    assert re.search(r"inference graph 0: lowered \d+ FX nodes to \d+ IR nodes", log), log
    assert re.search(r"inference graph 0: \d+ kernels \(\w+: \d+\); wrapper python", log), log
    wrapper = re.search(r"# wrapper: (\S+)", log)
    kernel = re.search(r"# kernel (\w+) \((\w+)\): (\S+)", log)
    assert wrapper and kernel, log
    assert "def call(*inputs):" in Path(wrapper[1]).read_text()
    source = Path(kernel[3]).read_text()
    assert source.count("\n") > 3  # readable, multi-line: not an escaped one-line string
    first_line = source.splitlines()[0]
    assert any(first_line in line for line in log.splitlines())
