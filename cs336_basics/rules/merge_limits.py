"""Limits on merging: HF tokenizers' two (`BpeTrainer(min_frequency=, max_token_length=)`), as HF 0.23
applies them, and SuperBPE's two on the merged token (`max_words`, `no_colon_space`), as the paper's
fork of HF applies them to its second stage. They are generic, so every tie-break and preset takes
them, and every version honours them.

- `min_frequency`: training stops at the first best pair that counts fewer than this (HF's
  `if top.count < min_frequency: break`), so the vocabulary may come out smaller. 0 and 1 change nothing.
- `max_token_length`: a pair whose token would be `max_token_length` bytes or longer is never merged:
  the token is strictly shorter, as HF counts a new pair only while `len(left) + len(right) <
  max_token_length`. Pairs of two bytes are the exception: HF counts them all before the first merge,
  without the limit, so two-byte tokens are made whatever the limit. A length is in bytes: HF counts
  characters, and each of ByteLevel's characters is one byte.
- `max_words`: a pair whose token would hold more than `max_words` words is never merged, a word
  being a non-empty piece of the token's bytes split on the space byte b" " (`count_words`): b" a"
  and b"a " are one word, b"a b" two, b"  " none; newlines, tabs and other spaces separate nothing.
  SuperBPE's fork (alisawuffles/tokenizers-superbpe, trainer.rs) refuses tokens of more than 4.
- `no_colon_space`: a pair whose token would hold b": " (a colon, then a space) is never merged, two-byte
  b": " included. SuperBPE's fork refuses those too.

A pair refused by a limit on its token is never chosen: the merge goes to the best pair allowed (the
fork counts a refused pair and skips it; whether a version counts it changes nothing), and training
stops only when no pair is allowed, or at `min_frequency`. The limits bound a run's new merges only: a
base's merges (`start_from.py`) are replayed whatever they make.

Refused one way for every version: `MergeLimits` checks itself when made. None (the default) of each
whole-number limit: no limit; `no_colon_space` is True or False. Each number is at most `MAX_LIMIT`
(2**63 - 1, the C++ loop's integers): no count or token reaches it anyway.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import BPEInputError

MAX_LIMIT = 2**63 - 1



def _check_integer(name: str, value: object, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise BPEInputError(f"{name} must be an integer of at least {least} (or None), got {value!r}")
    if value > MAX_LIMIT:
        raise BPEInputError(f"{name} must be at most 2**63 - 1, got {value!r}")
    return value


def count_words(token: bytes) -> int:
    """The words of a token as `max_words` counts them: the non-empty pieces of its bytes split on b" "."""
    return sum(1 for piece in token.split(b" ") if piece)


@dataclass(frozen=True)
class MergeLimits:
    """The limits, checked when made: refused in one line where a number is not a whole number in range
    or `no_colon_space` is not a bool. None of `min_frequency` is 0; a `max_token_length` of 2 or less
    leaves only the two-byte merges, as in HF."""

    min_frequency: int = 0
    max_token_length: int | None = None  # None: no limit
    max_words: int | None = None  # None: no limit
    no_colon_space: bool = False

    def __post_init__(self) -> None:
        least = 0 if self.min_frequency is None else _check_integer("min_frequency", self.min_frequency, 0)
        object.__setattr__(self, "min_frequency", least)
        if self.max_token_length is not None:
            _check_integer("max_token_length", self.max_token_length, 1)
        if self.max_words is not None:
            _check_integer("max_words", self.max_words, 1)
        if not isinstance(self.no_colon_space, bool):
            raise BPEInputError(f"no_colon_space must be True or False, got {self.no_colon_space!r}")

    @property
    def bounds_tokens(self) -> bool:
        """Whether a limit on the merged token is set (`max_token_length`, `max_words`, `no_colon_space`):
        without one, `allows` is always True and a version skips the check."""
        return self.max_token_length is not None or self.max_words is not None or self.no_colon_space

    def allows(self, left: bytes, right: bytes) -> bool:
        """Whether the pair `(left, right)` may be merged: its token `left + right` within every limit."""
        if not self.bounds_tokens:
            return True
        token = left + right
        if self.max_token_length is not None and len(token) != 2 and len(token) >= self.max_token_length:
            return False
        if self.no_colon_space and b": " in token:
            return False
        return self.max_words is None or count_words(token) <= self.max_words

    def counts_enough(self, count: int) -> bool:
        """Whether the best pair, counting `count`, is merged (else training stops)."""
        return count >= self.min_frequency

    @property
    def native_max_token_length(self) -> int:
        """The limit as the C++ loop takes it: 0 for none."""
        return 0 if self.max_token_length is None else self.max_token_length

    @property
    def native_max_words(self) -> int:
        """`max_words` as the C++ loop takes it: 0 for none."""
        return 0 if self.max_words is None else self.max_words


NO_LIMITS = MergeLimits()
