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
from typing import TYPE_CHECKING

from .in_place import FreshCounts, VersionReading, count_in_place
from .plan import InputPlan, as_plan
from .route import Route, count_plan_by_route, route
from .word_counts import CountNotes, count_notes

if TYPE_CHECKING:
    from ..rules.presets import TrainingRules
    from ..rules.start_from import Base


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
    `plan.inspect_input` (a plan's own where `inputs` is one). hf-files goes on from `base` as SuperBPE's
    trainer does (`trainers.lines_base`)."""
    counted = rules.counted_special_tokens(special_tokens)  # hf-raw: the text is not split on them
    plan = as_plan(inputs, format, text_field, skip_bad_records=skip_bad_records, name="input_path")
    way = route(plan, rules=rules)  # hf-files: one local text file, or refused here
    version = reading()
    if way is not Route.VERSION:  # counted first, here (hf-files took no other route: refused by `route`)
        started = time.perf_counter()
        counts = count_plan_by_route(
            plan, counted, num_workers=version.options.num_workers, progress=progress, pattern=rules.pattern
        )
        # A version that merges counts held in C++ takes them as they are; every other one takes a dict.
        table = counts.native if version.native_counts and counts.native is not None else counts.counts
        measured = counts.special_token_bytes  # the note on unmatched text needs the special tokens' bytes
        fresh = FreshCounts(table, counts.source_bytes, lambda: measured, None, False, started)
    else:  # the version reads the one local text file itself
        fresh = count_in_place(plan.files[0].path, special_tokens, rules, version, progress, base)
    word_counts, source_bytes, special_bytes, alphabet, release_words, started = fresh
    notes = count_notes(word_counts, special_tokens, source_bytes, rules, special_bytes)
    return CountedInput(version, word_counts, source_bytes, notes, started, "pre-tokenize", alphabet, release_words)
