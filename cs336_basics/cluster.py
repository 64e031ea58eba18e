"""Count words on a Dask cluster, train on the client.

    from .cluster import connect, count_words_on_cluster
    with connect("local:2") as client:                 # or "tcp://scheduler:8786", or your own Client
        counts = count_words_on_cluster(client, ["s3://bucket/part-00.txt", ...], ["<|endoftext|>"])
    vocab, merges = train_bpe_from_counts(counts, 32_000)

The inputs, read as if concatenated, are cut into tasks of about `task_bytes` by
`word_counts.plan_count_tasks` (stretches that begin and end at special tokens or at whitespace that
splits no pre-token, as v7 cuts its chunks; file boundaries need no cut, and small files share a
task). Each task runs the native counter (one thread) on its bytes, memory-mapped when it is one
range of a local file, else read (locally or through fsspec) and joined, so a worker holds one
task's bytes plus one count table, whatever the input size. Each task cuts its table into slices by
a hash of the word (one per worker); the slices are added up on the workers, one tree per slice
(`fan_in` tables per addition), so the tops of the trees run in parallel and their sums share no
word: the client only concatenates them. Tables stay in C++ throughout (they travel between
processes as three flat arrays: words, lengths, counts), and the client keeps the result in C++
for bpe_v7 or a count file.
Tasks are pure functions of their (small) arguments and never change their inputs, so when Dask
re-runs a task after an error or a lost worker, nothing is lost or counted twice: a result either
arrives once or the task runs again.

Works with any `distributed.Client`: a `LocalCluster`, a running scheduler, `dask-jobqueue`
(SLURM, PBS, ...), Kubernetes. Inputs must be readable from every worker: a shared file system or
fsspec URLs. Needs the `cluster` extra: pip install -e ".[cluster]".
"""

from __future__ import annotations

import operator
import os
import pickle
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

from tqdm import tqdm

from ._common import GPT2_SPLIT_PATTERN, BPEInputError, check_special_tokens
from .backend import usable_cores
from .word_counts import (
    CountTable,
    CountTask,
    WordCounts,
    add_tables,
    concatenate_slices,
    count_task,
    plan_count_tasks,
    split_table,
    task_size,
)

if TYPE_CHECKING:
    from distributed import Client, Future

__all__ = ["DEFAULT_TASK_BYTES", "connect", "count_words_on_cluster", "pack_table", "sum_tables", "unpack_table"]

# Large enough that scheduling (~1 ms a task) is noise next to counting (~1 s at ~60 MB/s a core),
# small enough that a retried task costs little and memory stays low.
DEFAULT_TASK_BYTES = 64 << 20


def _import_distributed():
    try:
        import distributed
    except ImportError:
        raise BPEInputError(
            'counting on a cluster needs Dask: pip install "dask[distributed]" (or the cluster extra: '
            'pip install -e ".[cluster]")'
        ) from None
    return distributed


@contextmanager
def connect(spec: str) -> Iterator[Client]:
    """A client for `spec`: `local` (a LocalCluster, one single-threaded worker process per core),
    `local:N` (N workers), or a scheduler address such as `tcp://host:8786`."""
    distributed = _import_distributed()
    if spec == "local" or spec.startswith("local:"):
        count_text = spec.partition(":")[2]
        if count_text and not (count_text.isdigit() and int(count_text) > 0):
            raise BPEInputError(f"--cluster {spec}: the number of local workers must be a positive integer")
        workers = int(count_text) if count_text else usable_cores()
        cluster = distributed.LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0"
        )
        try:
            with distributed.Client(cluster) as client:
                yield client
        finally:
            cluster.close()
    elif "://" in spec:
        with distributed.Client(spec) as client:
            yield client
    else:
        raise BPEInputError(f"--cluster {spec!r}: use local, local:N or a scheduler address like tcp://host:8786")


def pack_table(table: CountTable) -> CountTable | bytes:
    """A count table for the trip between processes. A native table pickles itself as three flat
    arrays; a dict becomes one pickled blob (Dask would serialize it entry by entry, seconds for
    200,000 words)."""
    if isinstance(table, dict):
        return pickle.dumps(table, protocol=pickle.HIGHEST_PROTOCOL)
    return table


def unpack_table(packed: CountTable | bytes) -> CountTable:
    return pickle.loads(packed) if isinstance(packed, bytes) else packed


def count_sliced(count: Callable[..., CountTable], num_slices: int, *args: object) -> tuple:
    """One counting task on a worker: `count(*args)` cut into `num_slices` slices by word (see
    `word_counts.split_table`), each packed."""
    return tuple(pack_table(table) for table in split_table(count(*args), num_slices))


def sum_tables(*packed_tables: CountTable | bytes) -> CountTable | bytes:
    """The sum of packed count tables, packed (a new object: the inputs are never changed)."""
    return pack_table(add_tables([unpack_table(packed) for packed in packed_tables]))


def count_words_on_cluster(
    client: Client,
    paths: Iterable[str | os.PathLike],
    special_tokens: Iterable[str] | None = None,
    *,
    task_bytes: int = DEFAULT_TASK_BYTES,
    progress: bool = False,
    retries: int = 3,
    fan_in: int = 8,
    slices: int | None = None,
    storage_options: Mapping[str, object] | None = None,
    count: Callable[..., CountTable] = count_task,
) -> WordCounts:
    """Count the inputs, read as if concatenated, on the cluster behind `client`; equal to
    `word_counts.count_words(paths, special_tokens)`. `retries` is how often Dask may re-run a
    failed task; `count` is the task function (`word_counts.count_task`'s signature). The words are
    added up in `slices` independent trees of `fan_in` tables per addition (None: one per worker)."""
    specials = check_special_tokens(special_tokens)
    if fan_in < 2:
        raise BPEInputError(f"fan_in must be at least 2, got {fan_in}")
    if slices is not None and slices < 1:
        raise BPEInputError(f"slices must be positive, got {slices}")
    paths = [os.fspath(path) for path in paths]
    tasks: list[CountTask] = plan_count_tasks(paths, specials, task_bytes=task_bytes, storage_options=storage_options)
    total_bytes = sum(map(task_size, tasks))
    if not tasks:
        return WordCounts({}, specials, GPT2_SPLIT_PATTERN, 0)
    distributed = _import_distributed()

    options = dict(storage_options) if storage_options else None
    if slices is None:
        slices = max(1, len(client.scheduler_info().get("workers", {})))
    counted = [
        client.submit(count_sliced, count, slices, task, specials, 1, options, pure=True, retries=retries)
        for task in tasks
    ]
    # Each slice of the words is added up in its own tree, submitted up front: additions start as
    # soon as their inputs exist, and the tops of the trees run on different workers.
    reduction: list[Future] = []
    tops = []
    for index in range(slices):
        level = [client.submit(operator.getitem, future, index, pure=True) for future in counted]
        reduction += level
        while len(level) > 1:
            level = [
                client.submit(sum_tables, *level[start : start + fan_in], pure=True, retries=retries)
                for start in range(0, len(level), fan_in)
            ]
            reduction += level
        tops.append(level[0])
    sizes = {future.key: task_size(task) for future, task in zip(counted, tasks)}
    try:
        with tqdm(total=total_bytes, desc="count", unit="B", unit_scale=True, disable=not progress) as bar:
            for future in distributed.as_completed(counted):
                if future.status == "error":
                    future.result()  # raises the task's error, after its retries
                bar.update(sizes[future.key])
        table = concatenate_slices([unpack_table(packed) for packed in client.gather(tops)])
    except BaseException:
        # Stop what is still queued; finished futures are simply dropped (cancelling those upsets
        # the scheduler).
        client.cancel([future for future in [*counted, *reduction] if not future.done()])
        raise
    return WordCounts(table, specials, GPT2_SPLIT_PATTERN, total_bytes)
