"""Which pair a merge takes among pairs of equal count: the one place where trainers disagree beyond
the pre-tokenizer (docs/CONTRACT.md, "What other tools change").

Every rule here ranks pairs by a key per token, compared left token first, and the greatest pair
wins; so a trainer needs only each token's key:

- `cs336` (the assignment): the token's bytes. Ties go to the greatest `(left bytes, right bytes)`.
- `smallest-id` (rustbpe, nanochat): the token's id, negated. Ties go to the smallest
  `(left id, right id)`, where a byte's id is its value and each merge takes the next id.
- `hf` (HF tokenizers' `BpeTrainer`): the token's id in HF's order, negated. HF numbers the 256
  byte-level characters (GPT-2's byte-to-unicode map) by code point, then each merge in order.

Special tokens never appear in a pair, so where they sit in a vocabulary changes no tie.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from .byte_level import gpt2_bytes_to_unicode
from .errors import BPEInputError

CS336 = "cs336"
SMALLEST_ID = "smallest-id"
HF = "hf"
TIE_BREAKS = (CS336, SMALLEST_ID, HF)  # the order of bpe::TieBreak (cpp/merge/bpe_merge.hpp)

# A token's key for max(): its id (bytes 0-255, then 256 + k for merge k) and its bytes.
TokenKey = Callable[[int, bytes], object]


def check_tie_break(tie_break: object) -> str:
    if tie_break is None:
        return CS336
    if tie_break not in TIE_BREAKS:
        raise BPEInputError(f"tie_break must be one of {', '.join(TIE_BREAKS)}, got {tie_break!r}")
    return str(tie_break)


@cache
def hf_byte_ranks() -> tuple[int, ...]:
    """Each byte's place among HF's 256 initial tokens: its byte-level character's rank by code point."""

    characters = gpt2_bytes_to_unicode()
    by_code_point = sorted(range(256), key=lambda byte: characters[byte])
    ranks = [0] * 256
    for rank, byte in enumerate(by_code_point):
        ranks[byte] = rank
    return tuple(ranks)


def token_rank(tie_break: str, token_id: int) -> int:
    """The id a rule compares (smallest wins) for `smallest-id` and `hf`; merged tokens keep theirs."""
    if tie_break == HF and token_id < 256:
        return hf_byte_ranks()[token_id]
    return token_id


def token_key(tie_break: str) -> TokenKey:
    """The key whose greatest pair (left token's key, right token's key) wins a tie."""
    if tie_break == CS336:
        return lambda token_id, token: token
    return lambda token_id, token: -token_rank(tie_break, token_id)
