"""Paths and helpers the tests share, as a plain module: tests import from here, never from
conftest.py (pytest loads conftest as a plugin; importing it again makes a second copy)."""

from __future__ import annotations

import os
import textwrap
from collections import Counter
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def _default_fixtures() -> Path:
    # The handout's tests/fixtures/, once scripts/add_handout_tests.py has copied it in, else the
    # assignment's fixtures next to this checkout.
    handout = REPO_ROOT / "tests" / "fixtures"
    if (handout / "corpus.en").is_file():
        return handout
    return REPO_ROOT.parent / "shared" / "fixtures"


FIXTURES = Path(os.environ.get("CS336_FIXTURES") or _default_fixtures())
SHARED_CORPUS = REPO_ROOT.parent / "shared" / "corpus"


def require_fixture(name: str) -> Path:
    """The path of an assignment fixture; skips the calling test when it is missing."""
    path = FIXTURES / name
    if not path.exists():
        pytest.skip(f"fixture {name} not found in {FIXTURES} (set CS336_FIXTURES to the assignment's fixtures)")
    return path


# The start of a child program that encodes under an address-space limit (Linux): it reads the
# vocabulary, merges and text paths and the backend from argv, and `address_space()` gives the
# process's current size, to set RLIMIT_AS a little above it.
TOKENIZER_MEMORY_CHILD_PRELUDE = textwrap.dedent(
    """
    import resource, sys
    from cs336_basics.tokenizer import Tokenizer

    vocab_path, merges_path, text_path, backend = sys.argv[1:5]
    tokenizer = Tokenizer.from_files(vocab_path, merges_path, ["<|endoftext|>"], native=backend == "native")

    def address_space() -> int:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
        raise RuntimeError("no VmSize in /proc/self/status")
    """
)


def merge_rules(**keywords: object) -> object:
    """A `phases.MergeRules` from the loose keywords tests are parametrized by: `tie_break`,
    `min_frequency`, `max_token_length`, `max_words`, `no_colon_space` and `base_merges` (each optional)."""
    from cs336_basics.phases import MergeRules
    from cs336_basics.rules.merge_limits import MergeLimits

    limits = MergeLimits(
        keywords.pop("min_frequency", None),
        keywords.pop("max_token_length", None),
        keywords.pop("max_words", None),
        keywords.pop("no_colon_space", False),
    )
    rules = MergeRules(keywords.pop("tie_break", None), limits, keywords.pop("base_merges", ()))
    assert not keywords, f"unknown merge rule(s) {sorted(keywords)}"
    return rules


def merge_pair(parts: list[bytes], left: bytes, right: bytes) -> list[bytes]:
    """`parts` with every occurrence of (left, right) merged, left to right, as a BPE merge does: the
    references written in the tests share it."""
    merged, at = [], 0
    while at < len(parts):
        if at + 1 < len(parts) and parts[at] == left and parts[at + 1] == right:
            merged.append(left + right)
            at += 2
        else:
            merged.append(parts[at])
            at += 1
    return merged


def ranked_encoding(word: bytes, ranks: dict[tuple[bytes, bytes], int]) -> tuple[bytes, ...]:
    """The word's tokens: the leftmost pair of the lowest rank merged, until no pair is ranked."""
    parts = [bytes([byte]) for byte in word]
    while True:
        ranked = [(ranks[pair], at) for at, pair in enumerate(zip(parts, parts[1:])) if pair in ranks]
        if not ranked:
            return tuple(parts)
        _, at = min(ranked)
        parts[at : at + 2] = [parts[at] + parts[at + 1]]


def greedy_merges(words: Counter[tuple[bytes, ...]], num_merges: int) -> list[tuple[bytes, bytes]]:
    """CS336's loop: the most frequent pair, ties to the greatest pair of bytes, merged left to right."""
    merges = []
    for _ in range(num_merges):
        pairs: Counter[tuple[bytes, bytes]] = Counter()
        for parts, count in words.items():
            for pair in zip(parts, parts[1:]):
                pairs[pair] += count
        if not pairs:
            break
        best = max(pairs, key=lambda pair: (pairs[pair], pair))
        merges.append(best)
        merged: Counter[tuple[bytes, ...]] = Counter()
        for parts, count in words.items():
            merged[tuple(merge_pair(list(parts), *best))] += count
        words = merged
    return merges
