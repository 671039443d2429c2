"""Which kernel backend compiles a kernel, from what the installed backends declare.

`kernels="auto"` takes, for a graph's device, the installed backend that declares itself the
default for that device with the highest priority (`KernelBackendSpec.defaults`). A kernel using
an op its backend declares unsupported runs on another installed backend for its device that
supports every op it uses: the device's defaults first, by priority, then the others by name.
The core names no backend here: the order comes from the registrations alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.fx

from polyduct.errors import InvalidOption, UnsupportedOp
from polyduct.handlers.count import OpCounter
from polyduct.kernel import KernelSpec
from polyduct.lowering.graph import FallbackReport
from polyduct.plugins import Plugins
from polyduct.scheduling.kernel_key import trace_stages

AUTO = "auto"


def kernel_contents(spec: KernelSpec) -> tuple[set[str], set[str]]:
    """(overridden aten ops it computes, op-set ops it calls) of one kernel, by tracing it."""
    counter = OpCounter()
    return trace_stages(spec, counter), set(counter.counts)


@dataclass(frozen=True, slots=True)
class StandIn:
    """Kernel `kernel` runs on `stand_in`: its backend declares `ops` unsupported."""

    kernel: str
    backend: str
    ops: tuple[str, ...]
    stand_in: str

    def record(self, report: FallbackReport) -> None:
        report.add_kernel(self.kernel, self.backend, list(self.ops), self.stand_in)


@dataclass(frozen=True)
class KernelChoice:
    """The kernel backends of one compilation: `requested` is the `kernels` option."""

    plugins: Plugins
    requested: str

    def defaults(self, device: str) -> list[str]:
        """Installed backends that are a default for `device`, highest priority first."""
        ranked = [
            (-spec.defaults[device], name)
            for name, spec in self.plugins.kernel_backends.items()
            if device in spec.defaults
        ]
        return [name for _, name in sorted(ranked)]

    def for_graph(self, gm: torch.fx.GraphModule) -> str:
        """`requested`, or for "auto" the default for the graph's device (CUDA if any input is on
        a CUDA device, else CPU)."""
        if self.requested != AUTO:
            return self.requested
        devices = {
            node.meta["val"].device.type
            for node in gm.graph.nodes
            if node.op == "placeholder" and isinstance(node.meta.get("val"), torch.Tensor)
        }
        device = "cuda" if "cuda" in devices else "cpu"
        found = self.defaults(device)
        if not found:
            installed = ", ".join(self.plugins.kernel_backends.names()) or "none"
            raise InvalidOption(
                "polyduct",
                "kernels",
                AUTO,
                f"a backend name: no installed kernel backend is a default for {device} "
                f"(installed: {installed})",
            )
        return found[0]

    def supporting(
        self, spec: KernelSpec, name: str, uses: set[str] | None = None
    ) -> tuple[str, StandIn | None]:
        """`name`, or when that backend declares an op of `spec` unsupported, another installed
        backend for the kernel's device that supports them all, and why (a backend can so be
        built one op at a time). `uses`: the op-set ops `spec` calls, when already traced."""
        declared = self.plugins.kernel_backends.get(name).backend_cls.caps.unsupported
        if not declared:
            return name, None
        uses = kernel_contents(spec)[1] if uses is None else uses
        needed = sorted(uses & set(declared))
        if not needed:
            return name, None
        for other in [*self.defaults(spec.device), *self.plugins.kernel_backends.names()]:
            caps = self.plugins.kernel_backends.get(other).backend_cls.caps
            if spec.device in caps.devices and not uses & set(caps.unsupported):
                return other, StandIn(spec.name, name, tuple(needed), other)
        raise UnsupportedOp(needed[0], name, f"no installed backend supports {needed}", spec.name)
