"""HF tokenizers' two limits on merging (`BpeTrainer(min_frequency=, max_token_length=)`), as HF 0.23
applies them; they are generic, so every tie-break and preset takes them, and every version honours them.

- `min_frequency`: training stops at the first best pair that counts fewer than this (HF's
  `if top.count < min_frequency: break`), so the vocabulary may come out smaller. 0 and 1 change nothing.
- `max_token_length`: a pair whose token would be `max_token_length` bytes or longer is never merged:
  the token is strictly shorter, as HF counts a new pair only while `len(left) + len(right) <
  max_token_length`. Pairs of two bytes are the exception: HF counts them all before the first merge,
  without the limit, so two-byte tokens are made whatever the limit. A length is in bytes: HF counts
  characters, and each of ByteLevel's characters is one byte.

Refused one way for every version: `MergeLimits` checks itself when made. None (the default) of
each: no limit. Each is at most `MAX_LIMIT` (2**63 - 1, the C++ loop's integers): no count or token reaches it anyway.
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


@dataclass(frozen=True)
class MergeLimits:
    """HF's two limits, checked when made: refused in one line where either is not a whole number in
    range. None of `min_frequency` is 0; a `max_token_length` of 2 or less leaves only the two-byte merges,
    as in HF."""

    min_frequency: int = 0
    max_token_length: int | None = None  # None: no limit

    def __post_init__(self) -> None:
        least = 0 if self.min_frequency is None else _check_integer("min_frequency", self.min_frequency, 0)
        object.__setattr__(self, "min_frequency", least)
        if self.max_token_length is not None:
            _check_integer("max_token_length", self.max_token_length, 1)

    def allows(self, token_length: int) -> bool:
        """Whether a pair whose merged token has `token_length` bytes may be merged."""
        return self.max_token_length is None or token_length == 2 or token_length < self.max_token_length

    def counts_enough(self, count: int) -> bool:
        """Whether the best pair, counting `count`, is merged (else training stops)."""
        return count >= self.min_frequency

    @property
    def native_max_token_length(self) -> int:
        """The limit as the C++ loop takes it: 0 for none."""
        return 0 if self.max_token_length is None else self.max_token_length


NO_LIMITS = MergeLimits()
