"""Every error polyduct raises on purpose derives from `CodegenError` and carries its data as fields.

Messages name what a user or plugin author needs to act: the op, the backend, the kernel or line.
Modules that need a new error add a subclass here, so there is one place to read them all.
"""

from __future__ import annotations

from collections.abc import Iterable


class CodegenError(Exception):
    """Base of all polyduct errors."""


class IncompleteBackend(CodegenError):
    """A kernel backend was registered whose ops handler lacks ops it did not declare unsupported."""

    def __init__(self, backend: str, missing: Iterable[str]) -> None:
        self.backend, self.missing = backend, tuple(missing)
        super().__init__(
            f"backend {backend!r} is missing {len(self.missing)} op(s): {', '.join(self.missing)}"
        )


class UnsupportedOp(CodegenError):
    """A backend was asked for an op (or an op on a dtype) that it does not implement."""

    def __init__(self, op: str, backend: str, detail: str = "", kernel: str | None = None) -> None:
        self.op, self.backend, self.detail, self.kernel = op, backend, detail, kernel
        where = f" in kernel {kernel!r}" if kernel else ""
        extra = f": {detail}" if detail else ""
        super().__init__(f"backend {backend!r} does not support op {op!r}{where}{extra}")


class DuplicateName(CodegenError):
    """Two registrations used one name (two distributions shipping one backend name, say)."""

    def __init__(self, kind: str, name: str, old: str, new: str) -> None:
        self.kind, self.name, self.old, self.new = kind, name, old, new
        super().__init__(f"{kind} {name!r} is registered twice: by {old} and by {new}")


class OverlappingWrite(CodegenError, RuntimeError):
    """An in-place op writes memory it also reads through another, partly overlapping view; eager
    refuses it, and so does polyduct (a `RuntimeError`, as eager's)."""

    def __init__(self, op: str, node: str) -> None:
        self.op, self.node = op, node
        super().__init__(
            "unsupported operation: some elements of the input tensor and the written-to tensor "
            "refer to a single memory location. Please clone() the tensor before performing the "
            f"operation. (polyduct: in-place op {op!r}, graph node {node!r})"
        )


class ContestedName(CodegenError):
    """Several distributions registered one name; none of them is used until the user chooses."""

    def __init__(self, kind: str, name: str, claimants: Iterable[str]) -> None:
        self.kind, self.name, self.claimants = kind, name, tuple(claimants)
        super().__init__(
            f"{kind} {name!r} is claimed by {' and by '.join(self.claimants)}; none of them is "
            f"used. Choose one with POLYDUCT_CHOOSE={name}=DISTRIBUTION "
            "(or PluginOptions(choose=...))"
        )


class UnknownName(CodegenError):
    """A name (backend, wrapper, op, option) was asked for that is not registered."""

    def __init__(
        self, kind: str, name: str, known: Iterable[str], label: str = "installed"
    ) -> None:
        self.kind, self.name, self.known = kind, name, tuple(sorted(known))
        listing = ", ".join(self.known) or "none"
        super().__init__(f"unknown {kind} {name!r}; {label}: {listing}")


class InvalidOption(CodegenError):
    """An option value was rejected when the options object was built."""

    def __init__(self, owner: str, option: str, value: object, expected: str) -> None:
        self.owner, self.option, self.value, self.expected = owner, option, value, expected
        super().__init__(f"{owner}: option {option}={value!r} is invalid; expected {expected}")


class KernelCompileError(CodegenError):
    """A backend compiler rejected a kernel; names the kernel and where its source was written."""

    def __init__(self, backend: str, kernel: str, source_path: str, log: str) -> None:
        self.backend, self.kernel, self.source_path, self.log = backend, kernel, source_path, log
        super().__init__(
            f"backend {backend!r} failed to compile kernel {kernel!r} "
            f"(source written to {source_path}):\n{log}"
        )


class KernelIndexError(CodegenError, IndexError):
    """An indirect index was out of bounds at run time; names the kernel, buffer, index and size."""

    def __init__(self, kernel: str, buffer: str, index: int, size: int) -> None:
        self.kernel, self.buffer, self.index, self.size = kernel, buffer, index, size
        super().__init__(
            f"kernel {kernel!r}: index {index} is out of bounds for buffer {buffer!r} of size {size}"
        )


class LoweringError(CodegenError):
    """An aten op could not be lowered or run as an extern call; names the op and the graph node."""

    def __init__(self, op: str, node: str, detail: str) -> None:
        self.op, self.node, self.detail = op, node, detail
        super().__init__(f"cannot lower {op} (graph node {node!r}): {detail}")


class WrapperError(CodegenError):
    """A wrapper backend could not handle a Wrapper IR line; names the wrapper and the line."""

    def __init__(self, wrapper: str, line: object, detail: str) -> None:
        self.wrapper, self.line, self.detail = wrapper, line, detail
        super().__init__(f"wrapper {wrapper!r} failed on {line!r}: {detail}")


class PluginLoadError(CodegenError):
    """A plugin distribution failed to import or register (fatal with POLYDUCT_STRICT_PLUGINS=1)."""

    def __init__(self, distribution: str, entry_point: str, stage: str, detail: str) -> None:
        self.distribution, self.entry_point = distribution, entry_point
        self.stage, self.detail = stage, detail
        super().__init__(
            f"plugin {entry_point!r} of distribution {distribution} failed at {stage}: {detail}"
        )


class InputMismatch(CodegenError, ValueError):
    """A compiled program got an input whose size, stride or dtype differs from what it expects."""

    def __init__(self, name: str, attr: str, expected: object, actual: object) -> None:
        self.name, self.attr, self.expected, self.actual = name, attr, expected, actual
        super().__init__(f"input {name!r}: expected {attr} {expected}, got {actual}")


class KernelAssertError(CodegenError, AssertionError):
    """A device-side assertion (`device_assert_async`) failed at run time; names kernel and message."""

    def __init__(self, kernel: str, backend: str, msg: str) -> None:
        self.kernel, self.backend, self.msg = kernel, backend, msg
        super().__init__(f"backend {backend!r}, kernel {kernel!r}: device assertion failed: {msg}")


class PackagingUnsupported(CodegenError):
    """A kernel backend cannot load prebuilt kernels, so its kernels cannot go in an AOT package;
    `reason`: why not for this program (none: the backend never can)."""

    def __init__(self, backend: str, reason: str | None = None) -> None:
        if reason is None:
            reason = "it cannot load prebuilt kernels (KernelBackend.package / load_packaged)"
        super().__init__(
            f"kernel backend {backend!r}: this program cannot be packaged ahead of time: {reason}"
        )
        self.backend, self.reason = backend, reason


class PackageError(CodegenError):
    """An AOT package that cannot be loaded here: damaged, truncated, of another format version,
    or made for another torch, Python, machine or device."""

    def __init__(self, path: object, reason: str) -> None:
        super().__init__(f"AOT package {path}: {reason}")
        self.path, self.reason = path, reason
