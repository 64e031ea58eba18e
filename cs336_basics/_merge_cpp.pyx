# cython: language_level=3, annotation_typing=False
"""bpe_v6's merge loop: the binding to cpp/bpe_merge.cpp.

It only converts types: word counts into one flat `WordCounts`, then `train_merges` runs without the
GIL, and the merges come back as bytes. The algorithm and its performance notes live in the C++.
"""

from collections.abc import Callable, Mapping
from operator import index as as_integer

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.ref cimport PyObject
from libc.stdint cimport int64_t
from libcpp.vector cimport vector

# Take the GIL for the Python progress callable at most once per this many merges: each merge takes
# microseconds, and a GIL round trip plus a tqdm update costs about as much.
cdef size_t PROGRESS_EVERY = 100


cdef void start_relay(ProgressRelay* relay, object report, list errors, size_t every) noexcept:
    relay.report = <PyObject*>report
    relay.errors = <PyObject*>errors
    relay.every = every
    relay.reported = 0
    relay.failed = False


cdef void flush_progress(ProgressRelay* relay, size_t total_done) noexcept:
    cdef size_t done = total_done - relay.reported
    relay.reported = total_done
    if done == 0 or relay.failed:
        return
    try:
        (<object>relay.report)(done)
    except BaseException as error:  # includes KeyboardInterrupt: re-raised once the work returns
        relay.failed = True
        (<object>relay.errors).append(error)


cdef void relay_progress(void* context, size_t total_done) noexcept nogil:
    cdef ProgressRelay* relay = <ProgressRelay*>context
    if relay.failed or total_done - relay.reported < relay.every:
        return
    with gil:
        flush_progress(relay, total_done)


cdef int load_word_counts(WordCounts& words, object word_counts) except -1:
    cdef int64_t count
    words.reserve(len(word_counts), 0)
    for word, value in word_counts.items():
        if not isinstance(word, bytes):
            raise TypeError(f"word counts must map bytes to int; got the key {word!r}")
        try:
            count = as_integer(value)
        except OverflowError:
            raise OverflowError(f"the count of {word!r} does not fit in 64 bits: {value}") from None
        if count < 0:
            raise ValueError(f"word counts must not be negative; {word!r} has {count}")
        words.add(PyBytes_AS_STRING(word), <size_t>PyBytes_GET_SIZE(word), count)
    return 0


def merge(
    word_counts: Mapping[bytes, int],
    num_merges: int,
    progress: Callable[[int], None] | None = None,
    *,
    prune_pairs: int | None = None,
) -> list[tuple[bytes, bytes]]:
    """Up to `num_merges` merges as `[(left_bytes, right_bytes), ...]`, in creation order.

    `word_counts` maps each pre-token's UTF-8 bytes to how often it occurs (words seen 0 times are
    ignored). `progress`, if given, is called now and then with the number of merges done since its
    previous call, so `tqdm.update` fits; the sum of its arguments is the number of merges returned.
    `prune_pairs`: prune the pairs that count too little to be merged once more than this many are
    tracked (default about 4 million; a tuning and testing knob, the merges do not depend on it).
    """
    cdef WordCounts words
    load_word_counts(words, word_counts)
    return run_train_merges(words, num_merges, progress, 1, prune_pairs)


cdef list run_train_merges(
    const WordCounts& words, object num_merges, object progress, int num_threads=1, object prune_pairs=None
):
    """`train_merges` without the GIL, relaying progress to a Python callable; merges as bytes."""
    if isinstance(num_merges, bool) or not isinstance(num_merges, int) or num_merges < 0:
        raise ValueError(f"num_merges must be a non-negative integer, got {num_merges!r}")
    cdef size_t prune_limit = kDefaultPrunePairs
    if prune_pairs is not None:
        if isinstance(prune_pairs, bool) or not isinstance(prune_pairs, int) or prune_pairs < 0:
            raise ValueError(f"prune_pairs must be a non-negative integer or None, got {prune_pairs!r}")
        prune_limit = prune_pairs
    errors = []
    cdef ProgressRelay relay
    start_relay(&relay, progress, errors, PROGRESS_EVERY)
    cdef MergeProgress callback = NULL
    if progress is not None:
        callback = relay_progress
    cdef size_t wanted = num_merges
    cdef vector[Merge] merges
    with nogil:
        merges = train_merges(words, wanted, callback, &relay, num_threads, prune_limit)
    if progress is not None:
        flush_progress(&relay, merges.size())
    if errors:
        raise errors[0]
    return [(merge_bytes.first, merge_bytes.second) for merge_bytes in merges]
