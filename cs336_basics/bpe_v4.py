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

from .bpe_v2 import Pair, PairIndex
from .bpe_v3 import pretokenize_and_count
from .contract import Merges, WordCountDict
from .phases import Report, ignore_progress

__all__ = ["merge", "pretokenize_and_count"]

# Rebuild the heap once it holds this many times more entries than there are live pairs.
COMPACTION_FACTOR = 2


def descending(token: bytes) -> tuple[int, ...]:
    """A key that sorts byte strings in reverse, so Python's min-heap pops the greatest bytes first.

    Complementing each byte reverses the order of differing bytes; the trailing 256 makes a prefix
    sort after its extensions (b"a" > b"ab" in this key, as b"a" < b"ab" in bytes order).
    """
    return (*(255 - byte for byte in token), 256)


class PairHeap:
    """Max-heap of (count, left bytes, right bytes) with lazy deletion and compaction."""

    def __init__(self, index: PairIndex) -> None:
        self.index = index
        self.keys = [descending(token) for token in index.token_bytes]
        self.heap = [self._entry(pair) for pair in index.pair_counts]
        heapq.heapify(self.heap)

    def _entry(self, pair: Pair) -> tuple[int, tuple[int, ...], tuple[int, ...], Pair]:
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
        for token in self.index.token_bytes[len(self.keys) :]:
            self.keys.append(descending(token))
        counts = self.index.pair_counts
        for pair in changed:
            if pair in counts:
                heapq.heappush(self.heap, self._entry(pair))
        if len(self.heap) > COMPACTION_FACTOR * len(counts) + 1024:
            self.heap = [self._entry(pair) for pair in counts]
            heapq.heapify(self.heap)


def merge(word_counts: WordCountDict, num_merges: int, report: Report = ignore_progress) -> Merges:
    index = PairIndex(word_counts)
    heap = PairHeap(index)
    merges: Merges = []
    for _ in range(num_merges):
        best = heap.pop_best()
        if best is None:
            break
        merged, changed = index.apply_merge(best)
        merges.append(merged)
        heap.update(changed)
        report(1)
    return merges
