#!/usr/bin/env python3
"""Kept for old command lines: the command is `cs336-encode-dataset` (cs336_basics/commands/encode_cli.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing
from cs336_basics.commands.encode_cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
