"""Plain text counted in place: several inputs, read as one concatenated stream, cut into tasks of
byte ranges that begin and end at safe cuts (`plan_count_tasks`), so that counting them apart and
adding the tables gives the count of the whole; the tasks counted here on threads (`count_tasks`)
or on Dask's workers (`cluster.py`). Where one file does not end at a safe cut, its tail and the
next file's head are one task, so a word or a special token split across the boundary is counted
once, whole."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..rules.contract import BPEInputError, check_special_tokens, check_text_file, decode_utf8
from ..rules.pattern import WHITESPACE_CUTS, Pattern, resolve_pattern
from ..rules.splitting import (
    _SCAN_BLOCK,
    _pattern_cut,
    _spans_special_token,
    _special_token_cut,
    count_words_in_text,
    safe_cuts,
)
from .sources import is_url, url_filesystem
from .word_counts import CountTable, _native_module, add_tables, split_table

# Counting without the compiled module adds its tables up in groups of this many.
_LOCAL_FAN_IN = 8
# Cut points are searched in windows that start small (a cut is usually a few bytes away) and grow
# to the block `splitting.find_chunk_boundaries` scans.
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
    """Safe cuts (see `splitting.find_chunk_boundaries`) found by reading small windows of an input."""

    def __init__(self, source: _Source, tokens: list[bytes], cuts: str | None = WHITESPACE_CUTS) -> None:
        self.source = source
        self.tokens = tokens
        self.cuts = cuts  # the pattern's cut rule (Pattern.cuts); None: only special tokens cut
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
            if cut is None and self.cuts is not None:
                cut = _pattern_cut(window, block_start - base, block_end - base, self.tokens, self.cuts)
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
            for cut in safe_cuts(window, low, high + 1, self.cuts, backward=True) if self.cuts is not None else ():
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
    the pattern's cut, `Pattern.cuts`, as v3 and v7 cut chunks). Between files: the text
    after a file's last safe cut and before the next file's first safe cut is one task of two (or,
    when a file has no safe cut at all, more) segments, so nothing that spans a file boundary is cut.
    Finally consecutive tasks are joined while they fit in `task_bytes` (see `_group_contiguous`).
    Cuts stay a special token's length away from each file's ends, so no token can straddle them.
    A `pattern` without `cuts` is cut at special tokens only.
    """
    cuts = resolve_pattern(pattern).cuts
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
        finder = _CutFinder(source, tokens, cuts)
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
            return native.count_words_in_buffer(
                data, special_tokens, num_threads, pattern=pattern.scanner, unicode=pattern.unicode_version
            )
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
    counter = native.WordCounter(special_tokens, num_threads, pattern=pattern.scanner, unicode=pattern.unicode_version)
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
