from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
if not torch.cuda.is_available():  # Triton kernels run under its interpreter on CPU
    os.environ.setdefault("TRITON_INTERPRET", "1")

from helpers import PyLoader


@pytest.fixture
def loader(tmp_path: Path) -> PyLoader:
    return PyLoader(tmp_path)
