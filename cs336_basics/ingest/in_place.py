"""One local plain-text file counted in place, by the trainer version itself (`route.Route.VERSION`).

A version's own `pretokenize_and_count` reads the file (bpe_v3's processes, bpe_v7's memory-mapped
counter); like='hf-files', as HF's `train(files)`, pre-tokenizes each line alone and starts the
vocabulary from the bytes the text holds: the native counter counts the lines where it is built, and
bpe_v1 (the oracle) in Python (`splitting.count_words_in_lines`). The file is checked where it is
opened (`contract.check_input_file`: an empty file is refused, as every version does). What
`counted.counted_input` asks; it notes what the counts say and hands them to the merge phase.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sized
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from ..native.backend import NativeUnavailable, effective_num_threads, load_native
from ..phases import CountParallelism, TrainerVersion
from ..progress import progress_bar
from ..rules.contract import check_input_file, read_corpus
from ..rules.splitting import count_words_in_lines, present_bytes, special_token_bytes_in_files

if TYPE_CHECKING:
    from os import PathLike

    from ..rules.presets import TrainingRules
    from ..rules.start_from import Base


@dataclass(frozen=True)
class VersionReading:
    """The trainer version of a run as counting needs it: `name` and `version` (`trainers.load_trainer`),
    `options` (`phases.CountParallelism`, checked), `native_lines`: it counts hf-files' lines with the
    native counter where that is built (bpe_v1, the oracle, counts them in Python), `native_counts`:
    its merge takes counts held in C++ as they are (`trainers.Registered.merges_native_counts`)."""

    name: str
    version: TrainerVersion
    options: CountParallelism
    native_lines: bool = True
    native_counts: bool = False


class FreshCounts(NamedTuple):
    """Counts just made, before their notes: `word_counts` (a dict, or a table held in C++ where the
    version merges those), the `source_bytes` of text counted (0: not noted), `special_bytes` measuring
    its special tokens' bytes (None: not known), `alphabet` (hf-files: the bytes the text holds; None:
    all 256), `release_words` (the run's own counts: a merge that can frees them), `started` (perf_counter)."""

    word_counts: Sized
    source_bytes: int
    special_bytes: Callable[[], int | None] | None
    alphabet: bytes | None
    release_words: bool
    started: float


def count_in_place(
    path: str | PathLike,
    special_tokens: list[str],
    rules: TrainingRules,
    reading: VersionReading,
    progress: bool,
    base: Base | None = None,
) -> FreshCounts:
    """The file at `path` counted by `reading`'s version, split on `special_tokens` (none where `rules`
    count them as text), pre-tokenized by `rules.pattern`; line by line where `rules.by_lines` (from
    `base` too: the merge phase keeps the base's merges that occur, `start_from.occurring_merges`)."""
    path = check_input_file(path)  # an empty file refused, as every version does
    started = time.perf_counter()
    size = path.stat().st_size
    options = reading.options
    native = None
    if rules.by_lines and reading.native_lines and rules.pattern.native:
        try:
            native = load_native("_count_cpp")
        except NativeUnavailable:
            pass  # counted in Python, as bpe_v1 counts
    with progress_bar(progress, size, "pre-tokenize", "B", unit_scale=True) as advance:
        if rules.by_lines and native is None:
            text = read_corpus(path)
            word_counts = dict(count_words_in_lines(text, rules.pattern))
            advance(size)
            return FreshCounts(word_counts, 0, None, present_bytes(b"".join(word_counts)), False, started)
        if rules.by_lines:  # the text's size is not noted: its special tokens are text, all of it matched
            threads = None if options.num_workers is None else effective_num_threads(options.num_workers)
            chunk_bytes = -(-size // options.num_chunks) if options.num_chunks else None
            table = native.count_file(  # type: ignore[union-attr]
                path,
                [],
                threads,
                chunk_bytes,
                advance,
                rules.pattern.scanner,
                by_lines=True,
                unicode=rules.pattern.unicode_version,
            )
            alphabet = present_bytes(table.to_arrays()[0])
            return FreshCounts(table if reading.native_counts else table.to_dict(), 0, None, alphabet, False, started)
        special_bytes = lambda: special_token_bytes_in_files([path], special_tokens)  # noqa: E731
        counted = rules.counted_special_tokens(special_tokens)
        word_counts = reading.version.pretokenize_and_count(path, counted, options, advance, pattern=rules.pattern)
    # The counts are this run's own: a version that can frees them once its merge loop has them.
    return FreshCounts(word_counts, size, special_bytes, None, reading.native_counts, started)
