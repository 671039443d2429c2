"""`python -m polyduct`: the same as the `polyduct` command."""

from __future__ import annotations

import sys

from polyduct.cli import main

if __name__ == "__main__":
    sys.exit(main())
