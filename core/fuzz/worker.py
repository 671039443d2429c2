"""One worker process: generate, write, import and check programs; shrink the ones that fail.

Every program runs from the pytest module written for it, so a failure's reproducer is exactly
what ran. A failing program is shrunk in the same process; the unshrunk module is on disk
first, so a crash or a hang while shrinking still leaves a reproducer.
"""

from __future__ import annotations

import faulthandler
import itertools
import os
import shutil
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import torch

from polyduct.fuzz.check import InvalidProgram, Mismatch, UpstreamBug, device_lost
from polyduct.fuzz.generate import KNOWN, generate
from polyduct.fuzz.program import Program
from polyduct.fuzz.repro import load_module, render_module, unload_module, write_module
from polyduct.fuzz.shrink import shrink

_MODULES = itertools.count()


@dataclass(frozen=True)
class Config:
    """What every worker needs to run its share of a campaign."""

    backend: str
    seed: int
    options: dict[str, Any]
    device: str
    dtypes: tuple[torch.dtype, ...]
    out: Path
    shrink_s: float = 90.0
    known: bool = True


@dataclass
class Result:
    """The outcome of one graph: pass, mismatch, crash, timeout, invalid, known or upstream (a bug
    of torch that `aot_eager` shows too)."""

    index: int
    status: str
    detail: str = ""
    seconds: float = 0.0
    stmts: int = 0
    repro: str = ""
    tags: list[str] = field(default_factory=list)


def _run(path: Path) -> tuple[str, str]:
    """(status, detail) of the module at `path`."""
    module = load_module(path, f"polyduct_fuzz_case_{os.getpid()}_{next(_MODULES)}")
    try:
        module.check_program(module.fn, module.PROGRAM, module.BACKEND, module.OPTIONS,
                             module.DEVICE)
    except InvalidProgram as exc:
        return "invalid", str(exc)
    except UpstreamBug as exc:
        return "upstream", str(exc)
    except Mismatch as exc:
        return "mismatch", str(exc)
    except Exception as exc:  # noqa: BLE001 -- any compile or run error is a crash finding
        tail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-4:])
        return "crash", f"{type(exc).__name__}: {exc}\n{tail}"
    finally:
        unload_module(module)
    return "pass", ""


def _signature(status: str, detail: str) -> str:
    return status if status != "crash" else detail.split(":", 1)[0]


class Runner:
    """Runs one program at a time for a campaign, in this process."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.scratch = Path(tempfile.mkdtemp(prefix="polyduct-fuzz-"))

    def module_text(self, program: Program, index: int, detail: str = "") -> str:
        c = self.config
        return render_module(program, c.backend, index, c.options, c.device, detail)

    def check(self, program: Program, index: int) -> tuple[str, str]:
        path = self.scratch / f"g{index}_{next(_MODULES)}.py"
        write_module(path, self.module_text(program, index))
        try:
            return _run(path)
        finally:
            path.unlink(missing_ok=True)

    def run(self, index: int, on_shrink: Any = None, on_generated: Any = None) -> Result:
        c = self.config
        start = time.monotonic()
        program = generate(c.seed, index, c.dtypes, c.known)  # runs eager on stand-in inputs
        if on_generated is not None:
            on_generated(index)
        status, detail = self.check(program, index)
        result = Result(index, status, detail, stmts=len(program.stmts))
        if status in ("mismatch", "crash"):
            known = sorted(program.all_tags() & set(KNOWN))
            if known:
                result.status, result.tags = "known", known
            else:
                self._reduce(program, index, result, on_shrink)
        elif status == "upstream":  # unshrunk: a report for torch, not a failure of polyduct
            c = self.config
            path = c.out / f"upstream_{c.backend}_s{c.seed}_g{index}.py"
            write_module(path, self.module_text(program, index, detail))
            result.repro = str(path)
        result.seconds = time.monotonic() - start
        return result

    def _reduce(self, program: Program, index: int, result: Result, on_shrink: Any) -> None:
        path = self.config.out / f"fail_{self.config.backend}_s{self.config.seed}_g{index}.py"
        write_module(path, self.module_text(program, index, result.detail))
        result.repro = str(path)
        if on_shrink is not None:
            on_shrink(index)
        want = _signature(result.status, result.detail)

        def still_fails(cand: Program) -> bool:
            return _signature(*self.check(cand, index)) == want

        small = shrink(program, still_fails, self.config.shrink_s)
        status, detail = self.check(small, index)
        if _signature(status, detail) == want:
            result.detail, result.stmts = detail, len(small.stmts)
            write_module(path, self.module_text(small, index, detail))
        result.tags = sorted(small.all_tags())


def device_unusable(device: str) -> bool:
    """Whether a CUDA error has left `device` unusable for the rest of this process."""
    if device != "cuda":
        return False
    try:  # a device-side assert makes every later call raise, this small one too
        torch.cuda.synchronize()
        torch.ones(1, device=device).add_(1).item()
    except Exception as exc:  # noqa: BLE001 -- only a lost device retires the worker
        return device_lost(exc)
    return False


def serve(config: Config, conn: Connection) -> None:
    """Worker main loop: receive graph indices, send back ("shrinking", i) and Results. On CUDA,
    kernel launches are synchronous, so an error surfaces in the call that made it (eager's or
    polyduct's), and the worker exits once its device is unusable: the runner starts another."""
    if config.device == "cuda":  # before CUDA starts in this fresh interpreter
        os.environ["CUDA_LAUNCH_BLOCKING"] = "1"
    faulthandler.enable()  # a worker killed by a signal leaves its Python stack in the log
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")  # eager's warnings about generated programs are noise here
    runner = Runner(config)

    def on_shrink(index: int) -> None:
        conn.send(("shrinking", index))

    def on_generated(index: int) -> None:
        conn.send(("generated", index))

    try:
        while True:
            index = conn.recv()
            if index is None:
                return
            conn.send(("result", runner.run(index, on_shrink, on_generated)))
            if device_unusable(config.device):
                return
    finally:
        shutil.rmtree(runner.scratch, ignore_errors=True)
