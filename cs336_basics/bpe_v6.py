"""bpe_v6 — unlike bpe_v5: the merge loop is C++ (`cpp/merge/bpe_merge.cpp`), called without the GIL.

The algorithm is still bpe_v4's, but the C++ chooses its data layout for the cache: words as one
flat array of token ids that merges shorten in place, pair ids in an open-addressing hash map,
one small record per pair, and prefetching of the words a merge touches. Within a word only the
pairs next to a merged occurrence change; a merge sums its changes in a small table before it
touches the big ones, the heap holds only pairs that can still win soon, and pairs born too rare to
ever be merged are pruned (exactly: if one could still win, every pair is counted again).
`_merge_cpp.pyx` only converts the word counts and the merges. v6 runs the loop on one thread
(bpe_v7 runs the same loop on its threads). Pre-tokenization is bpe_v3's.
"""

from __future__ import annotations

from .bpe_v3 import pretokenize_and_count
from .native import _merge_cpp
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
    # The binding reads the rules once; each word starts as its encoding by the base's merges
    # (start_from.py).
    return _merge_cpp.merge(word_counts, num_merges, advance, rules=rules)
