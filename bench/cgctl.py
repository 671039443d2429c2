"""Callgrind client requests from Python: start/stop instrumentation around one call.

Under `valgrind --tool=callgrind --instr-atstart=no` the process runs uninstrumented (valgrind's
core only, a few times slower than native) until `start()`; only the code between `start()` and
`stop()` is instrumented and counted. That makes counting one compile of a big program feasible,
where `--collect-atstart=no` still instruments (and slows ~50x) the whole process. Counts of
several start/stop pairs add up in the output's totals. The requests are C macros from `valgrind/callgrind.h`, so a tiny shared library is built with the system C compiler
once per process and called through ctypes. Outside valgrind the requests are no-ops.
"""

from __future__ import annotations

import ctypes
import subprocess
import tempfile
from pathlib import Path

SOURCE = r"""
#include <valgrind/callgrind.h>
void pd_cg_start(void) { CALLGRIND_START_INSTRUMENTATION; }
void pd_cg_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; }
"""


def build(directory: Path) -> Path:
    """Compile the client-request library into `directory`; the path of the .so."""
    src = directory / "pd_cgctl.c"
    lib = directory / "pd_cgctl.so"
    src.write_text(SOURCE)
    cmd = ["cc", "-O1", "-shared", "-fPIC", "-o", str(lib), str(src)]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"building the callgrind client library failed: {proc.stderr[-300:]}")
    return lib


class Instrumentation:
    """`with Instrumentation(lib):` counts only the body under callgrind."""

    def __init__(self, lib: Path | None = None) -> None:
        if lib is None:
            lib = build(Path(tempfile.mkdtemp(prefix="pd_cgctl_")))
        self._lib = ctypes.CDLL(str(lib))

    def __enter__(self) -> None:
        self._lib.pd_cg_start()

    def __exit__(self, *exc: object) -> None:
        self._lib.pd_cg_stop()
