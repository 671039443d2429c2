"""Triton plugin tests run in Triton's CPU interpreter; it must be chosen before triton imports."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

# The conformance plugin (--polyduct-backend) loads through the pytest11 entry point of polyduct.
