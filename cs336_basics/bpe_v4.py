"""bpe_v4 — unlike bpe_v3: find the best pair with a lazy max-heap instead of a linear scan.

After v2 and v3, each merge still scans every live pair (hundreds of thousands) to find the best
one. v4 keeps the pairs in a heap ordered by the CS336 rule and, rather than deleting entries whose
count changed, pushes a fresh entry and drops stale ones when they surface (an entry is live iff
its count equals the pair's current count). When stale entries outnumber live pairs the heap is
rebuilt (compaction), so memory stays proportional to the live pairs. Selection becomes
O(log pairs) amortized; the incremental updates are v2's `PairIndex`.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from .bpe_v2 import Pair, PairIndex
from .bpe_v3 import pretokenize_and_count
from .phases import DEFAULT_MERGE_RULES, Advance, MergeRules, check_merge_rules, ignore_progress
from .rules.contract import Merges, WordCountDict
from .rules.tie_break import TieBreak

__all__ = ["merge", "pretokenize_and_count"]

# Rebuild the heap once it holds this many times more entries than there are live pairs.
COMPACTION_FACTOR = 2


def descending(token: bytes) -> tuple[int, ...]:
    """A key that sorts byte strings in reverse, so Python's min-heap pops the greatest bytes first.

    Complementing each byte reverses the order of differing bytes; the trailing 256 makes a prefix
    sort after its extensions (b"a" > b"ab" in this key, as b"a" < b"ab" in bytes order).
    """
    return (*(255 - byte for byte in token), 256)


def heap_key(tie_break: TieBreak) -> Callable[[int, bytes], object]:
    """A token's key in the min-heap: `descending` bytes for a rule by bytes (cs336), else its rank
    (`TieBreak.rank`)."""
    if tie_break.by_bytes:
        return lambda token_id, token: descending(token)
    return lambda token_id, token: tie_break.rank(token_id)


class PairHeap:
    """Max-heap of (count, left bytes, right bytes), or of (count, left rank, right rank) for a rule by
    id, with lazy deletion and compaction."""

    def __init__(self, index: PairIndex, tie_break: TieBreak = DEFAULT_MERGE_RULES.tie_break) -> None:
        self.index = index
        # Each token's heap key, chosen once: the min-heap pops the smallest rank first as it is.
        self.heap_key = heap_key(tie_break)
        self.keys = [self.heap_key(token_id, token) for token_id, token in enumerate(index.token_bytes)]
        self.heap = [self._entry(pair) for pair in index.pair_counts]
        heapq.heapify(self.heap)

    def _entry(self, pair: Pair) -> tuple[int, object, object, Pair]:
        return -self.index.pair_counts[pair], self.keys[pair[0]], self.keys[pair[1]], pair

    def pop_best(self) -> Pair | None:
        counts = self.index.pair_counts
        while self.heap:
            negative_count, _, _, pair = self.heap[0]
            if counts.get(pair) == -negative_count:
                return pair
            heapq.heappop(self.heap)
        return None

    def update(self, changed: set[Pair]) -> None:
        for token_id in range(len(self.keys), len(self.index.token_bytes)):
            self.keys.append(self.heap_key(token_id, self.index.token_bytes[token_id]))
        counts = self.index.pair_counts
        for pair in changed:
            if pair in counts:
                heapq.heappush(self.heap, self._entry(pair))
        if len(self.heap) > COMPACTION_FACTOR * len(counts) + 1024:
            self.heap = [self._entry(pair) for pair in counts]
            heapq.heapify(self.heap)


def merge(
    word_counts: WordCountDict,
    num_merges: int,
    advance: Advance = ignore_progress,
    *,
    rules: MergeRules = DEFAULT_MERGE_RULES,
) -> Merges:
    rules = check_merge_rules(rules)
    limits = rules.limits
    index = PairIndex(word_counts, rules)
    heap = PairHeap(index, rules.tie_break)
    merges: Merges = []
    for _ in range(num_merges):
        best = heap.pop_best()
        if best is None or not limits.counts_enough(index.pair_counts[best]):
            break
        merged, changed = index.apply_merge(best)
        merges.append(merged)
        heap.update(changed)
        advance(1)
    return merges
