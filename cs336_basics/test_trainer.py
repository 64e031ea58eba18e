"""The assignment's command-line entry point; the CLI itself is `cs336_basics.commands.cli`.

    python cs336_basics/test_trainer.py bpe_v7 out -v 32000 -d data/owt_train.txt
"""

import sys
from pathlib import Path

if __name__ == "__main__":
    if not __package__:
        # Run as a file: import the package from the checkout, not this folder's modules as top-level ones.
        sys.path[0] = str(Path(__file__).resolve().parent.parent)
    from cs336_basics.commands.cli import main

    sys.exit(main())
