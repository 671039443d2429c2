"""Process state in one object: slots made once per state, `reset()` really starting afresh."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from polyduct import state
from polyduct.cache import default_cache
from polyduct.pipeline import Compilation


def test_a_slot_is_made_once_per_state_and_closed_by_a_reset(fresh_process: object) -> None:
    closed: list[list[int]] = []
    slot = state.Slot("test.numbers", list[int], closed.append)
    slot.get().append(1)
    assert slot.get() == [1] and state.current().names() == ("test.numbers",)
    state.reset()
    assert closed == [[1]] and slot.get() == []
    with pytest.raises(ValueError, match="two process-state slots are named 'test.numbers'"):
        state.Slot("test.numbers", dict[str, int]).get()


def test_isolated_gives_the_previous_state_back() -> None:
    before = state.current()
    with state.isolated() as fresh:
        assert state.current() is fresh is not before
    assert state.current() is before


def _program(x: torch.Tensor) -> tuple[torch.Tensor]:
    return (torch.sin(x) * x + x.amax(-1, keepdim=True),)


def _compile(x: torch.Tensor) -> tuple[Compilation, torch.nn.Module]:
    compilation = Compilation.create({"kernels": "cpp"}, {})
    gm = torch.fx.experimental.proxy_tensor.make_fx(_program)(x)
    return compilation, compilation.compile_graph(gm).fn


def test_reset_loads_plugins_and_kernels_afresh(isolated_cache: Path, fresh_process: object) -> None:
    pytest.importorskip("polyduct_cpp")
    x = torch.randn(5, 7)
    x[0, :3] = torch.tensor([0.0, -0.0, 1e-30])
    expected = _program(x)[0]
    first, fn1 = _compile(x)
    torch.testing.assert_close(fn1(x)[0], expected)
    old = state.current()
    assert {"polyduct.plugins", "polyduct.cache", "polyduct_cpp.libraries"} <= set(old.names())
    (old_lib,) = old.get(_libraries()).values()
    assert default_cache().builds > 0  # the kernels were compiled

    state.reset()
    assert state.current() is not old and state.current().names() == ()
    second, fn2 = _compile(x)
    assert second.plugins is not first.plugins  # the plugins were loaded again
    (new_lib,) = _libraries().get().values()
    assert new_lib is not old_lib  # the library was loaded again, from the disk cache
    assert default_cache().builds == 0 and default_cache().hits > 0
    y = torch.randn(5, 7)
    torch.testing.assert_close(fn2(y)[0], _program(y)[0])
    torch.testing.assert_close(fn1(y)[0], _program(y)[0])  # made before the reset, still works


def _libraries() -> Any:
    from polyduct_cpp import backend

    return backend._LIBRARIES
