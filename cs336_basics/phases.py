"""The interface between the driver (`trainers.py`) and a trainer version (`bpe_v1` ... `bpe_v7`);
what the result must be is the contract (`contract.py`, `splitting.py`, `vocab_layout.py`; docs/CONTRACT.md).

A version is a module with two phases:

    pretokenize_and_count(input_path, special_tokens, options, advance, *, pattern=None) -> word counts
    merge(word_counts, num_merges, advance, *, rules=MergeRules()) -> merges

`pattern` is a `pattern.Pattern` (None: GPT-2's); `rules` a `MergeRules`, the one value of what the
merge loop trains by: the tie-break (a row of `tie_break.py`), HF's limits (`merge_limits.py`) and a
base tokenizer's merges (`start_from.py`), which each word starts encoded by; `merge` returns the
merges after them, and the limits bound those new merges only.

The driver checks every argument once, the same way for every version, and owns the progress
display: a version only calls `advance(n)` when it has done `n` more units of work (bytes counted,
merges made) and never draws anything itself. Word counts are a `{word_bytes: count}` dict, or an
object the same version's `merge` understands (bpe_v7 keeps them in C++).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .rules.contract import BPEInputError, Merges, check_num_workers
from .rules.merge_limits import NO_LIMITS, MergeLimits
from .rules.pattern import Pattern
from .rules.tie_break import CS336, TieBreak, tie_break_row

# Called with how much more work is done: bytes in pre-tokenization, merges in the merge phase.
Advance = Callable[[int], object]


def ignore_progress(done: int) -> None:
    """The progress of a run nobody watches: ignored."""


@dataclass(frozen=True)
class CountParallelism:
    """How to parallelize pre-tokenization; no option changes the result.

    `num_workers`: processes (bpe_v3 ... bpe_v6) or threads (bpe_v7: its merge loop's too, on every
    path: text, documents, count files, Dask's counts), scikit-learn's convention:
    None = every core, -1 = every core, -2 = all but one. bpe_v1 and bpe_v2 count in-process.
    `num_chunks`: how many pieces the file is cut into (None: a few per worker).
    """

    num_workers: int | None = None
    num_chunks: int | None = None

    @classmethod
    def from_keywords(cls, options: dict[str, object]) -> CountParallelism:
        """The options passed to `train` as keywords, checked: unknown names and bad values raise."""
        known = {"num_workers", "num_chunks"}
        unknown = sorted(set(options) - known)
        if unknown:
            raise TypeError(f"unknown training option(s) {unknown}; the options are {sorted(known)}")
        # Checked and capped here, before any pool or thread starts.
        num_workers = check_num_workers(options.get("num_workers"))
        num_chunks = options.get("num_chunks")
        if num_chunks is not None and (
            isinstance(num_chunks, bool) or not isinstance(num_chunks, int) or num_chunks < 1
        ):
            raise BPEInputError(f"num_chunks must be a positive integer or None, got {num_chunks!r}")
        return cls(num_workers=num_workers, num_chunks=num_chunks)  # type: ignore[arg-type]


DEFAULT_OPTIONS = CountParallelism()


@dataclass(frozen=True)
class MergeRules:
    """What a merge loop trains by, checked when made, read once per `merge` call: `tie_break` a row
    of `tie_break.py` (or its name), `limits` HF's (`merge_limits.MergeLimits`), `base_merges` a base
    tokenizer's merges in rank order (`start_from.Base.merges`; empty: from the bytes). Made from a
    run's `presets.TrainingRules` by `TrainingRules.merge_rules(base)`."""

    tie_break: TieBreak = tie_break_row(CS336)
    limits: MergeLimits = NO_LIMITS
    base_merges: tuple[tuple[bytes, bytes], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "tie_break", tie_break_row(self.tie_break))
        if not isinstance(self.limits, MergeLimits):
            raise TypeError(f"limits must be a merge_limits.MergeLimits, got {type(self.limits).__name__}")
        object.__setattr__(self, "base_merges", tuple(self.base_merges))


DEFAULT_MERGE_RULES = MergeRules()


def check_merge_rules(rules: object) -> MergeRules:
    """`rules` as a version's `merge` takes them: a MergeRules (None: the defaults); else TypeError."""
    if rules is None:
        return DEFAULT_MERGE_RULES
    if not isinstance(rules, MergeRules):
        raise TypeError(f"rules must be a phases.MergeRules, got {type(rules).__name__}")
    return rules


class TrainerVersion(Protocol):
    """What every `bpe_vN` module provides."""

    def pretokenize_and_count(
        self,
        input_path: Path,
        special_tokens: list[str],
        options: CountParallelism = ...,
        advance: Advance = ...,
        *,
        pattern: Pattern | None = ...,
    ) -> Any:
        """Word counts of the file pre-tokenized by `pattern`, special tokens split out and not
        counted; `advance(bytes)`."""
        ...

    def merge(
        self,
        word_counts: Any,
        num_merges: int,
        advance: Advance = ...,
        *,
        rules: MergeRules = ...,
    ) -> Merges:
        """Up to `num_merges` merges in creation order by `rules`: ties by its tie-break, after its
        base's merges, within HF's limits; `advance(merges)`."""
        ...
