"""examples/speedup.py claims a ratio only when the interleaved rounds agree."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

PATH = Path(__file__).resolve().parents[1] / "examples" / "speedup.py"


@pytest.fixture(scope="module")
def speedup() -> ModuleType:
    spec = importlib.util.spec_from_file_location("speedup_example", PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_steady_rounds_give_a_ratio_with_its_range(speedup: ModuleType) -> None:
    eager = [2.0, 2.02, 1.98, 2.01, 2.0, 1.99]
    ours = [1.0, 1.01, 0.99, 1.0, 1.0, 1.0]
    lines = speedup.report({"eager": eager, "polyduct-cpp": ours}, "polyduct-cpp", 0.10)
    assert lines[-1].startswith("polyduct-cpp vs eager: 2.00x (per-round ratios 2.00-")


def test_noisy_rounds_give_no_ratio(speedup: ModuleType) -> None:
    eager = [2.0, 9.0, 2.1, 40.0, 2.0, 3.5]  # another job took the cores in some rounds
    ours = [1.0, 1.0, 1.1, 1.0, 0.9, 1.0]
    line = speedup.report({"eager": eager, "ours": ours}, "ours", 0.10)[-1]
    assert "no ratio, the machine is too noisy" in line


def test_rounds_are_interleaved_in_rotating_order(speedup: ModuleType) -> None:
    calls: list[str] = []
    variants = {name: (lambda name=name: calls.append(name)) for name in "abc"}
    samples = speedup.interleaved(variants, rounds=3)
    assert all(len(v) == 3 for v in samples.values())
    firsts = []
    for i in range(3, len(calls)):  # after the warm-up calls: a new variant starts each batch
        if calls[i] != calls[i - 1]:
            firsts.append(calls[i])
    assert {"a", "b", "c"} <= set(firsts)
