"""Counting: inputs planned, read and counted into a `WordCounts` (word_counts.py), for every source.

    from .counting import count_words, count_words_from_iterator
    counts = count_words(["part1.txt", "part2.txt.gz"], ["<|endoftext|>"])   # files, as if concatenated
    counts = count_words_from_iterator(documents, ["<|endoftext|>"])         # documents, streamed

This module runs a plan (`ingest/plan.py`: every input inspected once, see docs/INGEST.md) on this
machine; the stages it runs live each in its own module:

- `text_ranges.py`: plain text counted in place, cut into byte-range tasks at safe cuts; several
  inputs count **as if concatenated**. The same tasks run on Dask (`cluster.py`).
- `stream_counter.py`: everything else (compressed files, files of documents, iterables of
  documents) streamed through one counter, cut at safe points, documents kept apart.
- `document_batches.py`: documents taken from any iterable and batched for that counter; `_feed`.
- `read_ahead.py`: reading on a second thread while the counter works, and the reverse.

Inputs are local paths or, with `fsspec` installed, URLs (`s3://...`, `gs://...`, `file://...`).
Progress is a `advance(n)` callable, as in the merge phase (`progress.progress_bar` draws it).
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from ..native.backend import effective_num_threads, usable_cores
from ..progress import progress_bar
from ..rules.contract import BPEInputError, WordCountDict, check_special_tokens
from ..rules.pattern import Pattern, resolve_pattern
from ..rules.presets import resolve_unicode
from ..rules.splitting import special_token_bytes_in_files
from .document_batches import _document_items, _documents_in, _feed
from .plan import InputPlan, as_plan
from .read_ahead import CountedBehind, Prefetched
from .sources import (
    BLOCK_BYTES,
    ArrowDocuments,
    BadRecords,
    InputFile,
    documents_of,
    is_url,
    read_blocks,
)
from .stream_counter import DOCUMENT_SEPARATOR, _StreamCounter
from .table import iter_document_bytes, row_of
from .text_ranges import (
    CountTask,
    Segment,
    count_task,
    count_tasks,
    group_into_batches,
    input_bytes,
    plan_count_tasks,
    task_size,
)
from .word_counts import WordCounts, add_count_tables

# The stages' public names stay importable from here, where users and tests have imported them.
__all__ = [
    "DOCUMENT_SEPARATOR",
    "Prefetched",
    "LOCAL_TASK_BYTES",
    "CountTask",
    "Segment",
    "count_plan",
    "count_task",
    "count_tasks",
    "count_words",
    "count_words_from_iterator",
    "group_into_batches",
    "input_bytes",
    "plan_count_tasks",
    "source_items",
    "task_size",
]


# Local counting cuts each file into ranges of about this size: progress moves, memory does not grow.
LOCAL_TASK_BYTES = 256 << 20


def count_words(
    paths: str | os.PathLike | Iterable[str | os.PathLike],
    special_tokens: Iterable[str] | None = None,
    *,
    num_workers: int | None = None,
    progress: bool = False,
    task_bytes: int = LOCAL_TASK_BYTES,
    storage_options: Mapping[str, object] | None = None,
    format: str | None = None,
    text_field: str = "text",
    skip_bad_records: bool = False,
    pattern: str | Pattern | None = None,
    num_threads: int | None = None,
    unicode: str | None = None,
) -> WordCounts:
    """Count the pre-tokens of one or more UTF-8 inputs, read as if concatenated, on this machine.

    Uses the native counter on `num_workers` threads (None = every core) when it is built, else the
    pure-Python one; the result is the same either way and for every `task_bytes`. `pattern` (a name
    or a regex, see `pattern.py`; None: GPT-2's): one the native scanner does not run is counted with
    `regex` on `num_workers` worker processes (text files) or on one thread (streamed inputs).
    `num_threads` is `num_workers`' old name (the workers may be processes), still taken with a warning.
    `unicode`: the Unicode version of the pattern's character classes, one of `pattern.UNICODE_VERSIONS`
    (default: the pattern's own, else the installed `regex`'s, as training takes it); the counts record it.

    Inputs may also be compressed, JSON lines or Parquet, local or URLs (see `ingest/`; `format` forces
    text, jsonl or parquet, `text_field` names the records' field or column). Those are streamed
    (`_StreamCounter`): a file of documents counts as its documents joined by the first special
    token, and is kept apart from its neighbours the same way. A bad JSON-lines record stops the count
    with one line naming `file:line`; with `skip_bad_records` such records are left out, counted,
    and reported in one note on stderr (and in the result's `skipped_records`). Inputs without any
    text count as nothing here (a shard may be empty); the commands and `train` refuse them
    (`route.count_inputs`)."""
    specials = check_special_tokens(special_tokens)
    pattern = resolve_unicode(resolve_pattern(pattern), unicode)
    num_workers = effective_num_threads(_renamed_workers(num_workers, num_threads, "count_words"))
    plan = as_plan(paths, format, text_field, storage_options=storage_options, skip_bad_records=skip_bad_records)
    return count_plan(
        plan, specials, num_workers=num_workers, progress=progress, task_bytes=task_bytes, pattern=pattern
    )


def _renamed_workers(num_workers: int | None, num_threads: int | None, where: str) -> int | None:
    """`num_workers`, or `num_threads`, its old name, with a DeprecationWarning; not both."""
    if num_threads is None:
        return num_workers
    if num_workers is not None:
        raise TypeError(f"{where}: give num_workers alone (num_threads is its old name)")
    warnings.warn(
        f"{where}(num_threads=...) is now {where}(num_workers=...): the workers may be processes",
        DeprecationWarning,
        stacklevel=3,
    )
    return num_threads


def count_plan(
    plan: InputPlan,
    special_tokens: Iterable[str],
    *,
    num_workers: int | None = None,
    progress: bool = False,
    task_bytes: int = LOCAL_TASK_BYTES,
    pattern: str | Pattern | None = None,
) -> WordCounts:
    """`count_words` of inputs already inspected into a plan (`ingest.plan.plan_inputs`): plain text
    by byte ranges on threads (or processes, for a pattern the native scanner does not run), anything
    else streamed."""
    specials = check_special_tokens(special_tokens)
    pattern = resolve_pattern(pattern)
    num_workers = effective_num_threads(num_workers)  # -1 = every core, as everywhere else
    if not plan.in_place:
        return _count_streamed(plan, specials, num_workers, progress, pattern)
    path_list, storage_options = list(plan.paths), plan.storage_options
    workers = 1
    if not pattern.native:
        # Worker processes need tasks to share: a few each, as bpe_v3 cuts its chunks.
        total = input_bytes(path_list, storage_options)
        workers = num_workers if total >= _PARALLEL_MIN_BYTES else 1
        task_bytes = min(task_bytes, max(1, -(-total // (workers * _TASKS_PER_PROCESS))))
    tasks = plan_count_tasks(
        path_list, specials, task_bytes=task_bytes, storage_options=storage_options, pattern=pattern
    )
    source_bytes = sum(map(task_size, tasks))
    with progress_bar(progress, source_bytes, "count", "B", unit_scale=True) as advance:
        if workers > 1 and len(tasks) > 1:
            table = _count_on_processes(tasks, specials, workers, storage_options, pattern, advance)
        else:
            table = count_tasks(tasks, specials, num_workers, storage_options, progress=advance, pattern=pattern)
    counts = WordCounts(table, specials, pattern.regex, source_bytes, pattern.unicode_version)
    if pattern.name is None and not any(map(is_url, path_list)):
        # A custom pattern may leave text unmatched; the note on it needs the special tokens' bytes.
        counts.special_token_bytes = special_token_bytes_in_files(path_list, specials)
    return counts


# Counting with `regex` (a pattern the native scanner does not run) uses worker processes from this
# input size on (bpe_v3's threshold), each given a few tasks so that uneven ones balance.
_PARALLEL_MIN_BYTES = 1 << 20
_TASKS_PER_PROCESS = 4


def _count_on_processes(
    tasks: Sequence[CountTask],
    special_tokens: list[str],
    workers: int,
    storage_options: Mapping[str, object] | None,
    pattern: Pattern,
    advance: Callable[[int], object],
) -> WordCountDict:
    """The sum of `count_task` over `tasks` on `workers` processes (bpe_v3's pool, for `count_words`)."""
    total: WordCountDict = {}
    with ProcessPoolExecutor(max_workers=min(workers, len(tasks))) as pool:
        futures = [pool.submit(count_task, task, special_tokens, 1, storage_options, pattern) for task in tasks]
        try:
            # In submission order: the first error raised is the one earliest in the input.
            for future, task in zip(futures, tasks):
                add_count_tables(total, future.result())
                advance(task_size(task))
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    return total


def source_items(
    counter: _StreamCounter,
    source: InputFile,
    text_field: str,
    skipped: BadRecords | None,
    part: tuple[int, ...] | None = None,
    laid_out: bool = False,
) -> Iterator[Any]:
    """What `_feed` takes from one file of a plan, on this machine or on a worker: its text in blocks
    (bytes), else its documents (`part` of them) as its format's reader gives them, in batches
    (`_document_items`) or, `laid_out` where the reader can and the counter keeps documents apart,
    as blocks laid out for the native counter to read in place."""
    if not row_of(source).holds_documents:
        return read_blocks(source)
    if laid_out and counter.apart and row_of(source).laid_out:
        return iter_document_bytes(source, text_field, skipped, part, laid_out=True)
    return _document_items(counter, iter_document_bytes(source, text_field, skipped, part), BLOCK_BYTES, checked=True)


def _count_streamed(
    plan: InputPlan, specials: list[str], num_threads: int | None, progress: bool, pattern: Pattern | None = None
) -> WordCounts:
    """The counts of files, some compressed or of documents, read one after another: each file
    is read (decompressed, parsed) on a second thread while the counter works (`Prefetched`).
    Asked for every core, the counter leaves one to that thread: with a thread more than cores,
    a counting thread that lost its core holds up the others at every block's end (2 cores,
    real_mix: Parquet 0.235 -> 0.179 s, `.gz`, `.zst` and JSON lines no slower)."""
    sources, text_field = plan.files, plan.text_field
    expected = sum(row_of(source).expected_text_bytes(source) for source in sources)
    cores = usable_cores()
    if num_threads is not None and num_threads >= cores > 1:
        num_threads = cores - 1
    counter = _StreamCounter(specials, num_threads, documents=plan.documents, expected_bytes=expected, pattern=pattern)
    skipped = BadRecords() if plan.skip_bad_records else None
    # The total is not known before decompressing: the bar shows the text read and its rate.
    with progress_bar(progress, None, "count", "B", unit_scale=True) as advance:
        for source in sources:
            counter.label = source.path
            with Prefetched(
                lambda source=source: source_items(counter, source, text_field, skipped, laid_out=True)
            ) as fed:
                for item in fed:
                    before = counter.text_fed
                    _feed(counter, item)
                    advance(counter.text_fed - before)
        table = counter.take()
    counts = WordCounts(
        table, specials, counter.pattern.regex, counter.source_bytes, counter.pattern.unicode_version
    )
    if skipped is not None:
        counts.skipped_records = skipped.count
        note = skipped.note()
        if note is not None:
            print(note, file=sys.stderr)
    return counts


def count_words_from_iterator(
    texts: Iterable[str | bytes] | Any,
    special_tokens: Iterable[str] | None = None,
    *,
    num_workers: int | None = None,
    progress: bool = False,
    length: int | None = None,
    text_field: str = "text",
    batch_bytes: int = BLOCK_BYTES,
    pattern: str | Pattern | None = None,
    num_threads: int | None = None,
    unicode: str | None = None,
) -> WordCounts:
    """The word counts of documents, one per item, streamed (the iterable is read once, never held):
    equal to `count_words` of the text file in which the documents are joined by the first special
    token. With no special token, each document is counted on its own (the sum of the counts of each
    document), never across a boundary.

    `texts`: any iterable of `str` (or UTF-8 `bytes`; a `bytearray` or `memoryview` is copied when
    received, so one buffer may be refilled for every document) or of records (mappings, their
    `text_field`), a pyarrow `Table` (its `text_field` column), `ChunkedArray` or string `Array`
    (dictionary-encoded strings too), or a Hugging Face `datasets.Dataset` / `IterableDataset`.
    Documents without any text count as nothing (training refuses them: `trainers.train_from_iterator`).
    `length`: the number of documents, for the progress bar's total (taken from `len(texts)` when
    it has one). Documents are counted in batches of about `batch_bytes` of text. `pattern`: a name
    or a regex (`pattern.py`; None: GPT-2's); one the native scanner does not run counts in Python.
    `num_workers`: threads of the native counter (None = every core); `num_threads`, its old name, is
    still taken with a warning. `unicode` as in `count_words`."""
    specials = check_special_tokens(special_tokens)
    pattern = resolve_unicode(resolve_pattern(pattern), unicode)
    num_threads = effective_num_threads(_renamed_workers(num_workers, num_threads, "count_words_from_iterator"))
    documents, known_length = documents_of(texts, text_field)
    if batch_bytes < 1:
        raise BPEInputError(f"batch_bytes must be positive, got {batch_bytes}")
    expected = documents.text_bytes() if isinstance(documents, ArrowDocuments) else 0
    if isinstance(documents, (list, tuple)) and documents:
        # From the first documents: summing every length would cost what the hint saves.
        sample = documents[:1024]
        try:
            expected = len(documents) * sum(map(len, sample)) // len(sample)
        except TypeError:  # an item without a length: reported when it is reached
            expected = 0
    counter = _StreamCounter(
        specials, num_threads, documents=True, block_bytes=batch_bytes, expected_bytes=expected, pattern=pattern
    )
    total = length if length is not None else known_length
    arrow = isinstance(documents, ArrowDocuments)
    with progress_bar(progress, total, "count", "doc", unit_scale=True) as advance:
        counter.label = "documents"
        items = _document_items(counter, documents, batch_bytes, checked=arrow, text_field=text_field)
        if counter.native:
            with CountedBehind(counter) as behind:
                for item in items:
                    behind.put(item)
                    advance(_documents_in(item))
        else:  # the Python counter holds the GIL: nothing to overlap with
            for item in items:
                advance(_feed(counter, item))
        table = counter.take()
    return WordCounts(table, specials, pattern.regex, counter.source_bytes, pattern.unicode_version)
