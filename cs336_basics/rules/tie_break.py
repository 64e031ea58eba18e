"""Which pair a merge takes among pairs of equal count: the one place where trainers disagree beyond
the pre-tokenizer (docs/CONTRACT.md, "What other tools change").

One row per rule (`TieBreak`, in `ROWS`): every version reads the row, never the rule's name. Every
rule ranks pairs by a key per token, compared left token first, and the best pair wins; so a trainer
needs only each token's key, which a row gives one of two ways:

- by bytes (`byte_ranks` None): the greatest `(left bytes, right bytes)` wins. `cs336`, the assignment.
- by rank (`byte_ranks`: each byte's rank): the smallest `(left rank, right rank)` wins, a merged
  token ranking by its id (256 + k for merge k). `smallest-id` (rustbpe, nanochat): a byte's rank is
  its value. `hf` (HF tokenizers' `BpeTrainer`): the 256 byte-level characters (GPT-2's
  byte-to-unicode map) by code point.

The C++ loop (bpe_v6, bpe_v7) has the rules its `bpe::tie_break_names()` lists (cpp/merge/bpe_merge.hpp);
a row with `native=False` runs on the other versions only, and the native ones refuse it in one line.
docs/RULES.md, "Adding a tie-break", lists the files a new rule touches.

Special tokens never appear in a pair, so where they sit in a vocabulary changes no tie.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from ..errors import BPEInputError
from .byte_level import gpt2_bytes_to_unicode

CS336 = "cs336"
SMALLEST_ID = "smallest-id"
HF = "hf"

# A token's key for max(): its id (bytes 0-255, then 256 + k for merge k) and its bytes.
TokenKey = Callable[[int, bytes], object]


@dataclass(frozen=True)
class TieBreak:
    """One tie-break rule: its name, what it does, each byte's rank (None: by bytes), and whether the
    C++ loop has it (under the same name, `bpe::tie_break_names()`)."""

    name: str
    description: str
    byte_ranks: tuple[int, ...] | None = None
    native: bool = True

    def __post_init__(self) -> None:
        if self.byte_ranks is not None and sorted(self.byte_ranks) != list(range(256)):
            raise ValueError(f"tie-break {self.name!r}: byte_ranks must order the 256 bytes, each rank once")

    @property
    def by_bytes(self) -> bool:
        return self.byte_ranks is None

    def rank(self, token_id: int) -> int:
        """The rank a rule by rank compares (smallest wins); merged tokens rank by their id."""
        assert self.byte_ranks is not None, f"{self.name} compares bytes, not ranks"
        return self.byte_ranks[token_id] if token_id < 256 else token_id

    def token_key(self) -> TokenKey:
        """The key whose greatest pair (left token's key, right token's key) wins a tie."""
        ranks = self.byte_ranks
        if ranks is None:
            return lambda token_id, token: token
        return lambda token_id, token: -(ranks[token_id] if token_id < 256 else token_id)


@cache
def hf_byte_ranks() -> tuple[int, ...]:
    """Each byte's place among HF's 256 initial tokens: its byte-level character's rank by code point."""

    characters = gpt2_bytes_to_unicode()
    by_code_point = sorted(range(256), key=lambda byte: characters[byte])
    ranks = [0] * 256
    for rank, byte in enumerate(by_code_point):
        ranks[byte] = rank
    return tuple(ranks)


ROWS: dict[str, TieBreak] = {
    row.name: row
    for row in (
        TieBreak(CS336, "the greatest (left bytes, right bytes): the assignment's rule"),
        TieBreak(SMALLEST_ID, "the smallest (left id, right id), a byte's id its value: rustbpe's", tuple(range(256))),
        TieBreak(
            HF,
            "the smallest ids in HF's order, the bytes by their character's code point: BpeTrainer's",
            hf_byte_ranks(),
        ),
    )
}
TIE_BREAKS = tuple(ROWS)  # the names, in the rows' order


def tie_break_row(tie_break: object) -> TieBreak:
    """The row a name (or a row) stands for; None: cs336. Anything else refused in one line."""
    if isinstance(tie_break, TieBreak):
        return tie_break
    if tie_break is None:
        return ROWS[CS336]
    if not isinstance(tie_break, str) or tie_break not in ROWS:
        raise BPEInputError(f"tie_break must be one of {', '.join(ROWS)}, got {tie_break!r}")
    return ROWS[tie_break]


def check_tie_break(tie_break: object) -> str:
    """The name of the rule `tie_break` names (None: cs336), refused in one line unless a row has it."""
    return tie_break_row(tie_break).name


def token_rank(tie_break: str, token_id: int) -> int:
    """The id a rule by rank compares (smallest wins) for `tie_break`; merged tokens keep theirs."""
    return tie_break_row(tie_break).rank(token_id)


def token_key(tie_break: str) -> TokenKey:
    """The key whose greatest pair (left token's key, right token's key) wins a tie."""
    return tie_break_row(tie_break).token_key()
