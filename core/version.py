"""The core distribution's version (a module of its own, so any module may import it)."""

from __future__ import annotations

__version__ = "0.1.0"
