"""Count words on a Dask cluster, train on the client.

    from .cluster import connect, count_words_on_cluster
    with connect("local:2") as client:                 # or "tcp://scheduler:8786", or your own Client
        counts = count_words_on_cluster(client, ["s3://bucket/part-00.txt", ...], ["<|endoftext|>"])
    vocab, merges = train_bpe_from_counts(counts, 32_000)

The inputs, read as if concatenated, are cut into ranges by `counting.plan_count_tasks`
(stretches that begin and end at special tokens or at whitespace that splits no pre-token, as v7
cuts its chunks; file boundaries need no cut, and small files share a range), and consecutive ranges
are grouped into tasks of about equal bytes: by default one task per worker (at most
`MAX_TASK_BYTES`), so each worker builds one count table, as each of v7's threads does. A task runs
the native counter (one thread) over its ranges one after another into that one table
(`counting.count_tasks`): a local range memory-mapped with its pages released as they are
counted, a URL's range read (fsspec), so a worker holds one range's bytes plus the table, whatever
the input size. The table comes out unsorted, cut into slices by the counter's hash of the word (one
per worker); the slices are added up on the workers, one tree per slice (`fan_in` tables per
addition), so the tops of the trees run in parallel and their sums share no word: the client only
concatenates them. Tables stay in C++ throughout (they travel between processes as three flat
arrays: words, lengths, counts), and the client keeps the result in C++ for bpe_v7 or a count
file. Progress: each task summaries the bytes it has counted after every range (Dask events), and
the client shows their sum.
Tasks are pure functions of their (small) arguments and never change their inputs, so when Dask
re-runs a task after an error or a lost worker, nothing is lost or counted twice: a result either
arrives once or the task runs again.

Works with any `distributed.Client`: a `LocalCluster`, a running scheduler, `dask-jobqueue`
(SLURM, PBS, ...), Kubernetes. Inputs must be readable from every worker: a shared file system or
fsspec URLs. Needs the `cluster` extra: pip install -e ".[cluster]".
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import signal
import sys
import threading
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..native.backend import usable_cores
from ..phases import Advance
from ..progress import progress_bar
from ..rules.contract import MAX_WORKERS_PER_CORE, BPEInputError, check_special_tokens
from ..rules.pattern import Pattern, resolve_pattern
from ..rules.presets import resolve_unicode
from .counting import source_items
from .document_batches import _feed
from .plan import InputPlan, as_plan
from .sources import BadRecords, InputFile
from .stream_counter import DOCUMENT_SEPARATOR, _StreamCounter
from .table import row_of
from .text_ranges import CountTask, count_tasks, group_into_batches, input_bytes, plan_count_tasks, task_size
from .word_counts import (
    CountTable,
    TableArrays,
    WordCounts,
    _native_module,
    add_tables,
    concatenate_slices,
    split_table,
)

if TYPE_CHECKING:
    from distributed import Client, Future

__all__ = [
    "ClusterTaskError",
    "ClusterUnavailableError",
    "MAX_TASK_BYTES",
    "RANGE_BYTES",
    "connect",
    "count_words_on_cluster",
    "pack_table",
    "sum_tables",
    "unpack_table",
]

# The largest task by default: what a retried task counts again. Below it, a task is a worker's
# share of the input: one table per worker, nothing built twice (docs/PERFORMANCE.md).
MAX_TASK_BYTES = 4 << 30
# The largest range a task counts at once: the memory of a range read from a URL, the steps of the
# progress bar and of the balance between tasks.
RANGE_BYTES = 64 << 20


class ClusterTaskError(RuntimeError):
    """A task failed on the cluster after its retries; the message says which error, in one line."""


def _task_error(error: BaseException, retries: int) -> ClusterTaskError:
    return ClusterTaskError(f"a task failed on the cluster (after {retries} retries): {_one_line(error)}")


@dataclass(frozen=True)
class _Refused:
    """A task's bad input (BPEInputError), returned instead of raised: Dask retries whatever a task
    raises, and bad input stays bad. The additions pass it on; the client raises it as the
    BPEInputError it was, so the run ends as it does locally (exit status 2, the same message)."""

    message: str


def _raise_refused(*items: object) -> None:
    for item in items:
        if isinstance(item, _Refused):
            raise BPEInputError(item.message)


def _item(result: tuple | _Refused, index: int) -> object:
    """`result[index]` on a worker; a refusal stands for each of its items."""
    return result if isinstance(result, _Refused) else result[index]


def _import_distributed():
    try:
        import distributed
    except ImportError:
        raise BPEInputError(
            'counting on a cluster needs Dask: pip install "dask[distributed]" (or the cluster extra: '
            'pip install -e ".[cluster]")'
        ) from None
    return distributed


class ClusterUnavailableError(ClusterTaskError):
    """The cluster could not be started or reached: the run failed (exit status 1), in one line."""


# Seconds to reach a scheduler before giving up (`--cluster-timeout`): Dask's own default, stated.
DEFAULT_CONNECT_TIMEOUT = 30.0
# Schemes of the addresses distributed.Client connects to.
_SCHEDULER_SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")


def local_worker_count(spec: str) -> int:
    """The workers of `local` / `local:N`, capped as --workers is (more processes only cost memory,
    and a hundred thousand would exhaust the machine before counting starts), with a note then."""
    count_text = spec.partition(":")[2]
    if spec != "local" and not (count_text.isdigit() and int(count_text) > 0):
        raise BPEInputError(f"--cluster {spec}: the number of local workers must be a positive integer")
    cores = usable_cores()
    if not count_text:
        return cores
    requested = int(count_text)
    limit = MAX_WORKERS_PER_CORE * cores
    if requested > limit:
        note = f"note: --cluster {spec} capped at local:{limit} ({MAX_WORKERS_PER_CORE} worker processes per core)"
        print(note, file=sys.stderr)
        return limit
    return requested


def check_scheduler_address(spec: str) -> str:
    """`spec` if it reads as a scheduler address (scheme://host[:port]); refused at once otherwise,
    rather than after a connection timeout."""
    parts = urlsplit(spec)
    try:
        port_ok = parts.port is None or parts.port > 0
    except ValueError:  # not a number, or out of range
        port_ok = False
    valid = (
        parts.scheme in _SCHEDULER_SCHEMES
        and bool(parts.hostname)
        and port_ok
        and not (parts.path.strip("/") or parts.query or parts.fragment or parts.username)
        and not any(char.isspace() for char in spec)
    )
    if not valid:
        raise BPEInputError(
            f"--cluster {spec!r} is not a scheduler address: use local, local:N or e.g. tcp://host:8786"
        )
    return spec


def _check_timeout(timeout: object) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
        raise BPEInputError(f"--cluster-timeout must be a positive number of seconds, got {timeout!r}")
    return float(timeout)


def _one_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0]}"


@contextmanager
def _quiet_when_stopped(*, restore: bool) -> Iterator[None]:
    """When the block is left by an exception (Ctrl-C, a failed start), Dask's loggers say nothing
    more until the block with `restore` ends: the shutdown's INFO lines would follow the run's own
    one-line message ("interrupted")."""
    logger = logging.getLogger("distributed")
    level = logger.level
    try:
        yield
    except BaseException:
        logger.setLevel(logging.CRITICAL + 1)
        raise
    finally:
        if restore:
            logger.setLevel(level)


# Run in each local worker process as it starts (a Dask preload, given as its text so that it imports
# nothing of this package there): Ctrl-C reaches every process of the terminal's group, and each
# worker would end with a traceback of its own; the run's process stops them instead.
_WORKER_IGNORES_SIGINT = "import signal\n\ndef dask_setup(worker):\n    signal.signal(signal.SIGINT, signal.SIG_IGN)\n"


def _kill_workers(cluster: Any) -> None:
    """End the local cluster's worker processes at once (SIGKILL): a run that stops has no use for
    their work, and Dask's own close waits seconds for a busy one. Each nanny is told first, so that
    it does not start a new worker in place of the one killed. Nannies still starting count too."""
    nannies = [*getattr(cluster, "workers", {}).values(), *getattr(cluster, "_created", ())]
    for nanny in {id(nanny): nanny for nanny in nannies}.values():
        with contextlib.suppress(Exception):
            nanny.close_gracefully(reason="the run stopped")
            process = nanny.process.process
            if process.is_alive():
                os.kill(process.pid, signal.SIGKILL)


def _quiet_asyncio() -> None:
    """Silence asyncio's log for the rest of the process: a cluster stopped while it starts leaves
    Dask tasks whose failure nobody awaits, and asyncio reports each when it is collected ("Task
    exception was never retrieved", a traceback) after the run has said why it ended."""
    logging.getLogger("asyncio").setLevel(logging.CRITICAL + 1)


# What a spawned process runs first, put before multiprocessing's own program (see _SigintIgnoredAtSpawn).
_SPAWN_PROGRAM = "from multiprocessing.spawn import "
_IGNORE_SIGINT_FIRST = "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); "
# Dask's warning when making a process's scratch directory takes over 1 s, which blames a network file
# system: on a busy machine a local cluster in the temporary directory meets it too, a line the run
# would print among its own. Ignored in the run's process and, from their first statement, in its workers.
_SLOW_SCRATCH = "Creating scratch directories is taking a surprisingly long time"
_IGNORE_SLOW_SCRATCH_FIRST = (
    f"import warnings; warnings.filterwarnings('ignore', message={_SLOW_SCRATCH!r}, category=UserWarning); "
)
# multiprocessing's resource tracker, which unlinks what a process left behind, warns as it does so: the
# workers are killed on a stop, and a Ctrl-C inside a semaphore's finalizer (unlinked, not yet unregistered)
# made it print two warnings after 'interrupted' (1 of the CI's runs of the start-up signal test). The
# tracker still cleans up; only its report of having done so is silenced, from its first statement.
_TRACKER_PROGRAM = "from multiprocessing.resource_tracker import "
_QUIET_TRACKER_FIRST = (
    "import warnings; warnings.filterwarnings('ignore', message='resource_tracker: ', category=UserWarning); "
)


class _SigintIgnoredAtSpawn:
    """While active, each worker process multiprocessing spawns ignores SIGINT from its first statement, as
    the local workers must: Ctrl-C reaches every process of the terminal's group, and a worker still
    starting (importing Dask, a second or more before its preload runs) would end with a traceback of
    its own. The statement is put before the child's `-c` program; this process's own handling of
    SIGINT is untouched, so no Ctrl-C is lost. Python's start-up before it (tens of milliseconds) is
    the one moment left where a worker can still print one. The resource tracker spawned with them
    starts with its cleanup reports silenced."""

    def __init__(self) -> None:
        import multiprocessing.util

        self._util = multiprocessing.util
        self._real = multiprocessing.util.spawnv_passfds

    def _spawn(self, path: Any, args: Any, passfds: Any) -> int:
        args = list(args)
        for index, arg in enumerate(args[:-1]):
            program = str(args[index + 1]) if arg == "-c" else ""
            if program.startswith(_SPAWN_PROGRAM):
                args[index + 1] = _IGNORE_SIGINT_FIRST + _IGNORE_SLOW_SCRATCH_FIRST + program
                break
            if program.startswith(_TRACKER_PROGRAM):
                args[index + 1] = _QUIET_TRACKER_FIRST + program
                break
        return self._real(path, args, passfds)

    def __enter__(self) -> _SigintIgnoredAtSpawn:
        self._util.spawnv_passfds = self._spawn
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._util.spawnv_passfds = self._real


def _close_local_cluster(cluster: Any) -> None:
    """Close the cluster; a signal while it closes ends the workers at once and leaves it to no one:
    Dask's exit handler would close it again, waiting up to 10 s for the workers."""
    try:
        with contextlib.suppress(Exception):  # a cluster interrupted mid-run may refuse to close cleanly
            cluster.close()
    except BaseException:
        _kill_workers(cluster)
        cluster.shutdown_on_close = False
        _quiet_asyncio()
        raise


@contextmanager
def _workers_killed_if_stopped(cluster: Any) -> Iterator[None]:
    try:
        yield
    except BaseException:
        _kill_workers(cluster)
        raise


@contextmanager
def _local_cluster(distributed, workers: int) -> Iterator[object]:
    """A LocalCluster that, stopped while it starts (Ctrl-C, a worker killed), leaves nothing for
    Dask's exit handler: that handler closes every cluster it knows, and a half-started one fails
    there with a traceback (`AssertionError: Status.init`) after the run has already said why it ended."""
    from distributed.deploy.spec import SpecCluster

    known = {id(cluster) for cluster in list(SpecCluster._instances)}
    warnings.filterwarnings("ignore", message=_SLOW_SCRATCH, category=UserWarning)
    try:
        # The workers' own logs stay quiet: a failed task reaches the client as one ClusterTaskError.
        with _SigintIgnoredAtSpawn():
            cluster = distributed.LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=":0",
                silence_logs=logging.CRITICAL,
                preload=[_WORKER_IGNORES_SIGINT],
            )
    except BaseException as error:
        logging.getLogger("distributed").setLevel(logging.CRITICAL + 1)  # connect restores it
        _quiet_asyncio()
        # By identity: a half-built cluster cannot even compare itself with another (it has no name yet).
        for half_started in [cluster for cluster in list(SpecCluster._instances) if id(cluster) not in known]:
            half_started.shutdown_on_close = False  # Dask's exit handler skips it then
            _kill_workers(half_started)  # their processes, spawned or starting, need no graceful end
            with contextlib.suppress(Exception):
                half_started.close(timeout=5)
        if isinstance(error, Exception):
            raise ClusterUnavailableError(f"the local Dask cluster could not start: {_one_line(error)}") from None
        raise
    try:
        yield cluster
    finally:
        # The run's own message stands, whatever the close meets.
        _close_local_cluster(cluster)


@contextmanager
def connect(spec: str, *, timeout: float | None = None) -> Iterator[Client]:
    """A client for `spec`: `local` (a LocalCluster, one single-threaded worker process per core),
    `local:N` (N workers, at most MAX_WORKERS_PER_CORE per core), or a scheduler address such as
    `tcp://host:8786`, reached within `timeout` seconds (default DEFAULT_CONNECT_TIMEOUT).
    A cluster that cannot start, or a scheduler not reached in time, raises ClusterUnavailableError."""
    if not isinstance(spec, str) or not spec.strip():
        raise BPEInputError("--cluster needs a value: local, local:N or a scheduler address like tcp://host:8786")
    seconds = _check_timeout(DEFAULT_CONNECT_TIMEOUT if timeout is None else timeout)
    if spec == "local" or spec.startswith("local:"):
        workers = local_worker_count(spec)
        distributed = _import_distributed()
        with _quiet_when_stopped(restore=True), _local_cluster(distributed, workers) as cluster:
            with distributed.Client(cluster, timeout=seconds) as client, _quiet_when_stopped(restore=False):
                with _workers_killed_if_stopped(cluster):
                    yield client
    elif "://" in spec:
        check_scheduler_address(spec)
        distributed = _import_distributed()
        try:
            client = distributed.Client(spec, timeout=seconds)
        except (OSError, TimeoutError) as error:
            raise ClusterUnavailableError(
                f"cannot reach the Dask scheduler at {spec} within {seconds:g} s ({_one_line(error)}); "
                "is it running? (--cluster-timeout sets the wait)"
            ) from None
        with client:
            yield client
    else:
        raise BPEInputError(f"--cluster {spec!r}: use local, local:N or a scheduler address like tcp://host:8786")


def pack_table(table: CountTable) -> TableArrays | bytes:
    """A count table as plain data for the trip between processes, made inside the task: a native
    table as its three flat arrays (`TableArrays`, sent out of band), a dict as one pickled blob (Dask
    would serialize it entry by entry, seconds for 200,000 words). A table that cannot be packed
    fails its task, which Dask summaries; failing in Dask's own transfer instead, it is retried
    forever."""
    if isinstance(table, dict):
        return pickle.dumps(table, protocol=pickle.HIGHEST_PROTOCOL)
    return TableArrays(*table.to_arrays())


def unpack_table(packed: TableArrays | bytes) -> CountTable:
    if isinstance(packed, bytes):
        return pickle.loads(packed)
    return _native_module().word_counts_from_arrays(*packed.arrays)


def count_sliced(
    count: Callable[..., CountTable],
    num_slices: int,
    tasks: tuple[CountTask, ...],
    special_tokens: list[str],
    storage_options: Mapping[str, object] | None,
    progress_topic: str | None,
    batch: int,
    pattern: Pattern | None = None,
) -> tuple:
    """One counting task on a worker: `count(tasks, ...)` (one table for all of them, see
    `counting.count_tasks`) in `num_slices` slices by word (see `word_counts.split_table`), each
    packed. With a `progress_topic`, the bytes counted so far go to the client as events
    `(batch, bytes)` (a retried task starts again from 0; the client keeps each batch's largest).
    `pattern`: the pre-tokenizer with its Unicode version, passed on to `count` (None: none passed)."""
    advance = None
    if progress_topic is not None:
        worker = _import_distributed().get_worker()
        done = 0

        def advance(size: int) -> None:
            nonlocal done
            done += size
            worker.log_event(progress_topic, (batch, done))

    rules = {} if pattern is None else {"pattern": pattern}
    try:
        slices = count(tasks, special_tokens, 1, storage_options, progress=advance, num_slices=num_slices, **rules)
    except BPEInputError as error:
        return _Refused(str(error))
    return tuple(pack_table(table) for table in slices)


def sum_tables(*packed_tables: TableArrays | bytes | _Refused) -> TableArrays | bytes | _Refused:
    """The sum of packed count tables, packed (a new object: the inputs are never changed); a
    task's refusal (`_Refused`) among them is passed on instead."""
    refused = next((packed for packed in packed_tables if isinstance(packed, _Refused)), None)
    if refused is not None:
        return refused
    return pack_table(add_tables([unpack_table(packed) for packed in packed_tables]))


def _task_count(total_bytes: int, num_workers: int, task_bytes: int | None) -> int:
    """How many counting tasks: `total_bytes / task_bytes`, or by default one per worker while a
    worker's share fits in MAX_TASK_BYTES (else that many per worker again)."""
    if task_bytes is not None:
        return max(1, -(-total_bytes // task_bytes))
    per_worker = max(1, -(-total_bytes // (num_workers * MAX_TASK_BYTES)))
    return num_workers * per_worker


def _check_sizes(fan_in: int, slices: int | None, task_bytes: int | None, range_bytes: int | None) -> None:
    """`count_words_on_cluster`'s sizes checked before anything is planned or sent."""
    if fan_in < 2:
        raise BPEInputError(f"fan_in must be at least 2, got {fan_in}")
    if slices is not None and slices < 1:
        raise BPEInputError(f"slices must be positive, got {slices}")
    for name, value in (("task_bytes", task_bytes), ("range_bytes", range_bytes)):
        if value is not None and value < 1:
            raise BPEInputError(f"{name} must be positive, got {value}")


def count_words_on_cluster(
    client: Client,
    paths: Iterable[str | os.PathLike] | InputPlan,
    special_tokens: Iterable[str] | None = None,
    *,
    task_bytes: int | None = None,
    range_bytes: int | None = None,
    progress: bool = False,
    retries: int = 3,
    fan_in: int = 8,
    slices: int | None = None,
    storage_options: Mapping[str, object] | None = None,
    count: Callable[..., CountTable] = count_tasks,
    format: str | None = None,
    text_field: str = "text",
    skip_bad_records: bool = False,
    pattern: str | Pattern | None = None,
    unicode: str | None = None,
) -> WordCounts:
    """Count the inputs, read as if concatenated, on the cluster behind `client`; equal to
    `counting.count_words(paths, special_tokens, pattern=pattern, unicode=unicode)`. A `pattern` the
    native scanner does not run (`pattern.py`) is counted with `regex` on the workers, one thread each.
    The Unicode version is resolved here (the client's installed `regex`'s by default) and sent, so
    workers with another `regex` still count by it.

    The inputs are cut into ranges of about `range_bytes` (None: a 32nd of a task, at most
    RANGE_BYTES) and the ranges grouped into tasks of about `task_bytes` (None: one task per
    worker, see `_task_count`; the workers connected when it starts: on a cluster still scaling up,
    call `client.wait_for_workers(n)` first); a task counts its ranges one after another into one
    table.
    `retries` is how often Dask may re-run a failed task; `count` is the task function
    (`text_ranges.count_tasks`'s signature). The words are added up in `slices` independent trees
    of `fan_in` tables per addition (None: one per worker).

    Compressed, JSON-lines and Parquet inputs, local or URLs (`format`, `text_field`, `skip_bad_records` as in
    `count_words`) are counted by `_count_streamed_on_cluster`: Parquet row groups and byte ranges of
    JSON lines (cut at newlines) are tasks; a compressed file is one task (a compressed stream cannot
    be split). `paths` may be a plan of inputs already inspected (`ingest.plan.plan_inputs`), which
    then brings its own `format`, `text_field`, `skip_bad_records` and `storage_options`."""
    _check_sizes(fan_in, slices, task_bytes, range_bytes)
    return count_plan_on_cluster(
        client,
        as_plan(paths, format, text_field, storage_options=storage_options, skip_bad_records=skip_bad_records),
        special_tokens,
        task_bytes=task_bytes,
        range_bytes=range_bytes,
        progress=progress,
        retries=retries,
        fan_in=fan_in,
        slices=slices,
        count=count,
        pattern=resolve_unicode(resolve_pattern(pattern), unicode),
    )


def count_plan_on_cluster(
    client: Client,
    plan: InputPlan,
    special_tokens: Iterable[str] | None = None,
    *,
    task_bytes: int | None = None,
    range_bytes: int | None = None,
    progress: bool = False,
    retries: int = 3,
    fan_in: int = 8,
    slices: int | None = None,
    count: Callable[..., CountTable] = count_tasks,
    pattern: str | Pattern | None = None,
) -> WordCounts:
    """`count_words_on_cluster` of inputs already inspected into a plan (`plan.plan_inputs`), which
    brings its own `format`, `text_field`, `skip_bad_records` and `storage_options`."""
    specials = check_special_tokens(special_tokens)
    pattern = resolve_pattern(pattern)
    _check_sizes(fan_in, slices, task_bytes, range_bytes)
    storage_options = plan.storage_options
    if not plan.in_place:
        return _count_streamed_on_cluster(
            client, plan, specials, range_bytes, progress, retries, fan_in, slices, pattern
        )
    paths = list(plan.paths)
    total_bytes = input_bytes(paths, storage_options)
    if total_bytes == 0:
        return WordCounts({}, specials, pattern.regex, 0, pattern.unicode)
    distributed = _import_distributed()
    num_workers = max(1, len(client.scheduler_info().get("workers", {})))
    num_tasks = _task_count(total_bytes, num_workers, task_bytes)
    if range_bytes is None:
        range_bytes = max(1, min(RANGE_BYTES, total_bytes // (32 * num_tasks)))
    ranges = plan_count_tasks(paths, specials, task_bytes=range_bytes, storage_options=storage_options, pattern=pattern)
    batches = group_into_batches(ranges, num_tasks)

    options = dict(storage_options) if storage_options else None
    if slices is None:
        slices = num_workers
    topic = f"cs336-count-progress-{uuid.uuid4().hex}" if progress else None
    # The pattern goes with its Unicode version, so that every worker counts by the client's.
    counted = [
        client.submit(
            count_sliced, count, slices, batch, specials, options, topic, index, pattern, pure=True, retries=retries
        )
        for index, batch in enumerate(batches)
    ]
    sizes = [sum(map(task_size, batch)) for batch in batches]
    table = _add_up_slices(client, distributed, counted, slices, sizes, fan_in, retries, topic)
    return WordCounts(table, specials, pattern.regex, total_bytes, pattern.unicode)


def _add_up_slices(
    client: Client,
    distributed: Any,
    counted: list[Future],
    slices: int,
    sizes: list[int],
    fan_in: int,
    retries: int,
    topic: str | None,
) -> CountTable:
    """The sum of the counting tasks' sliced tables (`counted`, each a tuple whose first `slices`
    items are the packed slices), added up on the workers and concatenated here; the progress bar
    (shown with a `topic`) follows the tasks' events and their `sizes`."""
    progress = topic is not None
    total_bytes = sum(sizes)
    # Each slice of the words is added up in its own tree, submitted up front: additions start as
    # soon as their inputs exist, and the tops of the trees run on different workers.
    reduction: list[Future] = []
    tops = []
    for index in range(slices):
        level = [client.submit(_item, future, index, pure=True) for future in counted]
        reduction += level
        while len(level) > 1:
            level = [
                client.submit(sum_tables, *level[start : start + fan_in], pure=True, retries=retries)
                for start in range(0, len(level), fan_in)
            ]
            reduction += level
        tops.append(level[0])
    batch_of = {future.key: index for index, future in enumerate(counted)}
    try:
        with progress_bar(progress, total_bytes, "count", "B", unit_scale=True) as advance:
            shown = _BatchProgress(advance, sizes)
            if topic is not None:
                client.subscribe_topic(topic, shown.event)
            try:
                for future in distributed.as_completed(counted):
                    if future.status == "error":
                        raise _task_error(future.exception(), retries)
                    if future.type is _Refused:  # known without fetching the result: stop at once
                        _raise_refused(future.result())
                    shown.finished(batch_of[future.key])
            finally:
                if topic is not None:
                    client.unsubscribe_topic(topic)
        try:
            sums = client.gather(tops)
        except Exception as error:  # an addition failed; what it raised comes from the worker
            raise _task_error(error, retries) from error
        _raise_refused(*sums)
        table = concatenate_slices([unpack_table(top) if isinstance(top, bytes) else top for top in sums])
    except BaseException:
        # Stop what is still queued; finished futures are simply dropped (cancelling those upsets
        # the scheduler).
        client.cancel([future for future in [*counted, *reduction] if not future.done()])
        raise
    return table


# ---------------------------------------------------------------------------------------------
# Compressed files, JSON lines and Parquet on the cluster


@dataclass(frozen=True)
class StreamPart:
    """One counting task of streamed inputs: `sources` (a run of consecutive text files, read as
    concatenated, some compressed) or one file of documents, whole or a `part` of it (a byte range of
    uncompressed JSON lines, or Parquet row group numbers). `size`: its bytes on disk, for progress."""

    sources: tuple[InputFile, ...]
    part: tuple[int, ...] | None
    size: int


def documents_split_cleanly(tokens: list[str]) -> bool:
    """Whether no special token can occur across the start of a separator (the first token) in any
    text: then the stream of documents may be cut before any separator, and the parts counted apart
    add up to the whole. True unless the separator overlaps itself (`aba`) or another token overlaps
    the separator's start (a token's end is a start of the separator, or the other way round)."""
    if not tokens:
        return True
    separator = tokens[0]
    for token in tokens:
        for start in range(1, len(token)):
            tail = token[start:]
            if separator.startswith(tail) or tail.startswith(separator):
                return False
    return True


def _plan_stream_parts(sources: tuple[InputFile, ...], range_bytes: int, single: bool) -> list[StreamPart]:
    """The tasks, in stream order: consecutive text files together (their seams are not known to be
    safe cuts), each file of documents as its format cuts it (`InputFormat.parts`: uncompressed JSON
    lines by `range_bytes` ranges, Parquet by row groups of about `range_bytes`), else whole.
    `single`: one task for everything."""
    if single:
        return [StreamPart(tuple(sources), None, sum(source.size() for source in sources))]
    parts: list[StreamPart] = []
    run: list[InputFile] = []

    def end_run() -> None:
        if run:
            parts.append(StreamPart(tuple(run), None, sum(source.size() for source in run)))
            run.clear()

    for source in sources:
        if not row_of(source).holds_documents:
            run.append(source)
            continue
        end_run()
        cut = row_of(source).parts
        pieces = cut(source, range_bytes) if cut is not None else None
        if pieces is None:
            parts.append(StreamPart((source,), None, source.size()))
        else:
            parts += [StreamPart((source,), part, size) for part, size in pieces]
    end_run()
    return parts


def count_stream_part(
    num_slices: int,
    part: StreamPart,
    special_tokens: list[str],
    documents: bool,
    text_field: str,
    skip_bad_records: bool,
    progress_topic: str | None,
    batch: int,
    pattern: Pattern | None = None,
) -> tuple:
    """One task of `_count_streamed_on_cluster` on a worker: its part of the stream counted by a
    `_StreamCounter` (on one thread, by `pattern`) that starts after a separator unless it is the first, in
    `num_slices` packed slices, then `(documents fed, text bytes fed, bad records, first bad record,
    its own source bytes)`, its summary, for the client to reckon the separators and the totals."""
    counter = _StreamCounter(
        special_tokens, 1, documents=documents, started=batch > 0, after_document=batch > 0, pattern=pattern
    )
    skipped = BadRecords() if skip_bad_records else None
    try:
        for source in part.sources:
            counter.label = source.path
            for item in source_items(counter, source, text_field, skipped, part.part):
                _feed(counter, item)
        table = counter.take()
    except BPEInputError as error:
        return _Refused(str(error))
    if progress_topic is not None:
        _import_distributed().get_worker().log_event(progress_topic, (batch, part.size))
    slices = split_table(table, num_slices)
    summary = (
        counter.documents_fed,
        counter.text_fed,
        skipped.count if skipped else 0,
        skipped.first if skipped else None,
        counter.source_bytes,
    )
    return (*(pack_table(piece) for piece in slices), summary)


def _stream_source_bytes(parts: list[StreamPart], summaries: list[tuple], separator_bytes: int) -> int:
    """The bytes of the equivalent text file: what the tasks fed, plus a separator wherever the whole
    stream, counted on one machine, puts one (`_StreamCounter`'s rule, replayed over the tasks)."""
    total = 0
    started = after_document = False
    for part, (documents_fed, text_fed, *_) in zip(parts, summaries):
        total += text_fed
        if not row_of(part.sources[0]).holds_documents:  # a run of text files
            if text_fed:
                total += separator_bytes if after_document else 0
                started, after_document = True, False
        elif documents_fed:
            total += separator_bytes * (documents_fed if started else documents_fed - 1)
            started = after_document = True
    return total


def _count_streamed_on_cluster(
    client: Client,
    plan: InputPlan,
    specials: list[str],
    range_bytes: int | None,
    progress: bool,
    retries: int,
    fan_in: int,
    slices: int | None,
    pattern: Pattern,
) -> WordCounts:
    """Local streamed inputs counted on the cluster, equal to `counting.count_words` of them."""
    distributed = _import_distributed()
    sources, documents, skip_bad_records = plan.files, plan.documents, plan.skip_bad_records
    tokens = [DOCUMENT_SEPARATOR] if documents and not specials else specials
    # Parts may be counted apart only at separators no special token can cross; mixed inputs of text and
    # documents with such tokens, or pathological special tokens, are counted as one task.
    single = not documents_split_cleanly(tokens)
    num_workers = max(1, len(client.scheduler_info().get("workers", {})))
    total = sum(source.size() for source in sources)
    if range_bytes is None:
        range_bytes = max(1 << 20, min(RANGE_BYTES, total // (4 * num_workers) + 1))
    parts = _plan_stream_parts(sources, range_bytes, single)
    if not parts:  # Parquet files without row groups
        return WordCounts({}, specials, pattern.regex, 0, pattern.unicode)
    if slices is None:
        slices = num_workers
    topic = f"cs336-count-progress-{uuid.uuid4().hex}" if progress else None
    counted = [
        client.submit(
            count_stream_part,
            slices,
            part,
            specials,
            documents,
            plan.text_field,
            skip_bad_records,
            topic,
            index,
            pattern,
            pure=True,
            retries=retries,
        )
        for index, part in enumerate(parts)
    ]
    summary_futures = [client.submit(_item, future, slices, pure=True) for future in counted]
    table = _add_up_slices(client, distributed, counted, slices, [part.size for part in parts], fan_in, retries, topic)
    try:
        summaries = client.gather(summary_futures)
    except Exception as error:
        raise _task_error(error, retries) from error
    _raise_refused(*summaries)
    private = documents and not specials
    separator_bytes = 0 if private else len(tokens[0].encode("utf-8")) if tokens else 0
    if single:  # one task, which reckoned the separators itself
        source_bytes = summaries[0][4]
    else:
        source_bytes = _stream_source_bytes(parts, summaries, separator_bytes)
    counts = WordCounts(table, specials, pattern.regex, source_bytes, pattern.unicode)
    if skip_bad_records:
        skipped = BadRecords()
        for _, _, count, first, _ in summaries:
            if count:
                skipped.count += count
                skipped.first = skipped.first or first
        counts.skipped_records = skipped.count
        note = skipped.note()
        if note is not None:
            print(note, file=sys.stderr)
    return counts


class _BatchProgress:
    """The client's progress bar: each task's largest reported bytes (events from the workers, and
    its whole size once it is done), so a retried task is never shown twice."""

    def __init__(self, advance: Advance, sizes: list[int]) -> None:
        self.advance = advance
        self.sizes = sizes
        self.done = [0] * len(sizes)
        self.lock = threading.Lock()

    def _show(self, batch: int, done: int) -> None:
        with self.lock:
            if done > self.done[batch]:
                self.advance(done - self.done[batch])
                self.done[batch] = done

    def event(self, event: tuple[float, tuple[int, int]]) -> None:
        batch, done = event[1]
        self._show(batch, min(done, self.sizes[batch]))

    def finished(self, batch: int) -> None:
        self._show(batch, self.sizes[batch])
