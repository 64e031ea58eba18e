"""The interface between the driver (`trainers.py`) and a trainer version (`bpe_v1` ... `bpe_v7`);
what the result must be is the contract (`contract.py`, `splitting.py`, `vocab_layout.py`; docs/CONTRACT.md).

A version is a module with two phases:

    pretokenize_and_count(input_path, special_tokens, options, advance, *, pattern=None) -> word counts
    merge(word_counts, num_merges, advance, *, tie_break="cs336", start_from=None,
          min_frequency=None, max_token_length=None) -> merges

`pattern` is a `pattern.Pattern` (None: GPT-2's), `tie_break` a rule of `tie_break.py`, `start_from`
a base tokenizer's merges (`start_from.py`): each word starts as its encoding by them, and `merge`
returns the merges after them; `min_frequency`, `max_token_length` HF's limits (`merge_limits.py`), on
those new merges only.

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

from .contract import BPEInputError, Merges, check_num_workers
from .pattern import Pattern

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
        tie_break: str = ...,
        start_from: Merges | None = ...,
        min_frequency: int | None = ...,
        max_token_length: int | None = ...,
    ) -> Merges:
        """Up to `num_merges` merges in creation order, ties by `tie_break`, after `start_from`'s,
        within HF's limits; `advance(merges)`."""
        ...
