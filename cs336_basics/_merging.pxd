# How a binding runs the C++ merge loop: argument checks, the GIL released, progress relayed, merges
# back as bytes. Inline, so bpe_v6's binding (_merge_cpp) and bpe_v7's (_native) each compile it
# against the one library instead of one extension calling into the other.
cimport cs336_basics._libbpe as lib
from cs336_basics._progress cimport ProgressRelay, flush_progress, relay_progress, start_relay
from libcpp.vector cimport vector

# Take the GIL for the Python progress callable at most once per this many merges: each merge takes
# microseconds, and a GIL round trip plus a tqdm update costs about as much.
cdef enum:
    PROGRESS_EVERY_MERGES = 100


cdef inline list train_merges(
    const lib.WordCounts& words, object num_merges, object progress, int num_threads, object prune_pairs
):
    if isinstance(num_merges, bool) or not isinstance(num_merges, int) or num_merges < 0:
        raise ValueError(f"num_merges must be a non-negative integer, got {num_merges!r}")
    cdef size_t prune_limit = lib.kDefaultPrunePairs
    if prune_pairs is not None:
        if isinstance(prune_pairs, bool) or not isinstance(prune_pairs, int) or prune_pairs < 0:
            raise ValueError(f"prune_pairs must be a non-negative integer or None, got {prune_pairs!r}")
        prune_limit = prune_pairs
    errors = []
    cdef ProgressRelay relay
    start_relay(&relay, progress, errors, PROGRESS_EVERY_MERGES)
    cdef lib.MergeProgress callback = NULL
    if progress is not None:
        callback = relay_progress
    cdef size_t wanted = num_merges
    cdef vector[lib.Merge] merges
    with nogil:
        merges = lib.train_merges(words, wanted, callback, &relay, num_threads, prune_limit)
    flush_progress(&relay, merges.size())
    if errors:
        raise errors[0]
    return [(merge_bytes.first, merge_bytes.second) for merge_bytes in merges]
