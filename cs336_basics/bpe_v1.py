"""bpe_v1 — the naive trainer and the oracle every other version is tested against.

Read the whole file, split it on special tokens, pre-tokenize with the pattern (GPT-2's unless
another is given, `pattern.py`), count words. Then, for every merge, count every adjacent pair in
every word from scratch, take the most frequent (ties: the greatest `(left_bytes, right_bytes)`, or
another rule of `tie_break.py`), and rewrite every word. Started from a base tokenizer, each word
starts as its encoding by the base's merges (`start_from.py`). The limits (`merge_limits.py`) stop at a
best pair that counts too little (`min_frequency`) and leave out the pairs whose token is too long,
of too many words or holds ": " (the new merges only). Each merge costs a pass over the whole corpus's unique words,
so it is slow, and obviously right.
"""

from __future__ import annotations

from collections import defaultdict
from os import PathLike

from .phases import (
    DEFAULT_MERGE_RULES,
    DEFAULT_OPTIONS,
    Advance,
    CountParallelism,
    MergeRules,
    check_merge_rules,
    ignore_progress,
)
from .rules.contract import Merges, WordCountDict, read_corpus
from .rules.pattern import Pattern
from .rules.splitting import count_words_in_text
from .rules.start_from import base_tokens
from .rules.vocab_layout import merge_word


def pretokenize_and_count(
    input_path: str | PathLike,
    special_tokens: list[str],
    options: CountParallelism = DEFAULT_OPTIONS,
    advance: Advance = ignore_progress,
    *,
    pattern: Pattern | None = None,
) -> WordCountDict:
    """Word counts of the whole file, counted in this process (`options` do not apply)."""
    text = read_corpus(input_path)
    counts = dict(count_words_in_text(text, special_tokens, pattern))
    advance(len(text.encode("utf-8")))
    return counts


def merge(
    word_counts: WordCountDict,
    num_merges: int,
    advance: Advance = ignore_progress,
    *,
    rules: MergeRules = DEFAULT_MERGE_RULES,
) -> Merges:
    """`num_merges` merges (fewer if no pair is left) by `rules`; with a base's merges, each word starts
    as its encoding by them and the merges returned are the ones after them (start_from.py)."""
    rules = check_merge_rules(rules)
    token_bytes, encode = base_tokens(rules.base_merges)
    key = rules.tie_break.token_key()
    limits = rules.limits
    bounded = limits.bounds_tokens  # a limit on the merged token: each pair checked
    # Words with no pair, or that never occur, contribute nothing.
    live = {word: count for word, count in word_counts.items() if len(word) > 1 and count > 0}
    words = [encode(word) for word in live]
    counts = list(live.values())
    merges: Merges = []
    for _ in range(num_merges):
        pair_counts: dict[tuple[int, int], int] = defaultdict(int)
        for word, count in zip(words, counts):
            for pair in zip(word, word[1:]):
                if not bounded or limits.allows(token_bytes[pair[0]], token_bytes[pair[1]]):
                    pair_counts[pair] += count
        if not pair_counts:
            break
        best = max(
            pair_counts,
            key=lambda pair: (
                pair_counts[pair],
                key(pair[0], token_bytes[pair[0]]),
                key(pair[1], token_bytes[pair[1]]),
            ),
        )
        if not limits.counts_enough(pair_counts[best]):
            break
        new_token = len(token_bytes)
        token_bytes.append(token_bytes[best[0]] + token_bytes[best[1]])
        merges.append((token_bytes[best[0]], token_bytes[best[1]]))
        words = [merge_word(word, best, new_token) for word in words]
        # A word merged down to one token has no pairs left and never changes again.
        if any(len(word) == 1 for word in words):
            kept = [index for index, word in enumerate(words) if len(word) > 1]
            words = [words[index] for index in kept]
            counts = [counts[index] for index in kept]
        advance(1)
    return merges
