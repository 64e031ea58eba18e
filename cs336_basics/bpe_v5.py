"""bpe_v5 — unlike bpe_v4: the same merge loop, compiled by Cython on C++ containers.

bpe_v4's loop spends its time on Python objects: tuples for pairs and heap entries, boxed ints,
sets of word indices, a list per rewritten word. `_merge_cy.pyx` is the same algorithm line for
line (`PairIndex`, `PairHeap`), but tokens are C ints, a pair is one 64-bit integer and the
containers are C++ vectors and hash maps, so each merge runs at C speed. Pre-tokenization is
bpe_v3's parallel counting.
"""

from __future__ import annotations

from .bpe_v3 import pretokenize_and_count
from .native import _merge_cy
from .phases import DEFAULT_MERGE_RULES, Advance, MergeRules, ignore_progress
from .rules.contract import Merges, WordCountDict

__all__ = ["merge", "pretokenize_and_count"]


def merge(
    word_counts: WordCountDict,
    num_merges: int,
    advance: Advance = ignore_progress,
    *,
    rules: MergeRules = DEFAULT_MERGE_RULES,
) -> Merges:
    # The binding reads the rules once and replays the base's merges first (start_from.py).
    return _merge_cy.merge(word_counts, num_merges, advance, rules=rules)
