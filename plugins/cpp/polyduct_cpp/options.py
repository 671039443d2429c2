"""`CppOptions`: how kernels are generated and compiled (validated once, when built)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from polyduct.errors import InvalidOption


# a fact of the machine, fixed while the process runs: not process state
@functools.lru_cache(maxsize=1)
def _host_avx512() -> bool:
    """Whether this host's CPU has AVX-512F (then 512-bit vectors are preferred)."""
    try:
        with open("/proc/cpuinfo") as info:
            return any(line.startswith("flags") and " avx512f" in line for line in info)
    except OSError:
        return False


@dataclass(frozen=True, slots=True)
class CppOptions:
    """Compiler, flags and code-shape choices of the C++ backend."""

    compiler: str = "g++"
    opt_level: int = 3
    march: str = "native"  # recorded in the cache key together with the host CPU's identity
    openmp: bool = True
    parallel_threshold: int = 65536  # elements of work below which a kernel stays single-threaded
    simd_lanes: int = 16  # accumulators per reduction (one per SIMD lane)
    row_cache_limit: int = 16384  # longest row whose expensive values later stages reuse (0: off)
    check_indices: bool = True  # bounds-check indirect indexing
    vector_math: bool = True  # vectorised libm calls through glibc's libmvec
    vector_width: int = 0  # preferred SIMD width in bits; 0: 512 where the host has AVX-512
    precompile_headers: bool = True  # build a GCC .gch of the kernel header (in the background)
    extra_flags: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.compiler or any(c.isspace() for c in self.compiler):
            raise InvalidOption(
                "cpp", "compiler", self.compiler, "a compiler command without spaces"
            )
        if self.opt_level not in (0, 1, 2, 3):
            raise InvalidOption("cpp", "opt_level", self.opt_level, "0, 1, 2 or 3")
        if not self.march.replace("-", "").replace("_", "").isalnum():
            raise InvalidOption("cpp", "march", self.march, "a -march target name")
        if not isinstance(self.parallel_threshold, int) or self.parallel_threshold < 0:
            raise InvalidOption("cpp", "parallel_threshold", self.parallel_threshold, "an int >= 0")
        if not isinstance(self.row_cache_limit, int) or self.row_cache_limit < 0:
            raise InvalidOption("cpp", "row_cache_limit", self.row_cache_limit, "an int >= 0")
        if self.simd_lanes not in (1, 2, 4, 8, 16, 32, 64):
            raise InvalidOption("cpp", "simd_lanes", self.simd_lanes, "1, 2, 4, 8, 16, 32 or 64")
        if self.vector_width not in (0, 128, 256, 512):
            raise InvalidOption("cpp", "vector_width", self.vector_width, "0, 128, 256 or 512")
        if not all(isinstance(f, str) and f.startswith("-") for f in self.extra_flags):
            raise InvalidOption("cpp", "extra_flags", self.extra_flags, "a tuple of -flags")

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> CppOptions:
        """Options from a mapping: `<field>`, `cpp_<field>`, or `<field>` keys under `cpp`.

        Any other key is refused with the list of known ones (a misspelt option is never ignored).
        """
        nested = options.get("cpp", {})
        if not isinstance(nested, Mapping):
            raise InvalidOption("cpp", "cpp", nested, "a mapping of C++ backend options")
        fields = {f.name for f in dataclasses.fields(cls)}
        picked = {}
        for key, value in options.items():
            field = key.removeprefix("cpp_")
            if key != "cpp" and field not in fields:
                known = ", ".join(["cpp", *sorted(fields), *(f"cpp_{f}" for f in sorted(fields))])
                raise InvalidOption("cpp", key, value, f"one of {known}")
            if key != "cpp":
                picked[field] = value
        for key, value in nested.items():
            if key not in fields:
                raise InvalidOption("cpp", key, value, f"one of {', '.join(sorted(fields))}")
            picked[key] = value
        if "extra_flags" in picked:
            picked["extra_flags"] = tuple(picked["extra_flags"])
        return cls(**picked)

    def flags(self) -> tuple[str, ...]:
        """Compiler flags (part of the cache key)."""
        base = [
            f"-O{self.opt_level}",
            f"-march={self.march}",
            "-std=c++17",
            "-shared",
            "-fPIC",
            "-fwrapv",
            "-ffp-contract=off",
            "-fno-math-errno",
            "-fno-trapping-math",
            "-fno-semantic-interposition",
            "-w",
        ]
        if self.openmp:
            base.append("-fopenmp")
        if self.vector_math:
            # sin and cos of one value would fuse into a scalar sincos call and block SIMD.
            base += ["-DPD_VECTOR_MATH", "-fdisable-tree-sincos"]
        width = self.vector_width or (512 if self.march == "native" and _host_avx512() else 0)
        if width:
            base += [f"-mprefer-vector-width={width}", f"-DPD_VECTOR_WIDTH={width}"]
        return (*base, *self.extra_flags)

    def libraries(self) -> tuple[str, ...]:
        """Libraries linked after the source (also part of the cache key)."""
        return ("-lmvec", "-lm") if self.vector_math else ("-lm",)
