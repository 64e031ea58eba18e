"""bpe_v3 — unlike bpe_v2: pre-tokenize and count in worker processes, one chunk of the file each.

Once merges are incremental, pre-tokenization dominates: the `regex` package manages a few MB/s per
core. v3 cuts the file into chunks at special-token starts (or, where a region has none, at
whitespace boundaries that split no pre-token of a named pattern, see
`splitting.find_chunk_boundaries`), lets a pool of processes count each chunk, and adds the
counters. The result does not depend on the number of workers or chunks; the merge loop is v2's.
"""

from __future__ import annotations

import mmap
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from os import PathLike

from .bpe_v2 import merge
from .native.backend import resolve_parallelism
from .phases import DEFAULT_OPTIONS, Advance, CountParallelism, ignore_progress
from .rules.contract import BPEInputError, WordCountDict, check_input_file, decode_utf8
from .rules.pattern import Pattern, resolve_pattern
from .rules.splitting import count_words_in_text, find_chunk_boundaries

__all__ = ["merge", "pretokenize_and_count"]

# Chunks per worker: more chunks than workers keeps every core busy when chunks differ in speed.
CHUNKS_PER_WORKER = 4
# Below this size, starting worker processes costs more than it saves (a pool starts in ~50 ms,
# `regex` counts ~5 MB/s), so automatic worker counts stay in-process; an explicit count is obeyed.
PARALLEL_MIN_BYTES = 1 << 20


def _count_chunk(path: str, start: int, end: int, special_tokens: list[str], pattern: Pattern) -> Counter[bytes]:
    with open(path, "rb") as file:
        file.seek(start)
        data = file.read(end - start)
    if len(data) != end - start:  # the file shrank since its chunks were planned
        raise BPEInputError(f"{path} changed while it was read")
    return count_words_in_text(decode_utf8(data, offset=start), special_tokens, pattern)


def pretokenize_and_count(
    input_path: str | PathLike,
    special_tokens: list[str],
    options: CountParallelism = DEFAULT_OPTIONS,
    advance: Advance = ignore_progress,
    *,
    pattern: Pattern | None = None,
) -> WordCountDict:
    """Word counts of the file, its chunks counted by `pattern` (None: GPT-2's) in worker processes.
    A pattern without `cuts` (`Pattern.cuts`) is cut only at special tokens."""
    pattern = resolve_pattern(pattern)
    path = check_input_file(input_path)
    workers = resolve_parallelism(options.num_workers)
    if options.num_workers is None and path.stat().st_size < PARALLEL_MIN_BYTES:
        workers = 1
    chunks = options.num_chunks or workers * CHUNKS_PER_WORKER
    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        boundaries = find_chunk_boundaries(data, chunks, special_tokens, cuts=pattern.cuts)
    spans = list(zip(boundaries[:-1], boundaries[1:]))
    total: Counter[bytes] = Counter()
    if workers == 1 or len(spans) == 1:
        for start, end in spans:
            total.update(_count_chunk(str(path), start, end, special_tokens, pattern))
            advance(end - start)
    else:
        with ProcessPoolExecutor(max_workers=min(workers, len(spans))) as pool:
            futures = [
                pool.submit(_count_chunk, str(path), start, end, special_tokens, pattern) for start, end in spans
            ]
            try:
                # Collect in submission order: the first error raised is the one at the lowest offset.
                for future, (start, end) in zip(futures, spans):
                    total.update(future.result())
                    advance(end - start)
            except BaseException:
                # An error or an interrupt: let the workers finish only the chunks they hold.
                pool.shutdown(wait=True, cancel_futures=True)
                raise
    return dict(total)
