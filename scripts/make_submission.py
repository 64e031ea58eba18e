#!/usr/bin/env python3
"""Build the CS336 submission archive from this checkout: source only.

    python scripts/make_submission.py                    # writes cs336-assignment-1-submission.zip
    python scripts/make_submission.py -o my.zip --list   # and prints what went in

In a git checkout the candidates are the files git tracks plus the untracked ones .gitignore does not
exclude; elsewhere every file below the checkout. Either way these never go in: build products
(compiled extensions, Cython's generated C++, build/, *.egg-info), virtual environments, caches,
data and outputs (data/, out/, the handout's tests/fixtures/ and tests/_snapshots/, arrays, pickles,
checkpoints, compressed corpora, wandb/), and any file over --max-mb (reported, so a stray corpus
cannot slip in).
"""

from __future__ import annotations

import argparse
import fnmatch
import subprocess
import sys
import zipfile
from pathlib import Path, PurePosixPath

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = "cs336-assignment-1-submission.zip"
EXCLUDED_DIRS = {
    ".git", ".venv", "venv", ".ci-venv", "env", "build", "dist", "__pycache__", ".pytest_cache",
    ".hypothesis", ".ruff_cache", ".mypy_cache", ".ipynb_checkpoints", "data", "out", ".ci-out",
    "results", "bench_results", "wandb", "checkpoints",
}  # fmt: skip
EXCLUDED_PATHS = ["tests/fixtures", "tests/_snapshots"]
EXCLUDED_PATTERNS = [
    "*.egg-info", "*.so", "*.pyd", "*.o", "*.pyc", "*.dylib", "*.dll",
    "cs336_basics/_*.c", "cs336_basics/_*.cpp", "cs336_basics/*.html",  # Cython's output (a student's own)
    "cs336_basics/native/_*.c", "cs336_basics/native/_*.cpp", "cs336_basics/native/*.html",  # and ours
    "*.pkl", "*.pickle", "*.npy", "*.npz", "*.bin", "*.pt", "*.pth", "*.safetensors", "*.ckpt",
    "*.gz", "*.zst", "*.xz", "*.bz2", "*.zip", "*.tar", "*.log",
]  # fmt: skip


def candidate_files(root: Path) -> list[PurePosixPath]:
    """Files git would hand over (tracked, or untracked and not ignored); every file without git."""
    try:
        listing = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=root,
            check=True,
            capture_output=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return sorted(PurePosixPath(path.relative_to(root).as_posix()) for path in root.rglob("*") if path.is_file())
    return sorted(PurePosixPath(name) for name in listing.decode("utf-8").split("\0") if name)


def excluded(relative: PurePosixPath) -> bool:
    if EXCLUDED_DIRS.intersection(relative.parts[:-1]):
        return True
    text = relative.as_posix()
    if any(text == prefix or text.startswith(prefix + "/") for prefix in EXCLUDED_PATHS):
        return True
    return any(
        fnmatch.fnmatchcase(text, pattern) or fnmatch.fnmatchcase(part, pattern)
        for pattern in EXCLUDED_PATTERNS
        for part in relative.parts
    )


def select_files(root: Path, max_bytes: int) -> tuple[list[PurePosixPath], list[tuple[PurePosixPath, int]]]:
    """(files for the archive, files left out only because they are too large)."""
    chosen, too_large = [], []
    for relative in candidate_files(root):
        path = root / relative
        if excluded(relative) or not path.is_file():  # a deleted but still tracked file is not there
            continue
        size = path.stat().st_size
        if size > max_bytes:
            too_large.append((relative, size))
        else:
            chosen.append(relative)
    return chosen, too_large


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-o", "--output", type=Path, default=None, help=f"archive to write ({DEFAULT_OUTPUT})")
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help="the checkout to pack (this one)")
    parser.add_argument("--max-mb", type=float, default=5.0, help="leave out (and report) larger files (5)")
    parser.add_argument("--list", action="store_true", help="print every file put in the archive")
    args = parser.parse_args(argv)

    root = args.root.resolve()
    output = (args.output or root / DEFAULT_OUTPUT).resolve()
    files, too_large = select_files(root, int(args.max_mb * 1_000_000))
    files = [relative for relative in files if root / relative != output]
    if not files:
        print(f"error: no source file found under {root}", file=sys.stderr)
        return 1
    partial = output.with_name(output.name + ".partial")
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for relative in files:
            archive.write(root / relative, relative.as_posix())
            if args.list:
                print(relative)
    partial.replace(output)  # never a half-written archive under the final name
    for relative, size in too_large:
        print(f"left out {relative}: {size / 1e6:.1f} MB is data, not source (raise --max-mb to include it)")
    print(f"wrote {output} ({len(files)} files, {output.stat().st_size / 1e3:.1f} KB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
