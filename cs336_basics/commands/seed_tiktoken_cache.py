"""Let `tiktoken.get_encoding("gpt2")` work offline, from the CS336 handout's fixtures.

    cs336-seed-tiktoken path/to/assignment1-basics/tests/fixtures  # or python -m cs336_bpe.commands.seed_tiktoken_cache
    export TIKTOKEN_CACHE_DIR=...   # only if you chose --cache-dir; the default is tiktoken's own

The handout's tokenizer tests compare against tiktoken's GPT-2 encoding, which tiktoken downloads
the first time. Its two files are in the handout's fixtures already: `gpt2_vocab.json` is GPT-2's
`encoder.json`, and `gpt2_merges.txt` is `vocab.bpe` without its `#version: 0.2` first line. This
writes both into tiktoken's cache under the names tiktoken looks for (the SHA-1 of each download
URL), after checking them against the SHA-256 sums tiktoken itself expects, so nothing else can
end up there.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
from pathlib import Path

from .command_line import EXIT_BAD_INPUT, EXIT_FAILED

GPT2_FILES = "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/"
# (fixture, download URL, header the download has and the fixture lacks, SHA-256 tiktoken expects)
CACHE_ENTRIES = [
    (
        "gpt2_merges.txt",
        GPT2_FILES + "vocab.bpe",
        b"#version: 0.2\n",
        "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
    ),
    (
        "gpt2_vocab.json",
        GPT2_FILES + "encoder.json",
        b"",
        "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
    ),
]


def default_cache_dir() -> Path:
    """Where tiktoken looks: $TIKTOKEN_CACHE_DIR, else $DATA_GYM_CACHE_DIR, else <tmp>/data-gym-cache."""
    for variable in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if os.environ.get(variable):
            return Path(os.environ[variable])
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def seed(fixtures: Path, cache_dir: Path) -> list[Path]:
    """Write the cache entries; raises ValueError (writing nothing) if a fixture is not GPT-2's file."""
    entries = []
    for fixture, url, header, expected_sha256 in CACHE_ENTRIES:
        path = fixtures / fixture
        if not path.is_file():
            raise ValueError(f"{path} not found: give the handout's tests/fixtures directory")
        data = header + path.read_bytes()
        if hashlib.sha256(data).hexdigest() != expected_sha256:
            raise ValueError(f"{path} is not GPT-2's {url.rsplit('/', 1)[-1]} (its checksum differs)")
        entries.append((cache_dir / hashlib.sha1(url.encode()).hexdigest(), data))
    cache_dir.mkdir(parents=True, exist_ok=True)
    for target, data in entries:
        partial = target.with_name(target.name + ".partial")
        try:
            partial.write_bytes(data)
            partial.replace(target)
        finally:
            partial.unlink(missing_ok=True)  # after a failed write: nothing half-written is left
    return [target for target, _ in entries]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("fixtures", type=Path, help="the handout's tests/fixtures directory")
    parser.add_argument("--cache-dir", type=Path, default=None, help="tiktoken's cache directory (where it looks now)")
    args = parser.parse_args(argv)
    cache_dir = args.cache_dir or default_cache_dir()
    try:
        written = seed(args.fixtures, cache_dir)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as error:
        print(f"error: cannot write tiktoken's cache in {cache_dir}: {error.strerror or error}", file=sys.stderr)
        return EXIT_FAILED
    print(f"tiktoken's GPT-2 files are in {cache_dir}: " + ", ".join(path.name for path in written))
    if args.cache_dir is not None:
        print(f"tiktoken reads them there with TIKTOKEN_CACHE_DIR={cache_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
