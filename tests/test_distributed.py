"""Data-parallel training on 2 CPU ranks (gloo) with blocks compiled by polyduct: FSDP2, DDP."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch.distributed as dist

from bench.redis_server import free_port

WORKER = Path(__file__).with_name("distributed_worker.py")
WORLD = 2

pytestmark = pytest.mark.skipif(
    not dist.is_available() or not dist.is_gloo_available(), reason="torch built without gloo"
)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for both modes: they compile the same blocks (the second mode loads them)."""
    return tmp_path_factory.mktemp("distributed-cache")


@pytest.mark.parametrize("mode", ["fsdp", "ddp"])
def test_gradients_and_steps_equal_eager(mode: str, cache_dir: Path) -> None:
    port = str(free_port())
    env = {**os.environ, "OMP_NUM_THREADS": "1", "POLYDUCT_CACHE_DIR": str(cache_dir)}
    ranks = [
        subprocess.Popen(
            [sys.executable, str(WORKER), mode, str(rank), str(WORLD), port],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in range(WORLD)
    ]
    outputs = [rank.communicate(timeout=120)[0] for rank in ranks]
    for rank, (proc, out) in enumerate(zip(ranks, outputs, strict=True)):
        assert proc.returncode == 0, f"{mode} rank {rank} failed:\n{out[-4000:]}"
        assert f"{mode} rank {rank}: " in out, f"{mode} rank {rank} stopped early:\n{out[-4000:]}"
