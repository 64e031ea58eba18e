"""Counting: inputs planned, read and counted into a `WordCounts` (word_counts.py), for every source.

    from .counting import count_words, count_words_from_iterator
    counts = count_words(["part1.txt", "part2.txt.gz"], ["<|endoftext|>"])   # files, as if concatenated
    counts = count_words_from_iterator(documents, ["<|endoftext|>"])         # documents, streamed

Plain text files are cut into tasks (`plan_count_tasks`): byte ranges that begin and end at safe
cuts, so that counting them apart and adding the tables gives the count of the whole. Several inputs
are counted **as if concatenated** (no separator is inserted): where one file does not end at a safe
cut, its tail and the next file's head are one task, so a word or a special token split across the
file boundary is counted once, whole. Inputs are local paths or, with `fsspec` installed, URLs
(`s3://...`, `gs://...`, `file://...`), inspected once into a plan (`ingest/plan.py`, see
docs/INGEST.md) that `count_plan` runs. The same tasks run locally (`count_tasks`, the native counter
on threads) and on Dask (`cluster.py`). Compressed files, files of documents (JSON lines, Parquet) and
iterables of documents are streamed (`_StreamCounter`): read ahead on one thread, cut at safe
points, counted block by block. Progress is a `report(n)` callable, as in the merge phase
(`progress.progress_bar` draws it).
"""

from __future__ import annotations

import os
import queue
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from .backend import effective_num_threads, usable_cores
from .contract import (
    _SCAN_BLOCK,
    BPEInputError,
    _spans_special_token,
    _special_token_cut,
    _whitespace_cut,
    check_special_tokens,
    check_text_file,
    count_words_in_text,
    decode_utf8,
    whitespace_cuts,
)
from .formats import (
    BLOCK_BYTES,
    ArrowDocuments,
    BadRecords,
    InputFile,
    LaidOutDocuments,
    documents_of,
    encoded_documents,
    is_url,
    iter_document_bytes,
    read_blocks,
    url_filesystem,
)
from .ingest.plan import InputPlan, as_plan
from .ingest.table import format_row
from .pattern import Pattern, resolve_pattern
from .progress import progress_bar
from .word_counts import CountTable, WordCounts, _native_module, add_count_tables, add_tables, split_table

__all__ = [
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
]


# Local counting cuts each file into ranges of about this size: progress moves, memory does not grow.
LOCAL_TASK_BYTES = 256 << 20
# Counting without the compiled module adds its tables up in groups of this many.
_LOCAL_FAN_IN = 8
# Cut points are searched in windows that start small (a cut is usually a few bytes away) and grow
# to the block `contract.find_chunk_boundaries` scans.
_FIRST_WINDOW = 1 << 12


# ---------------------------------------------------------------------------------------------
# Planning: cutting several inputs, read as one concatenated stream, into independent tasks


@dataclass(frozen=True)
class Segment:
    """Bytes [start, end) of one input (a local path or an fsspec URL)."""

    path: str
    start: int
    end: int


# The segments of one task are read and joined before counting: a task of one segment is a byte
# range of one input; a task of several is the junction of consecutive inputs.
CountTask = tuple[Segment, ...]


def _read_range(path: str, start: int, end: int, storage_options: Mapping[str, object] | None) -> bytes:
    """Bytes `start:end` of an input that planning has already checked."""
    if is_url(path):
        fs, fs_path = url_filesystem(path, storage_options)
        return fs.cat_file(fs_path, start=start, end=end)
    with open(path, "rb") as file:
        file.seek(start)
        return file.read(end - start)


class _Source:
    """Random access to one input, local or through fsspec, checked once when planning."""

    def __init__(self, path: str, storage_options: Mapping[str, object] | None = None) -> None:
        self.path = path
        self.storage_options = storage_options
        if is_url(path):
            fs, fs_path = url_filesystem(path, storage_options)
            if not fs.exists(fs_path):
                raise BPEInputError(f"training file not found: {path}")
            self.size = int(fs.size(fs_path))
        else:
            self.size = check_text_file(path, allow_empty=True).stat().st_size

    def read(self, start: int, end: int) -> bytes:
        start, end = max(0, start), min(self.size, end)
        if end <= start:
            return b""
        return _read_range(self.path, start, end, self.storage_options)


class _CutFinder:
    """Safe cuts (see `contract.find_chunk_boundaries`) found by reading small windows of an input."""

    def __init__(self, source: _Source, tokens: list[bytes], whitespace: bool = True) -> None:
        self.source = source
        self.tokens = tokens
        self.whitespace = whitespace  # False: only special tokens cut (Pattern.whitespace_cuts_safe)
        # Windows reach this far past the block searched, so every token check sees whole tokens.
        self.pad = max((len(token) for token in tokens), default=0) + 1

    def first_at_or_after(self, position: int) -> int | None:
        """A safe cut at or after `position`: the first one of the first window that has one."""
        size = self.source.size
        block_start, span = position, _FIRST_WINDOW
        while block_start < size:
            block_end = min(block_start + span, size)
            base = max(0, block_start - self.pad)
            window = self.source.read(base, block_end + self.pad)
            cut = _special_token_cut(window, block_start - base, block_end - base, self.tokens)
            if cut is None and self.whitespace:
                cut = _whitespace_cut(window, block_start - base, block_end - base, self.tokens)
            if cut is not None and base + cut < size:
                return base + cut
            block_start, span = block_end, min(span * 16, _SCAN_BLOCK)
        return None

    def last_at_or_before(self, position: int, floor: int) -> int | None:
        """The last safe cut in [floor, position] of the last window that has one."""
        block_end, span = position, _FIRST_WINDOW
        while block_end >= floor:
            block_start = max(floor, block_end - span)
            span = min(span * 16, _SCAN_BLOCK)
            base = max(0, block_start - self.pad)
            window = self.source.read(base, block_end + self.pad)
            low, high = block_start - base, block_end - base
            best = -1
            for token in self.tokens:
                found = window.rfind(token, low, high + len(token))
                while found != -1 and _spans_special_token(window, found, self.tokens):
                    found = window.rfind(token, low, found + len(token) - 1)
                best = max(best, found)
            for cut in whitespace_cuts(window, low, high + 1, backward=True) if self.whitespace else ():
                if not _spans_special_token(window, cut, self.tokens):
                    best = max(best, cut)
                    break
            if best >= 0:
                return base + best
            if block_start == floor:
                return None
            block_end = block_start
        return None


def input_bytes(paths: Sequence[str | os.PathLike], storage_options: Mapping[str, object] | None = None) -> int:
    """The inputs' total size (each checked as planning checks it)."""
    if not paths:
        raise BPEInputError("no input files given")
    return sum(_Source(os.fspath(path), storage_options).size for path in paths)


def plan_count_tasks(
    paths: Sequence[str | os.PathLike],
    special_tokens: Iterable[str],
    *,
    task_bytes: int = 64 << 20,
    storage_options: Mapping[str, object] | None = None,
    pattern: str | Pattern | None = None,
) -> list[CountTask]:
    """Cut the inputs, read as if concatenated, into tasks that can be counted independently and
    whose counts add up to the counts of the concatenation.

    Inside a file, ranges of about `task_bytes` end at safe cuts (a special token's start, or
    whitespace after an ASCII letter or digit, as v3 and v7 cut chunks). Between files: the text
    after a file's last safe cut and before the next file's first safe cut is one task of two (or,
    when a file has no safe cut at all, more) segments, so nothing that spans a file boundary is cut.
    Finally consecutive tasks are joined while they fit in `task_bytes` (see `_group_contiguous`).
    Cuts stay a special token's length away from each file's ends, so no token can straddle them.
    A `pattern` that `whitespace_cuts_safe` does not cover is cut at special tokens only.
    """
    whitespace = resolve_pattern(pattern).whitespace_cuts_safe
    tokens = [token.encode("utf-8") for token in check_special_tokens(special_tokens)]
    margin = max(max((len(token) for token in tokens), default=0), 1)
    if task_bytes < 1:
        raise BPEInputError(f"task_bytes must be positive, got {task_bytes}")
    sources = [_Source(os.fspath(path), storage_options) for path in paths]
    if not sources:
        raise BPEInputError("no input files given")
    sources = [source for source in sources if source.size > 0]  # empty files add nothing anywhere

    tasks: list[CountTask] = []
    pending: list[Segment] = []  # text after the last cut, not yet in a task
    for index, source in enumerate(sources):
        first, last, size = index == 0, index == len(sources) - 1, source.size
        finder = _CutFinder(source, tokens, whitespace)
        head: int | None = 0 if first else finder.first_at_or_after(margin)
        tail: int | None = size
        if head is not None and not last:
            tail = finder.last_at_or_before(size - margin, max(head, margin)) if head <= size - margin else None
            if tail is None and 0 < head <= size - margin:
                tail = head
        if head is None or tail is None or head > tail:
            pending.append(Segment(source.path, 0, size))
            continue
        if head > 0:
            pending.append(Segment(source.path, 0, head))
        if pending:
            tasks.append(tuple(pending))
        start = head
        while start < tail:
            cut = finder.first_at_or_after(start + task_bytes) if start + task_bytes < tail else None
            end = tail if cut is None or cut >= tail else cut
            tasks.append((Segment(source.path, start, end),))
            start = end
        pending = [Segment(source.path, tail, size)] if tail < size else []
    if pending:
        tasks.append(tuple(pending))
    return _group_contiguous(tasks, task_bytes)


def _group_contiguous(tasks: list[CountTask], task_bytes: int) -> list[CountTask]:
    """Consecutive tasks joined while they fit in `task_bytes`: the tasks tile the stream in order,
    so a run of them is a stretch between two safe cuts, and counting it whole is exact. Many small
    files then make a few tasks instead of one or two each (each task costs a count table).

    A task that is one range of at least a quarter of `task_bytes` stays alone: counted in place
    (memory-mapped), while a task of several ranges is read and joined first, a copy that costs
    more than the extra count table of a tiny task between two large ones."""
    groups: list[list[Segment]] = []
    group_size = 0
    alone = False  # the last group is a task that stays alone
    for task in tasks:
        size = task_size(task)
        stays_alone = len(task) == 1 and size >= task_bytes // 4
        if not groups or alone or stays_alone or group_size + size > task_bytes:
            groups.append([])
            group_size = 0
        group = groups[-1]
        for segment in task:
            if group and group[-1].path == segment.path and group[-1].end == segment.start:
                group[-1] = Segment(segment.path, group[-1].start, segment.end)
            else:
                group.append(segment)
        group_size += size
        alone = stays_alone
    return [tuple(group) for group in groups]


def group_into_batches(tasks: Sequence[CountTask], num_batches: int) -> list[tuple[CountTask, ...]]:
    """The tasks, in order, as at most `num_batches` runs of about equal bytes (each run ends at the
    task boundary nearest its share of the total), for `count_tasks`: one table per run."""
    if num_batches < 1:
        raise BPEInputError(f"num_batches must be positive, got {num_batches}")
    total = sum(map(task_size, tasks))
    batches: list[tuple[CountTask, ...]] = []
    start = done = 0
    for index, task in enumerate(tasks):
        size = task_size(task)
        target = total * (len(batches) + 1) / num_batches
        # Close the run before this task when that lands nearer the target than after it.
        if index > start and done + size - target > target - done:
            batches.append(tuple(tasks[start:index]))
            start = index
        done += size
    if start < len(tasks):
        batches.append(tuple(tasks[start:]))
    return batches


# ---------------------------------------------------------------------------------------------
# Counting


def describe_task(task: CountTask) -> str:
    return " + ".join(f"{segment.path} bytes {segment.start:,}..{segment.end:,}" for segment in task)


def _count_buffer(
    data: bytes | memoryview, special_tokens: list[str], num_threads: int | None, task: CountTask, pattern: Pattern
) -> CountTable:
    native = _native_module() if pattern.native else None
    try:
        if native is not None:
            return native.count_words_in_buffer(data, special_tokens, num_threads, pattern=pattern.name)
        return dict(count_words_in_text(decode_utf8(bytes(data)), special_tokens, pattern))
    except (ValueError, UnicodeDecodeError) as error:
        raise BPEInputError(_located(task, str(error))) from None


def _located(task: CountTask, message: str) -> str:
    """`message` about a task's bytes, naming the file: an offset in it (counted from the start of
    the task's bytes) is turned into the offset in the file that holds it."""
    found = re.search(r"at byte offset (\d+)", message)
    if found is not None:
        offset = int(found.group(1))
        for segment in task:
            if offset < segment.end - segment.start:
                where = f"at byte offset {segment.start + offset}"
                return f"{segment.path}: {message[: found.start()]}{where}{message[found.end() :]}"
            offset -= segment.end - segment.start
    return f"{describe_task(task)}: {message}"


def _checked_local_range(segment: Segment) -> None:
    if segment.end > os.stat(segment.path).st_size:
        raise BPEInputError(f"{segment.path} changed while it was read (it is shorter than when it was planned)")


def _read_task(task: CountTask, storage_options: Mapping[str, object] | None) -> bytes:
    data = b"".join(_read_range(segment.path, segment.start, segment.end, storage_options) for segment in task)
    if len(data) != task_size(task):
        raise BPEInputError(f"{describe_task(task)}: changed while it was read (shorter than when it was planned)")
    return data


def count_task(
    task: CountTask,
    special_tokens: list[str],
    num_threads: int | None = 1,
    storage_options: Mapping[str, object] | None = None,
    pattern: str | Pattern | None = None,
) -> CountTable:
    """The word counts of one task's bytes by `pattern` (a native table, or a dict without the
    compiled module or for a pattern the native scanner does not run): a pure function of its
    arguments (safe to retry). The bytes are read, not memory-mapped: a file that shrinks under a
    mapping kills the process with SIGBUS, a short read is an error (and the pure-Python counter
    holds the text as a str anyway)."""
    pattern = resolve_pattern(pattern)
    return _count_buffer(_read_task(task, storage_options), special_tokens, num_threads, task, pattern)


def count_tasks(
    tasks: Sequence[CountTask],
    special_tokens: list[str],
    num_threads: int | None = 1,
    storage_options: Mapping[str, object] | None = None,
    progress: Callable[[int], object] | None = None,
    num_slices: int | None = None,
    pattern: str | Pattern | None = None,
) -> CountTable | list[CountTable]:
    """The word counts of several tasks' bytes in one table (their sum), a pure function of its
    arguments (safe to retry); with `num_slices`, that table cut as `split_table` cuts it. With the
    compiled module every task is counted into the same native table (`_count_cpp.WordCounter`), so a
    batch of tasks costs one table, not one each, and it comes out in table order, unsorted (fit for
    adding up; `WordCounts` sorts it for a count file). A local range is memory-mapped with its pages
    released as they are counted; other tasks are read whole: memory is one task's bytes plus the
    table. `progress`, if given, gets each task's size once it is counted. A `pattern` the native
    scanner does not run is counted in Python, into dicts."""
    pattern = resolve_pattern(pattern)
    native = _native_module() if pattern.native else None
    if native is None:
        tables: list[CountTable] = []
        for task in tasks:
            tables.append(count_task(task, special_tokens, num_threads, storage_options, pattern))
            if len(tables) == _LOCAL_FAN_IN:  # memory: a few tables, whatever the input size
                tables = [add_tables(tables)]
            if progress is not None:
                progress(task_size(task))
        table = add_tables(tables)
        return table if num_slices is None else split_table(table, num_slices)
    counter = native.WordCounter(special_tokens, num_threads, pattern=pattern.name)
    for task in tasks:
        try:
            if len(task) == 1 and not is_url(task[0].path):
                segment = task[0]
                _checked_local_range(segment)
                counter.count_file_range(segment.path, segment.start, segment.end)
            else:
                counter.count(_read_task(task, storage_options))
        except ValueError as error:
            raise BPEInputError(_located(task, str(error))) from None
        if progress is not None:
            progress(task_size(task))
    return counter.take() if num_slices is None else counter.take_slices(num_slices)


def task_size(task: CountTask) -> int:
    return sum(segment.end - segment.start for segment in task)


def count_words(
    paths: str | os.PathLike | Iterable[str | os.PathLike],
    special_tokens: Iterable[str] | None = None,
    *,
    num_threads: int | None = None,
    progress: bool = False,
    task_bytes: int = LOCAL_TASK_BYTES,
    storage_options: Mapping[str, object] | None = None,
    format: str | None = None,
    text_field: str = "text",
    skip_bad_records: bool = False,
    pattern: str | Pattern | None = None,
) -> WordCounts:
    """Count the pre-tokens of one or more UTF-8 inputs, read as if concatenated, on this machine.

    Uses the native counter on `num_threads` threads (None = every core) when it is built, else the
    pure-Python one; the result is the same either way and for every `task_bytes`. `pattern` (a name
    or a regex, see `pattern.py`; None: GPT-2's): one the native scanner does not run is counted with
    `regex` on `num_threads` worker processes (text files) or on one thread (streamed inputs).

    Inputs may also be compressed, JSON lines or Parquet, local or URLs (see `ingest/`; `format` forces
    text, jsonl or parquet, `text_field` names the records' field or column). Those are streamed
    (`_StreamCounter`): a file of documents counts as its documents joined by the first special
    token, and is kept apart from its neighbours the same way. A bad JSON-lines record stops the count
    with one line naming `file:line`; with `skip_bad_records` such records are left out, counted,
    and reported in one note on stderr (and in the result's `skipped_records`). Inputs without any
    text count as nothing here (a shard may be empty); the commands and `train` refuse them
    (`trainers.count_inputs`)."""
    specials = check_special_tokens(special_tokens)
    pattern = resolve_pattern(pattern)
    num_threads = effective_num_threads(num_threads)  # -1 = every core, as everywhere else
    plan = as_plan(paths, format, text_field, storage_options=storage_options, skip_bad_records=skip_bad_records)
    return count_plan(
        plan, specials, num_threads=num_threads, progress=progress, task_bytes=task_bytes, pattern=pattern
    )


def count_plan(
    plan: InputPlan,
    special_tokens: Iterable[str],
    *,
    num_threads: int | None = None,
    progress: bool = False,
    task_bytes: int = LOCAL_TASK_BYTES,
    pattern: str | Pattern | None = None,
) -> WordCounts:
    """`count_words` of inputs already inspected into a plan (`ingest.plan.plan_inputs`): plain text
    by byte ranges on threads (or processes, for a pattern the native scanner does not run), anything
    else streamed."""
    specials = check_special_tokens(special_tokens)
    pattern = resolve_pattern(pattern)
    num_threads = effective_num_threads(num_threads)  # -1 = every core, as everywhere else
    if not plan.in_place:
        return _count_streamed(plan, specials, num_threads, progress, pattern)
    path_list, storage_options = list(plan.paths), plan.storage_options
    workers = 1
    if not pattern.native:
        # Worker processes need tasks to share: a few each, as bpe_v3 cuts its chunks.
        total = input_bytes(path_list, storage_options)
        workers = num_threads if total >= _PARALLEL_MIN_BYTES else 1
        task_bytes = min(task_bytes, max(1, -(-total // (workers * _TASKS_PER_PROCESS))))
    tasks = plan_count_tasks(
        path_list, specials, task_bytes=task_bytes, storage_options=storage_options, pattern=pattern
    )
    source_bytes = sum(map(task_size, tasks))
    with progress_bar(progress, source_bytes, "count", "B", unit_scale=True) as report:
        if workers > 1 and len(tasks) > 1:
            table = _count_on_processes(tasks, specials, workers, storage_options, pattern, report)
        else:
            table = count_tasks(tasks, specials, num_threads, storage_options, progress=report, pattern=pattern)
    return WordCounts(table, specials, pattern.regex, source_bytes)


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
    report: Callable[[int], object],
) -> dict[bytes, int]:
    """The sum of `count_task` over `tasks` on `workers` processes (bpe_v3's pool, for `count_words`)."""
    total: dict[bytes, int] = {}
    with ProcessPoolExecutor(max_workers=min(workers, len(tasks))) as pool:
        futures = [pool.submit(count_task, task, special_tokens, 1, storage_options, pattern) for task in tasks]
        try:
            # In submission order: the first error raised is the one earliest in the input.
            for future, task in zip(futures, tasks):
                add_count_tables(total, future.result())
                report(task_size(task))
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    return total


# ---------------------------------------------------------------------------------------------
# Streamed sources: compressed files, files of documents, iterables of documents

# Documents are joined by the first special token, as in a text file of documents joined by it. With
# no special token this string stands in: the counter splits on it as on a special token (so nothing
# crosses a document boundary and it is never counted), and text that holds it is refused. Its first
# character occurs once in it, so no occurrence in a document can overlap one put between documents.
DOCUMENT_SEPARATOR = "\U0010fffe<cs336 document boundary>"


class _BufferSource:
    """A bytes buffer with `_Source`'s read interface, so `_CutFinder` finds safe cuts in it."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.size = len(data)

    def read(self, start: int, end: int) -> bytes:
        return self.data[max(0, start) : min(self.size, end)]


class _StreamCounter:
    """Counts a stream of UTF-8 text, fed in pieces of any size, in blocks of about `block_bytes`
    that end at safe cuts (`_CutFinder`, the planner's rule), so the counts equal those of the whole
    stream counted at once. Text pieces continue each other (files read as if concatenated); each
    document is kept apart by the separator (the first special token, else DOCUMENT_SEPARATOR).

    With the compiled module each block is counted by one `WordCounter` on `num_threads` threads,
    the GIL released; without it by `contract.count_words_in_text`, added into one dict. Memory: the count
    table plus a block (more only while the text has no safe cut at all)."""

    def __init__(
        self,
        special_tokens: list[str],
        num_threads: int | None,
        *,
        documents: bool,
        block_bytes: int = BLOCK_BYTES,
        started: bool = False,
        after_document: bool = False,
        expected_bytes: int = 0,
        pattern: str | Pattern | None = None,
    ) -> None:
        """`started` / `after_document`: this counter counts a later part of a stream (a task on a
        cluster) in which something, or a document, came before: its first document, or its text
        after a document, is then separated from it. `expected_bytes`: about how much text will be
        fed (0: not known), so the native tables are sized once rather than grown as blocks come.
        `pattern` (None: GPT-2's): one the native scanner does not run counts in Python, and one
        `whitespace_cuts_safe` does not cover is cut at special tokens (or documents' ends) only."""
        self.pattern = resolve_pattern(pattern)
        self.private_separator = documents and not special_tokens
        self.tokens = [DOCUMENT_SEPARATOR] if self.private_separator else list(special_tokens)
        self.separator = self.tokens[0].encode("utf-8") if self.tokens else b""
        self._token_bytes = [token.encode("utf-8") for token in self.tokens]
        self._margin = max(max((len(token) for token in self._token_bytes), default=0), 1)
        self._block_bytes = block_bytes
        self._flush_at = block_bytes
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._started = started  # something was fed: a document that follows gets a separator first
        self._after_document = after_document  # the last piece was a document: text that follows gets one too
        self.documents_fed = 0
        self.text_fed = 0  # bytes of text and documents, separators not included
        self._text_tail = b""  # the end of the text run so far, to find the separator across pieces
        self._offset = 0  # stream bytes counted so far, for error messages
        self.label = "text"  # what is being fed, for error messages
        self.source_bytes = 0  # bytes of the equivalent text (DOCUMENT_SEPARATOR not included)
        native = _native_module() if self.pattern.native else None
        self._counter = (
            native.WordCounter(self.tokens, num_threads, expected_bytes, pattern=self.pattern.name)
            if native is not None
            else None
        )
        self.native = self._counter is not None  # counts with the GIL released
        # Documents are counted as they come, each batch (or Arrow array) in place, when the separator keeps
        # them apart whatever they hold (<|endoftext|> does); else joined, and cut where it is safe.
        counter = self._counter
        self.apart = bool(counter is not None and self.tokens and counter.keeps_documents_apart(self.tokens[0]))
        self._table: dict[bytes, int] = {}

    def _separate(self) -> None:
        self._put(self.separator)
        if not self.private_separator:  # a special token is text of the equivalent file
            self.source_bytes += len(self.separator)

    def text(self, data: bytes) -> None:
        """More text, continuing the text before it (a document before it is kept apart)."""
        if self._after_document:
            self._separate()
            self._after_document = False
            self._text_tail = b""
        if self.private_separator:
            joined = self._text_tail + data
            if self.separator in joined:
                raise BPEInputError(f"{self.label} holds cs336's internal document separator; pass a special token")
            self._text_tail = joined[-(len(self.separator) - 1) :]
        if self._counter is not None and len(data) >= self._block_bytes // 2:
            self._put_in_place(data)
        else:
            self._put(data)
        self._started = True
        self.source_bytes += len(data)
        self.text_fed += len(data)

    def _put_in_place(self, data: bytes) -> None:
        """A large piece of text counted where it lies: what is pending up to the piece's first safe cut
        (a small join), the piece up to its last safe cut (no copy), and its tail kept pending."""
        finder = _CutFinder(_BufferSource(data), self._token_bytes, self.pattern.whitespace_cuts_safe)
        end = len(data) - self._margin
        first = finder.first_at_or_after(self._margin) if end > self._margin else None
        last = finder.last_at_or_before(end, first) if first is not None and first <= end else None
        if last is None or first is None:
            self._put(data)
            return
        self._pending.append(data[:first])
        self._pending_bytes += first
        self._flush(final=True)
        with memoryview(data) as view:
            if last > first:
                self._count(view[first:last])
        rest = data[last:]
        self._pending = [rest] if rest else []
        self._pending_bytes = len(rest)
        self._flush_at = len(rest) + self._block_bytes

    def document(self, data: bytes) -> None:
        """One document, kept apart from what comes before and after it."""
        if self._started:
            self._separate()
        if self.private_separator and self.separator in data:
            raise BPEInputError(f"{self.label} holds cs336's internal document separator; pass a special token")
        self._put(data)
        self._started = self._after_document = True
        self.source_bytes += len(data)
        self.text_fed += len(data)
        self.documents_fed += 1

    def joined_documents(self, joined: bytes, count: int) -> None:
        """`count` documents already joined by `self.separator`: the same as `document` for each, with
        the joining done elsewhere (in C++ for Arrow, on the reading thread for files)."""
        if count < 1:
            return
        if self.private_separator and joined.count(self.separator) != count - 1:
            # Exact: the separator's first character occurs once in it, so no occurrence can overlap
            # an inserted one; one more means a document holds it.
            raise BPEInputError(f"{self.label} holds cs336's internal document separator; pass a special token")
        if self.apart:
            self._count_apart(joined, count)
            return
        if self._started:
            self._separate()
        self._put(joined)
        self._account(len(joined) - (count - 1) * len(self.separator), count)

    def _account(self, content: int, count: int) -> None:
        """`count` documents of `content` bytes in all were fed."""
        self._started = self._after_document = True
        self.source_bytes += content + (0 if self.private_separator else (count - 1) * len(self.separator))
        self.text_fed += content
        self.documents_fed += count

    def _separate_apart(self) -> None:
        """Before documents counted apart: the text pending before them ends at a safe cut (the
        separator's start), so it is counted first; the separator is accounted for."""
        if self._started:
            if self._pending_bytes:
                self._flush(final=True)
            self._offset += len(self.separator)
            self.source_bytes += 0 if self.private_separator else len(self.separator)

    def _count_apart(self, joined: bytes, count: int) -> None:
        """Documents joined by the separator that keeps them apart, counted as they are."""
        self._separate_apart()
        self._count(joined)
        self._account(len(joined) - (count - 1) * len(self.separator), count)

    def document_batch(self, batch: DocumentBatch) -> None:
        """Documents each counted where it lies by the native counter, when the separator keeps them
        apart; a bad one (not a document, not UTF-8) is named as `encoded_documents` names it."""
        documents = batch.documents
        if not documents:
            return
        self._separate_apart()
        refused = self.separator.decode("utf-8") if self.private_separator else ""
        try:
            kept, content = self._counter.count_texts(documents, self.tokens[0], refused)
        except (TypeError, ValueError) as error:
            list(encoded_documents(documents, start=batch.start))  # names the first bad document
            where = f"in the documents at stream byte {self._offset:,}"
            raise BPEInputError(f"{self.label}: {error} ({where})") from None
        if not kept:
            raise BPEInputError(f"{self.label} holds cs336's internal document separator; pass a special token")
        self._offset += content + (len(documents) - 1) * len(self.separator)
        self._account(content, len(documents))

    def arrow_documents(self, array: Any) -> None:
        """The documents of an Arrow `string` or `large_string` array without nulls, read in place by
        the native counter when the separator keeps documents apart (else joined inside Arrow), in
        slices of about `block_bytes` of text."""
        if not self.apart:
            for joined, count in ArrowDocuments(lambda: [array], self.label).joined(self.separator):
                self.joined_documents(joined, count)
            return
        import pyarrow

        if len(array) == 0:
            return
        width = 8 if pyarrow.types.is_large_string(array.type) else 4
        _, offsets_buffer, data_buffer = array.buffers()
        first, end = array.offset, array.offset + len(array)
        view = memoryview(offsets_buffer)
        with view, view.cast("B") as raw, raw[: (end + 1) * width] as used, used.cast("iq"[width == 8]) as offsets:
            while first < end:
                # Rows for about block_bytes of text, from the average size of what is left.
                left = offsets[end] - offsets[first]
                rows = end - first if left <= self._block_bytes else max(1, (end - first) * self._block_bytes // left)
                content = offsets[first + rows] - offsets[first]
                self._count_in_place(data_buffer, offsets_buffer, width, first, rows, content)
                first += rows

    def laid_out_documents(self, documents: LaidOutDocuments) -> None:
        """A block of JSON-lines records as the compiled reader left them, read in place by the
        native counter (needs `apart`)."""
        if documents.count:
            self._count_in_place(documents.texts, documents.ends, 8, 0, documents.count, len(documents.texts))

    def _count_in_place(self, data: Any, offsets: Any, width: int, first: int, rows: int, content: int) -> None:
        """`rows` documents laid out as an Arrow string array lays them out (`WordCounter.count_documents`),
        holding `content` bytes, counted where they lie."""
        if self._started:
            if self._pending_bytes:
                self._flush(final=True)
            self._offset += len(self.separator)
            self.source_bytes += 0 if self.private_separator else len(self.separator)
        refused = self.separator.decode("utf-8") if self.private_separator else ""
        try:
            kept = self._counter.count_documents(data, offsets, width, first, rows, self.tokens[0], refused)
        except ValueError as error:
            where = f"in the documents at stream byte {self._offset:,}"
            raise BPEInputError(f"{self.label}: {error} ({where})") from None
        if not kept:
            raise BPEInputError(f"{self.label} holds cs336's internal document separator; pass a special token")
        self._offset += content + (rows - 1) * len(self.separator)
        self._account(content, rows)

    def _put(self, data: bytes) -> None:
        if data:
            self._pending.append(data)
            self._pending_bytes += len(data)
            if self._pending_bytes >= self._flush_at:
                self._flush(final=False)

    def _flush(self, final: bool) -> None:
        buffer = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
        cut: int | None = len(buffer)
        if not final:
            # Cuts stay a token's length before the end: what follows the buffer is not known yet.
            finder = _CutFinder(_BufferSource(buffer), self._token_bytes, self.pattern.whitespace_cuts_safe)
            cut = finder.last_at_or_before(len(buffer) - self._margin, 1) if len(buffer) > self._margin else None
            if not cut:
                # No safe cut yet (one enormous word?): wait for more text, scanning again only once
                # the buffer has doubled, so a long run without cuts costs linear time.
                self._pending, self._flush_at = [buffer], 2 * len(buffer)
                return
        with memoryview(buffer) as view:
            self._count(view[:cut])
        rest = buffer[cut:]
        self._pending = [rest] if rest else []
        self._pending_bytes = len(rest)
        self._flush_at = len(rest) + self._block_bytes

    def _count(self, block: bytes | memoryview) -> None:
        offset = self._offset
        try:
            if self._counter is not None:
                self._counter.count(block)
            else:
                text = decode_utf8(bytes(block), offset)
                add_count_tables(self._table, count_words_in_text(text, self.tokens, self.pattern))
        except (ValueError, UnicodeDecodeError) as error:
            raise BPEInputError(f"{self.label}: {error} (in the block at stream byte {offset:,})") from None
        self._offset += len(block)

    def take(self) -> CountTable:
        """The counts of everything fed (the counter is then empty)."""
        if self._pending_bytes:
            self._flush(final=True)
        if self._counter is not None:
            return self._counter.take()
        table, self._table = self._table, {}
        return table


# Decompressed blocks (or batches of documents) read ahead of the counter: one being counted, this
# many waiting. Memory: about (PREFETCH_DEPTH + 2) blocks.
PREFETCH_DEPTH = 2
# Documents are handed from the reading thread to the counter in batches of about this many bytes:
# one queue item per document would cost more than parsing it.
_DOCUMENT_BATCH_BYTES = 1 << 20
_END = object()


def _put_unless_stopped(items: queue.Queue[Any], item: object, stop: threading.Event) -> bool:
    """Puts `item`, waiting for room and checking every 50 ms whether `stop` is set (then False)."""
    while not stop.is_set():
        try:
            items.put(item, timeout=0.05)
            return True
        except queue.Full:
            continue
    return False


def _drain(items: queue.Queue[Any]) -> None:
    """Drops what waits in `items`, so that a thread blocked putting into it goes on."""
    try:
        while True:
            items.get_nowait()
    except queue.Empty:
        pass


class _Failed:
    """An exception raised on the reading thread, carried to the counting thread and raised there."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


class Prefetched:
    """Runs `make()`'s iterator on one thread (`cs336-read-ahead`), at most `depth` items ahead of
    the consumer, so decompressing and parsing (gzip, bz2, lzma and zstandard release the GIL while
    they decompress) overlap with the native counter (which releases it while it counts).

        with Prefetched(lambda: read_blocks(source)) as blocks:
            for block in blocks:
                counter.text(block)

    An exception on the reading thread is raised in the consumer as it is; leaving the block early
    (an exception, Ctrl-C in the consumer) stops the reading thread and waits for it, so no thread
    outlives the block and the file is closed on the thread that opened it."""

    def __init__(self, make: Callable[[], Iterable[Any]], depth: int = PREFETCH_DEPTH) -> None:
        self._make = make
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, name="cs336-read-ahead", daemon=True)

    def _put(self, item: object) -> bool:
        """Waits for room; False once the consumer has gone."""
        return _put_unless_stopped(self._queue, item, self._stop)

    def _read(self) -> None:
        iterator = None
        try:
            iterator = iter(self._make())
            for item in iterator:
                if not self._put(item):
                    return
            self._put(_END)
        except BaseException as error:  # carried to the consumer, which decides
            self._put(_Failed(error))
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()  # a generator's `with open(...)` closes here, on this thread

    def __enter__(self) -> Prefetched:
        self._thread.start()
        return self

    def __iter__(self) -> Iterator[Any]:
        while True:
            item = self._queue.get()
            if item is _END:
                return
            if isinstance(item, _Failed):
                raise item.error
            yield item

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        # Unblock a reader waiting for room; it sees the stop at its next put.
        while self._thread.is_alive():
            _drain(self._queue)
            self._thread.join(timeout=0.05)


class CountedBehind:
    """Feeds items to a native `_StreamCounter` on a second thread (`cs336-count-behind`), so that the
    caller's thread gathers the next batch (iterating the caller's documents: Python work that holds
    the GIL) while the counter counts this one (the GIL released). The caller's iterable is only ever
    read on the caller's thread. At most `depth` items wait.

        with CountedBehind(counter) as behind:
            for item in items:
                behind.put(item)       # raises the counting thread's error, if it failed

    Leaving the block normally waits for every item to be counted and raises the counting thread's
    error, if any; leaving it by an exception stops the counting thread after its current item."""

    def __init__(self, counter: _StreamCounter, depth: int = PREFETCH_DEPTH) -> None:
        self._counter = counter
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=depth)
        self._failure: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._count, name="cs336-count-behind", daemon=True)

    def _count(self) -> None:
        while True:
            item = self._queue.get()
            if item is _END or self._stop.is_set():
                return
            try:
                _feed(self._counter, item)
            except BaseException as error:  # carried to the caller's thread, which raises it
                self._failure = error
                self._stop.set()
                return

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    def put(self, item: Any) -> None:
        if not _put_unless_stopped(self._queue, item, self._stop):
            self._raise_failure()

    def __enter__(self) -> CountedBehind:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc_info: object) -> None:
        if exc_type is not None:
            self._stop.set()
        # Wake the counting thread with _END: behind what waits (every item is counted), or, once
        # stopped, instead of it.
        while self._thread.is_alive():
            if self._stop.is_set():
                _drain(self._queue)
            try:
                self._queue.put(_END, timeout=0.05)
            except queue.Full:
                continue
            self._thread.join()
        if exc_type is None:
            self._raise_failure()


def _received(document: Any, text_field: str, index: int) -> Any:
    """A document that is not a str or bytes, as it is kept until counted: a record (a mapping, as
    JSON lines hold them) gives its `text_field`; a mutable buffer is copied, since the caller may
    refill it for the next document (`buf[:] = ...; yield buf`) before this one is counted. Anything
    else is left for `encoded_documents` to refuse by its index."""
    if isinstance(document, Mapping):
        if text_field not in document:
            fields = ", ".join(map(repr, list(document)[:10])) or "none"
            raise BPEInputError(
                f"document {index} is a record without the field {text_field!r} (fields: {fields}); "
                "choose the field with text_field="
            )
        text = document[text_field]
        if not isinstance(text, (str, bytes, bytearray, memoryview)):
            raise BPEInputError(f"document {index}'s field {text_field!r} is a {type(text).__name__}, not a string")
        document = text
    if isinstance(document, (bytearray, memoryview)):
        return bytes(document)
    return document


def _batches(documents: Iterable[Any], batch_bytes: int, text_field: str = "text") -> Iterator[tuple[list[Any], int]]:
    """(a list of documents of about `batch_bytes`, the index of its first) from any iterable; an
    item without a length stops with the error `encoded_documents` gives it (naming its index).
    Items other than str and bytes are taken as `_received` says, when they are received."""
    batch: list[Any] = []
    size = start = 0
    iterator = iter(documents)
    while True:
        append = batch.append
        try:
            for document in iterator:
                kind = type(document)
                if kind is not str and kind is not bytes:
                    document = _received(document, text_field, start + len(batch))
                append(document)
                size += len(document) + 1  # characters, not bytes: a batch may hold up to 4x as much
                if size >= batch_bytes:
                    break
        except TypeError:
            list(encoded_documents(batch, start=start))
            raise
        if not batch:
            return
        yield batch, start
        start += len(batch)
        batch, size = [], 0


def _joined_batches(
    documents: Iterable[Any],
    separator: bytes,
    batch_bytes: int = _DOCUMENT_BATCH_BYTES,
    *,
    checked: bool = True,
    text_field: str = "text",
) -> Iterator[tuple[bytes, int]]:
    """Documents joined by `separator` in batches of about `batch_bytes`, with how many each holds:
    the counter then takes one buffer per batch, not one Python call per document. Items that are
    not str go through `encoded_documents` (which names a bad item), unless `checked` says that bytes
    items are UTF-8 already (read from a file). Arrow sources are joined by Arrow (no Python object
    per document)."""
    if isinstance(documents, ArrowDocuments):
        yield from documents.joined(separator)
        return
    encode = str.encode
    for batch, start in _batches(documents, batch_bytes, text_field):
        try:
            # Each document encoded on its own: an ASCII one is copied as it is, where joining the str
            # first would widen the whole batch to its widest character (2.2x slower on real_mix).
            joined = separator.join([encode(document, "utf-8") for document in batch])
        except (TypeError, UnicodeEncodeError):
            if checked and all(type(document) is bytes for document in batch):
                joined = separator.join(batch)
            else:
                joined = separator.join(encoded_documents(batch, start=start))
        yield joined, len(batch)


@dataclass
class DocumentBatch:
    """Documents as the caller gave them (str or bytes), which the native counter reads where they lie
    (`WordCounter.count_texts`), and the index of the first, for error messages."""

    documents: list[Any]
    start: int


def _document_items(
    counter: _StreamCounter, documents: Iterable[Any], batch_bytes: int, checked: bool, text_field: str = "text"
) -> Iterator[Any]:
    """What `_feed` takes from `documents`. Where the separator keeps documents apart, the native
    counter reads them in place: Arrow string arrays as they are, other documents in batches
    (`DocumentBatch`); else (documents joined by the separator, how many), in batches. Records
    (mappings) give their `text_field`."""
    if counter.apart and isinstance(documents, ArrowDocuments):
        return documents.chunks()
    if counter.apart:
        return (DocumentBatch(batch, start) for batch, start in _batches(documents, batch_bytes, text_field))
    return _joined_batches(documents, counter.separator, batch_bytes, checked=checked, text_field=text_field)


def _documents_in(item: Any) -> int:
    """How many documents an item of `_document_items` holds (a block of text: none)."""
    if isinstance(item, bytes):
        return 0
    if isinstance(item, DocumentBatch):
        return len(item.documents)
    if isinstance(item, LaidOutDocuments):
        return item.count
    return item[1] if isinstance(item, tuple) else len(item)


def _feed(counter: _StreamCounter, item: Any) -> int:
    """Counts an item of `_document_items` or `source_items`; how many documents it held."""
    if isinstance(item, bytes):
        counter.text(item)
    elif isinstance(item, DocumentBatch):
        counter.document_batch(item)
    elif isinstance(item, LaidOutDocuments):
        counter.laid_out_documents(item)
    elif isinstance(item, tuple):
        counter.joined_documents(*item)
    else:
        counter.arrow_documents(item)
    return _documents_in(item)


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
    if not source.holds_documents:
        return read_blocks(source)
    if laid_out and counter.apart and format_row(source.format).laid_out:
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
    expected = sum(source.expected_text_bytes() for source in sources)
    cores = usable_cores()
    if num_threads is not None and num_threads >= cores > 1:
        num_threads = cores - 1
    counter = _StreamCounter(specials, num_threads, documents=plan.documents, expected_bytes=expected, pattern=pattern)
    skipped = BadRecords() if plan.skip_bad_records else None
    # The total is not known before decompressing: the bar shows the text read and its rate.
    with progress_bar(progress, None, "count", "B", unit_scale=True) as report:
        for source in sources:
            counter.label = source.path
            with Prefetched(
                lambda source=source: source_items(counter, source, text_field, skipped, laid_out=True)
            ) as fed:
                for item in fed:
                    before = counter.text_fed
                    _feed(counter, item)
                    report(counter.text_fed - before)
        table = counter.take()
    counts = WordCounts(table, specials, counter.pattern.regex, counter.source_bytes)
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
    num_threads: int | None = None,
    progress: bool = False,
    length: int | None = None,
    text_field: str = "text",
    batch_bytes: int = BLOCK_BYTES,
    pattern: str | Pattern | None = None,
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
    or a regex (`pattern.py`; None: GPT-2's); one the native scanner does not run counts in Python."""
    specials = check_special_tokens(special_tokens)
    pattern = resolve_pattern(pattern)
    num_threads = effective_num_threads(num_threads)
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
    with progress_bar(progress, total, "count", "doc", unit_scale=True) as report:
        counter.label = "documents"
        items = _document_items(counter, documents, batch_bytes, checked=arrow, text_field=text_field)
        if counter.native:
            with CountedBehind(counter) as behind:
                for item in items:
                    behind.put(item)
                    report(_documents_in(item))
        else:  # the Python counter holds the GIL: nothing to overlap with
            for item in items:
                report(_feed(counter, item))
        table = counter.take()
    return WordCounts(table, specials, pattern.regex, counter.source_bytes)
