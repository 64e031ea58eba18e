"""bpe_v5 — unlike bpe_v4: the same merge loop, compiled by Cython on C++ containers.

bpe_v4's loop spends its time on Python objects: tuples for pairs and heap entries, boxed ints,
sets of word indices, a list per rewritten word. `_merge_cy.pyx` is the same algorithm line for
line (`PairIndex`, `PairHeap`), but tokens are C ints, a pair is one 64-bit integer and the
containers are C++ vectors and hash maps, so each merge runs at C speed. Pre-tokenization is
bpe_v3's parallel counting.
"""

from __future__ import annotations

from . import _merge_cy
from .bpe_v3 import pretokenize_and_count
from .contract import Merges, WordCountDict
from .phases import Advance, ignore_progress
from .tie_break import CS336

__all__ = ["merge", "pretokenize_and_count"]


def merge(
    word_counts: WordCountDict,
    num_merges: int,
    advance: Advance = ignore_progress,
    *,
    tie_break: str = CS336,
    start_from: Merges | None = None,
    min_frequency: int | None = None,
    max_token_length: int | None = None,
) -> Merges:
    # The binding checks tie_break and the limits, and replays start_from's merges first (start_from.py).
    return _merge_cy.merge(
        word_counts, num_merges, advance, tie_break=tie_break, start_from=start_from,
        min_frequency=min_frequency, max_token_length=max_token_length,
    )
