#!/usr/bin/env python3
"""Copy the CS336 handout's tests into this checkout's tests/, to use this repository as your
assignment checkout.

    python scripts/add_handout_tests.py path/to/assignment1-basics

Copies everything under the handout's tests/ (adapters.py, conftest.py, common.py, test_*.py,
fixtures/, _snapshots/, ...) into tests/. None of this project's own test files has a handout name
(ours are the root conftest.py, tests/support.py and test_*.py names the handout does not use), so
nothing of ours is overwritten. A file that exists with other contents stops the copy before any
file is written, unless --update is given (to take a newer handout over an earlier copy).

Then run_train_bpe and get_tokenizer in the copied tests/adapters.py are replaced by ours, which call
cs336_bpe (cs336_basics/commands/swap_in.py, also `python -m cs336_bpe.commands.swap_in`; the handout's file is kept as
tests/adapters.py.orig). An adapters.py swapped in this way counts as the handout's when the script
runs again. If the swap is refused (the handout's file does not look as expected), the copy stands,
the reason is printed, and the two functions are to be pasted from cs336_basics/adapters.py by hand.

Exit status: 0 done; 1 nothing copied (files with other contents) or the swap was refused; 2 no handout.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import sys
import types
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SKIPPED_PARTS = {"__pycache__", ".pytest_cache"}


def load_swap_in() -> types.ModuleType:
    """cs336_basics/commands/swap_in.py of this checkout, loaded from its file: `import cs336_basics.commands.swap_in`
    would first run the package's __init__ (the student's to extend, and it loads the compiled
    extensions), none of which editing a text file needs. swap_in imports nothing of the package."""
    path = REPO_ROOT / "cs336_basics" / "commands" / "swap_in.py"
    spec = importlib.util.spec_from_file_location("cs336_swap_in", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


swap_in = load_swap_in()


def handout_files(handout_tests: Path) -> list[Path]:
    """Every file under the handout's tests/, relative to it, build caches left out."""
    return sorted(
        path.relative_to(handout_tests)
        for path in handout_tests.rglob("*")
        if path.is_file() and not SKIPPED_PARTS.intersection(path.relative_to(handout_tests).parts)
    )


def plan_copy(handout_tests: Path, dest: Path) -> tuple[list[Path], list[Path], list[Path]]:
    """(files to copy, files already there with the same contents, files there with other contents)."""
    new, same, different = [], [], []
    for relative in handout_files(handout_tests):
        target = dest / relative
        if not target.exists():
            new.append(relative)
        elif target.is_file() and target.read_bytes() in expected_contents(handout_tests, relative):
            same.append(relative)
        else:
            different.append(relative)
    return new, same, different


def expected_contents(handout_tests: Path, relative: Path) -> set[bytes]:
    """What a copy of a handout file may hold: its bytes, and for adapters.py also those with our
    functions swapped in (what this script leaves there), so that running it again is no conflict."""
    data = (handout_tests / relative).read_bytes()
    if relative != Path("adapters.py"):
        return {data}
    try:
        return {data, swap_in.swap_bytes(data)}
    except swap_in.SwapError:
        return {data}


def handout_dependencies(handout: Path) -> list[str]:
    """The handout's [project] dependencies (its tests need torch, numpy, tiktoken, ...), if readable."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        return []
    try:
        with open(handout / "pyproject.toml", "rb") as file:
            return list(tomllib.load(file).get("project", {}).get("dependencies", []))
    except (OSError, tomllib.TOMLDecodeError):
        return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("handout", type=Path, help="the handout checkout (it has tests/adapters.py)")
    parser.add_argument("--dest", type=Path, default=REPO_ROOT / "tests", help="where to copy (tests/)")
    parser.add_argument("--update", action="store_true", help="overwrite files that exist with other contents")
    args = parser.parse_args(argv)

    handout_tests = args.handout / "tests"
    if not (handout_tests / "adapters.py").is_file():
        missing = handout_tests / "adapters.py"
        print(f"error: {missing} not found; give the root of the handout checkout", file=sys.stderr)
        return 2
    if handout_tests.resolve() == args.dest.resolve():
        print("error: the handout's tests/ is the destination itself", file=sys.stderr)
        return 2
    new, same, different = plan_copy(handout_tests, args.dest)
    if different and not args.update:
        listing = "\n".join(f"  {args.dest / relative}" for relative in different)
        print(
            f"error: these files exist with other contents; nothing was copied:\n{listing}\n"
            "(pass --update to overwrite them with the handout's)",
            file=sys.stderr,
        )
        return 1
    for relative in new + (different if args.update else []):
        target = args.dest / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(handout_tests / relative, target)
    updated = len(different) if args.update else 0
    print(
        f"copied {len(new)} new and {updated} updated {'file' if len(new) + updated == 1 else 'files'} "
        f"into {args.dest}; {len(same)} {'was' if len(same) == 1 else 'were'} already there"
    )
    # Prints the diff and where the handout's file is kept, or one line saying why it left the file alone.
    swapped = swap_in.main([str(args.dest / "adapters.py")]) == 0
    dependencies = handout_dependencies(args.handout)
    if dependencies:
        quoted = " ".join(f"'{dependency}'" for dependency in dependencies)
        print(f"the handout's tests need its dependencies too:\n  pip install {quoted}")
    if swapped:
        print("next: python -m pytest tests/test_train_bpe.py tests/test_tokenizer.py (the adapters call cs336_bpe)")
        return 0
    print(
        "next: tests/adapters.py was left as the handout has it; paste run_train_bpe and get_tokenizer from "
        "cs336_basics/adapters.py over its stubs"
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
