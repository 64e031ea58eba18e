"""bpe_v3 — unlike bpe_v2: pre-tokenize and count in worker processes, one chunk of the file each.

Once merges are incremental, pre-tokenization dominates: the `regex` package manages a few MB/s per
core. v3 cuts the file into chunks at special-token starts (or, where a region has none, at
whitespace boundaries that split no pre-token, see `_common.find_chunk_boundaries`), lets a pool
of processes count each chunk, and adds the counters. The result does not depend on the number of
workers or chunks; the merge loop is v2's.
"""

from __future__ import annotations

import mmap
import os
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from os import PathLike

from tqdm import tqdm

from ._common import WordCounts, check_input_file, count_words, decode_utf8, find_chunk_boundaries
from .bpe_v2 import merge

__all__ = ["merge", "pretokenize_and_count", "resolve_num_workers"]

# Chunks per worker: more chunks than workers keeps every core busy when chunks differ in speed.
CHUNKS_PER_WORKER = 4
# Below this size, starting worker processes costs more than it saves (a pool starts in ~50 ms,
# `regex` counts ~5 MB/s), so automatic worker counts stay in-process; an explicit count is obeyed.
PARALLEL_MIN_BYTES = 1 << 20


def resolve_num_workers(num_workers: int | None) -> int:
    """scikit-learn's convention: None = every core, -1 = every core, -2 = all but one, ..."""
    cores = os.cpu_count() or 1
    if num_workers is None:
        return cores
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers == 0:
        raise ValueError(f"num_workers must be a non-zero integer or None, got {num_workers!r}")
    return num_workers if num_workers > 0 else max(1, cores + 1 + num_workers)


def _count_chunk(path: str, start: int, end: int, special_tokens: list[str]) -> Counter[bytes]:
    with open(path, "rb") as file:
        file.seek(start)
        text = decode_utf8(file.read(end - start), offset=start)
    return count_words(text, special_tokens)


def pretokenize_and_count(
    input_path: str | PathLike,
    special_tokens: list[str],
    *,
    progress: bool = False,
    num_workers: int | None = None,
    num_chunks: int | None = None,
) -> WordCounts:
    path = check_input_file(input_path)
    workers = resolve_num_workers(num_workers)
    if num_workers is None and path.stat().st_size < PARALLEL_MIN_BYTES:
        workers = 1
    chunks = num_chunks or workers * CHUNKS_PER_WORKER
    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        boundaries = find_chunk_boundaries(data, chunks, special_tokens)
    spans = list(zip(boundaries[:-1], boundaries[1:]))
    total: Counter[bytes] = Counter()
    bar = tqdm(total=boundaries[-1], desc="pre-tokenize", unit="B", unit_scale=True, disable=not progress)
    with bar:
        if workers == 1 or len(spans) == 1:
            for start, end in spans:
                total.update(_count_chunk(str(path), start, end, special_tokens))
                bar.update(end - start)
        else:
            with ProcessPoolExecutor(max_workers=min(workers, len(spans))) as pool:
                futures = [pool.submit(_count_chunk, str(path), start, end, special_tokens) for start, end in spans]
                # Collect in submission order: the first error raised is the one at the lowest offset.
                for future, (start, end) in zip(futures, spans):
                    total.update(future.result())
                    bar.update(end - start)
    return dict(total)
