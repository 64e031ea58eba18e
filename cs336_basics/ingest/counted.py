"""The counted input of a run: what the driver (`trainers.train`) asks `ingest/` for, once.

    counted = counted_input(input_path, special_tokens, rules, reading, format=..., progress=...)

`counted_input` inspects the input once (`plan.as_plan`), asks `route.route` how it is counted, and
counts it that way: one local plain-text file by the trainer version itself (`Route.VERSION`: its own
`pretokenize_and_count`, or line by line for like='hf-files', as HF's `train(files)`), anything else
counted first on this machine (`route.count_plan_by_route`). A file the version reads is checked where
it is opened (`contract.check_input_file`: an empty file is refused, as every version does).

It returns a `CountedInput`: the word counts with what the merge phase needs of them: the bytes of text
counted, the notes on them (`word_counts.count_notes`: special tokens the text never holds, text a
custom pattern matches nowhere, said on stderr) and, for hf-files, the bytes the vocabulary starts from.
The version is the driver's (`trainers.REGISTRY`): `reading()` hands it over as a `VersionReading`,
asked once the input is inspected and routed, so a bad input is refused before a version loads.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sized
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..native.backend import NativeUnavailable, effective_num_threads, load_native
from ..phases import CountParallelism, TrainerVersion
from ..progress import progress_bar
from ..rules.contract import BPEInputError, check_input_file, read_corpus
from ..rules.splitting import count_words_in_lines, special_token_bytes_in_files
from .plan import InputPlan, as_plan
from .route import Route, count_plan_by_route, route
from .word_counts import CountNotes, count_notes

if TYPE_CHECKING:
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


@dataclass
class CountedInput:
    """A run's input counted: `word_counts` (a dict, or a table held in C++ where `reading` merges
    those), `source_bytes` of text (0: not known), `notes` on them, `alphabet`: the bytes the vocabulary
    starts from (hf-files; None: all 256), `release_words`: the counts are the run's own, so a merge
    that can frees them once loaded; `first_phase` names what ran since `started` (perf_counter)."""

    reading: VersionReading
    word_counts: Sized
    source_bytes: int
    notes: CountNotes
    started: float
    first_phase: str = "pre-tokenize"
    alphabet: bytes | None = None
    release_words: bool = False


def counted_input(
    inputs: str | os.PathLike | InputPlan,
    special_tokens: list[str],
    rules: TrainingRules,
    reading: Callable[[], VersionReading],
    *,
    format: str | None = None,
    text_field: str = "text",
    skip_bad_records: bool = False,
    base: Base | None = None,
    progress: bool = False,
) -> CountedInput:
    """`inputs` counted by the route `route.route` gives them (see the module), split on `special_tokens`
    (none where `rules` count them as text), pre-tokenized by `rules.pattern`; `reading()` is asked for
    the version once the inputs are inspected. `format`, `text_field`, `skip_bad_records`: see
    `plan.inspect_input` (a plan's own where `inputs` is one). hf-files cannot go on from `base`."""
    counted = rules.counted_special_tokens(special_tokens)  # hf-raw: the text is not split on them
    plan = as_plan(inputs, format, text_field, skip_bad_records=skip_bad_records, name="input_path")
    way = route(plan, rules=rules)  # a version reads one local text file itself; other inputs are counted first
    version = reading()
    if rules.by_lines:
        if base is not None:  # its vocabulary starts from the bytes seen, a base's from all 256
            raise BPEInputError(
                "like='hf-files' starts the vocabulary from the bytes the file holds; it cannot go on from "
                f"{base.source}: train with like='hf' to start from a base"
            )
        path = check_input_file(plan.files[0].path)  # an empty file refused, as every version does
        return _counted_by_lines(path, special_tokens, rules, version, progress)
    if way is not Route.VERSION:
        started = time.perf_counter()
        counts = count_plan_by_route(
            plan, counted, num_workers=version.options.num_workers, progress=progress, pattern=rules.pattern
        )
        # A version that merges counts held in C++ takes them as they are; every other one takes a dict.
        table = counts.native if version.native_counts and counts.native is not None else counts.counts
        measured = counts.special_token_bytes  # the note on unmatched text needs the special tokens' bytes
        notes = count_notes(table, special_tokens, counts.source_bytes, rules, lambda: measured)
        return CountedInput(version, table, counts.source_bytes, notes, started)
    path = check_input_file(plan.files[0].path)  # an empty file refused, as every version does
    return _counted_in_place(path, special_tokens, rules, version, progress)


def _counted_in_place(
    path: Path, special_tokens: list[str], rules: TrainingRules, reading: VersionReading, progress: bool
) -> CountedInput:
    """One local text file counted by the version itself, in place."""
    started = time.perf_counter()
    size = path.stat().st_size
    counted = rules.counted_special_tokens(special_tokens)
    with progress_bar(progress, size, "pre-tokenize", "B", unit_scale=True) as advance:
        word_counts = reading.version.pretokenize_and_count(
            path, counted, reading.options, advance, pattern=rules.pattern
        )
    notes = count_notes(
        word_counts, special_tokens, size, rules, lambda: special_token_bytes_in_files([path], special_tokens)
    )
    # The counts are this run's own: a version that can frees them once its merge loop has them.
    return CountedInput(reading, word_counts, size, notes, started, release_words=reading.native_counts)


def _counted_by_lines(
    path: Path, special_tokens: list[str], rules: TrainingRules, reading: VersionReading, progress: bool
) -> CountedInput:
    """HF's `train(files)` (the preset hf-files): the file's lines each pre-tokenized alone, the special
    tokens counted as text, the vocabulary starting from the bytes the text holds. bpe_v1 counts in
    Python (`splitting.count_words_in_lines`), the oracle; every other version through the native
    counter where it is built."""
    started = time.perf_counter()
    size = path.stat().st_size
    native = None
    if reading.native_lines and rules.pattern.native:
        try:
            native = load_native("_count_cpp")
        except NativeUnavailable:
            pass  # counted in Python, as bpe_v1 counts
    options = reading.options
    with progress_bar(progress, size, "pre-tokenize", "B", unit_scale=True) as advance:
        if native is not None:
            threads = None if options.num_workers is None else effective_num_threads(options.num_workers)
            chunk_bytes = -(-size // options.num_chunks) if options.num_chunks else None
            word_counts = native.count_file(
                path,
                [],
                threads,
                chunk_bytes,
                advance,
                rules.pattern.scanner,
                by_lines=True,
                unicode=rules.pattern.unicode_version,
            )
            alphabet = present_bytes(word_counts.to_arrays()[0])
            if not reading.native_counts:
                word_counts = word_counts.to_dict()
        else:
            word_counts = dict(count_words_in_lines(read_corpus(path), rules.pattern))
            alphabet = present_bytes(b"".join(word_counts))
            advance(size)
    # The text's size is not noted: its special tokens are text, and a named pattern matches all of it.
    notes = count_notes(word_counts, special_tokens, 0, rules)
    return CountedInput(reading, word_counts, 0, notes, started, alphabet=alphabet)


def present_bytes(data: bytes) -> bytes:
    """The byte values `data` holds, ascending: one memchr per value, never a Python loop over the data."""
    return bytes(byte for byte in range(256) if data.find(bytes((byte,))) >= 0)
