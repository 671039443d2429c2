"""polyduct's logs under `torch._logging`: `TORCH_LOGS="polyduct"` and `TORCH_LOGS="output_code"`.

- `TORCH_LOGS="polyduct"` (INFO) shows the pipeline of each compiled graph: lowering, scheduling,
  the backend of each kernel and every fallback, the wrapper; `"+polyduct"` adds DEBUG detail.
- `TORCH_LOGS="output_code"` (torch's own artifact, as for Inductor) shows the generated code of each
  graph: the wrapper module and every kernel as readable multi-line source, each under the path of
  a file holding it (kernels are written to `<cache>/output_code/<wrapper digest>/` when the
  artifact is on).

polyduct uses torch's `output_code` artifact rather than registering one of its own: torch reads
`TORCH_LOGS` when it is imported, and an artifact name it does not know yet makes `import torch`
fail. Since polyduct registers only after that, `register_with_torch` applies the setting to
polyduct's loggers itself, the way torch's `_init_logs` does for its own. `torch._logging.set_logs(output_code=True)` works as well.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from collections.abc import Iterable
from pathlib import Path

from polyduct.cache import default_root
from polyduct.codegen import identifier
from polyduct.kernel import KernelSource

LOG = logging.getLogger("polyduct")
OUTPUT_CODE = "output_code"


# registers with torch's logging, which the process cannot undo: kept out of `polyduct.state`
@functools.cache
def register_with_torch() -> logging.Logger:
    """Register log `polyduct` and polyduct's `output_code` artifact logger (once per process)."""
    from torch._logging import _internal as tl

    tl.register_log("polyduct", ["polyduct"])
    artifact = tl.getArtifactLogger("polyduct", OUTPUT_CODE)
    # Private helpers of torch._logging (torch 2.1 to 2.13): without them the artifact still
    # logs wherever "polyduct" or the root logger has a handler.
    is_torch_handler = getattr(tl, "_is_torch_handler", None)
    setup_handlers = getattr(tl, "_setup_handlers", None)
    state = getattr(tl, "log_state", None)
    if is_torch_handler is None or setup_handlers is None or state is None:
        return artifact
    parent_handled = any(is_torch_handler(h) for h in LOG.handlers)
    if state.is_artifact_enabled(OUTPUT_CODE) and not parent_handled:
        # TORCH_LOGS named the artifact but not "polyduct": give the artifact torch's handler
        setup_handlers(logging.StreamHandler, artifact)
        artifact.propagate = False
    return artifact


def output_code_enabled() -> bool:
    """Whether the `output_code` artifact is on (checked before rendering anything for it)."""
    return register_with_torch().isEnabledFor(logging.DEBUG)


def log_output_code(
    title: str, wrapper_source: str, wrapper_path: Path | None, kernels: Iterable[KernelSource]
) -> None:
    """Log the wrapper and each kernel's source, each under a path of a file that holds it."""
    artifact = register_with_torch()
    if not artifact.isEnabledFor(logging.DEBUG):
        return
    digest = hashlib.sha256(wrapper_source.encode()).hexdigest()[:16]
    folder = default_root() / OUTPUT_CODE / digest
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    if wrapper_path is None:
        wrapper_path = folder / "wrapper.txt"
        wrapper_path.write_text(wrapper_source)
    parts = [f"polyduct output code: {title}", f"# wrapper: {wrapper_path}", wrapper_source]
    for kernel in kernels:
        path = folder / f"{identifier(kernel.name, 'kernel')}.{identifier(kernel.backend)}.txt"
        path.write_text(kernel.source)
        parts += [f"# kernel {kernel.name} ({kernel.backend}): {path}", kernel.source]
    artifact.debug("%s", "\n".join(parts))
