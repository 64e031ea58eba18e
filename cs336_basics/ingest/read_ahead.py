"""Reading and counting overlapped: a source read ahead on a second thread while the counter works
(`Prefetched`), or items counted on a second thread while the caller produces them
(`CountedBehind`). An error on either thread reaches the caller; no thread outlives the block."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from .document_batches import _feed

if TYPE_CHECKING:
    from .stream_counter import _StreamCounter

# Decompressed blocks (or batches of documents) read ahead of the counter: one being counted, this
# many waiting. Memory: about (PREFETCH_DEPTH + 2) blocks.
PREFETCH_DEPTH = 2
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
