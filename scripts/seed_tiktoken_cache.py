#!/usr/bin/env python3
"""Kept for old command lines: the command is `cs336-seed-tiktoken` (cs336_basics/commands/seed_tiktoken_cache.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing
from cs336_basics.commands.seed_tiktoken_cache import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
