"""bpe_v2 — unlike bpe_v1: keep pair counts across merges and update them incrementally.

bpe_v1 recounts every pair of every word after each merge. But a merge of `(a, b)` only changes the
words that contain `a b`, so v2 keeps the pair counts and an inverted index from each pair to the
words containing it, and after a merge rewrites only those words: their old pairs are subtracted,
their new pairs added. The work per merge drops from "every unique word" to "the words the merge
touches", which for most merges is a tiny fraction. Choosing the best pair is still a linear scan
over all live pairs (bpe_v4 removes that).
"""

from __future__ import annotations

from collections import defaultdict

from .bpe_v1 import pretokenize_and_count
from .phases import DEFAULT_MERGE_RULES, Advance, MergeRules, check_merge_rules, ignore_progress
from .rules.contract import Merges, WordCountDict
from .rules.merge_limits import NO_LIMITS
from .rules.start_from import replay_ids
from .rules.vocab_layout import merge_word

__all__ = ["PairIndex", "merge", "pretokenize_and_count"]

Pair = tuple[int, int]


class PairIndex:
    """Words as token ids, their pair counts, and the inverted index pair -> word indices."""

    def __init__(self, word_counts: WordCountDict, rules: MergeRules = DEFAULT_MERGE_RULES) -> None:
        self.token_bytes = [bytes([byte]) for byte in range(256)]
        self.limits = NO_LIMITS  # the base's merges are replayed whatever their tokens
        self.bounded = False  # whether a limit on the merged token is set (then each new pair is checked)
        # Each token's key for ties (tie_break.token_key), so a comparison calls no function.
        self.tie_key = rules.tie_break.token_key()
        self.tie_keys = [self.tie_key(token_id, token) for token_id, token in enumerate(self.token_bytes)]
        live = {word: count for word, count in word_counts.items() if count > 0}  # as bpe_v1: absent words add nothing
        self.words = [list(word) for word in live]
        self.counts = list(live.values())
        self.pair_counts: dict[Pair, int] = defaultdict(int)
        self.words_with: dict[Pair, set[int]] = defaultdict(set)
        for index, (word, count) in enumerate(zip(self.words, self.counts)):
            for pair in zip(word, word[1:]):
                self.pair_counts[pair] += count
                self.words_with[pair].add(index)
        # A base's merges replayed in order, whatever their counts: each word becomes its encoding.
        for pair in replay_ids(rules.base_merges):
            self.apply_merge(pair)
        # The limits on a merged token, on the new merges: a pair refused is never counted (merge_limits.py).
        self.limits = rules.limits
        self.bounded = self.limits.bounds_tokens
        for pair in [pair for pair in self.pair_counts if not self.allows(pair)]:
            del self.pair_counts[pair]
            self.words_with.pop(pair, None)

    def allows(self, pair: Pair) -> bool:
        """Whether the pair may be counted and merged under the limits on its token (max_token_length,
        max_words, no_colon_space)."""
        return not self.bounded or self.limits.allows(self.token_bytes[pair[0]], self.token_bytes[pair[1]])

    def rank(self, pair: Pair) -> tuple[int, object, object]:
        """Higher count first, ties to the greatest (left key, right key): with CS336's keys, the
        greatest (left bytes, right bytes)."""
        return self.pair_counts[pair], self.tie_keys[pair[0]], self.tie_keys[pair[1]]

    def best_pair(self) -> Pair:
        """A linear scan: the top count at C speed first, then the tie-break among its pairs."""
        top = max(self.pair_counts.values())
        return max((pair for pair, count in self.pair_counts.items() if count == top), key=self.rank)

    def apply_merge(self, pair: Pair) -> tuple[tuple[bytes, bytes], set[Pair]]:
        """Apply one merge; return it as bytes, and the pairs whose counts changed."""
        left, right = pair
        new_token = len(self.token_bytes)
        self.token_bytes.append(self.token_bytes[left] + self.token_bytes[right])
        self.tie_keys.append(self.tie_key(new_token, self.token_bytes[new_token]))
        changed: set[Pair] = set()
        # The index may name words that no longer hold the pair; merge_word leaves those unchanged.
        # (A replayed base merge may name a pair no word holds.)
        for index in self.words_with.pop(pair, ()):
            old = self.words[index]
            new = merge_word(old, pair, new_token)
            if len(new) == len(old):
                continue
            count = self.counts[index]
            for old_pair in zip(old, old[1:]):
                self.pair_counts[old_pair] -= count
                changed.add(old_pair)
            for new_pair in zip(new, new[1:]):
                if not self.allows(new_pair):
                    continue
                self.pair_counts[new_pair] += count
                self.words_with[new_pair].add(index)
                changed.add(new_pair)
            self.words[index] = new
        for changed_pair in changed:
            if self.pair_counts[changed_pair] <= 0:
                del self.pair_counts[changed_pair]
        return (self.token_bytes[left], self.token_bytes[right]), changed


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
    merges: Merges = []
    for _ in range(num_merges):
        if not index.pair_counts:
            break
        best = index.best_pair()
        if not limits.counts_enough(index.pair_counts[best]):
            break
        merged, _ = index.apply_merge(best)
        merges.append(merged)
        advance(1)
    return merges
