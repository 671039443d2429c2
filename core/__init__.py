"""polyduct: a plugin-based code generator for PyTorch programs."""

from __future__ import annotations

__version__ = "0.1.0"
