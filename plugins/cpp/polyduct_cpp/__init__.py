"""polyduct-cpp: the C++ kernel backend of polyduct."""

from __future__ import annotations

from polyduct_cpp.backend import CppBackend, make_backend
from polyduct_cpp.options import CppOptions

__all__ = ["CppBackend", "CppOptions", "make_backend"]
__version__ = "0.1.0"
