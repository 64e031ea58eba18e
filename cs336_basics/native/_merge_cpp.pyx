# cython: language_level=3, annotation_typing=False
"""The binding to the C++ merge loop `bpe::train_merges` (cpp/merge/bpe_merge.hpp): for word counts in a
Python mapping (`merge`: bpe_v6 runs it on one thread, bpe_v7 given a dict on its threads), and for
word counts already in C++ (`merge_held_words`, which `_count_cpp.NativeWordCounts.merge` calls).

It only converts types: word counts into one flat `CountedWords`, then the C++ loop runs without the
GIL, and the merges come back as bytes. The algorithm and its notes live in the C++.
"""

from collections.abc import Callable, Mapping
from operator import index as as_integer

cimport cs336_basics.native._libbpe as lib
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport int64_t

from cs336_basics.native._held_words cimport borrowed_words
from cs336_basics.native._merging cimport train_merges


cdef int load_word_counts(lib.CountedWords& words, object word_counts) except -1:
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
    num_threads: int = 1,
    prune_pairs: int | None = None,
    parallel_words: int | None = None,
    rules: object = None,
) -> list[tuple[bytes, bytes]]:
    """Up to `num_merges` merges as `[(left_bytes, right_bytes), ...]`, in creation order.

    `word_counts` maps each pre-token's UTF-8 bytes to how often it occurs (words seen 0 times are
    ignored). `progress`, if given, is called now and then with the number of merges done since its
    previous call, so `tqdm.update` fits; the sum of its arguments is the number of merges returned.
    `prune_pairs`: prune the pairs that count too little to be merged once more than this many are
    tracked (default 262,144; a tuning and testing knob, the merges do not depend on it).
    `num_threads` (OpenMP threads; 1 without OpenMP) rewrite the words of a merge that touches at
    least `parallel_words` words (default 256) while timing shows that faster than one thread; 0
    sends every merge to the threads (a tuning and testing knob): the merges depend on neither.
    `rules`: a `phases.MergeRules` (None: the defaults): which pair wins among equal counts (a row of
    `tie_break.py` the C++ has), HF's limits (`merge_limits.py`) and a base's merges, which each word
    starts encoded by (`start_from.py`); only the merges after them come back, within the limits.
    """
    if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
        raise ValueError(f"num_threads must be a positive integer, got {num_threads!r}")
    cdef lib.CountedWords words
    load_word_counts(words, word_counts)
    return train_merges(
        words, num_merges, progress, num_threads, prune_pairs, parallel_words, True, rules
    )


def tie_break_names() -> list[str]:
    """The tie-breaks the C++ merge loop has (`bpe::tie_break_names`), by name: what the rows of
    `tie_break.py` marked native must be."""
    return [name.decode() for name in lib.tie_break_names()]


def last_thread_use() -> dict[str, int]:
    """How the last merge loop run on the calling thread used its threads (`bpe::last_merge_thread_use`):
    `parallel_merges` on the threads (counted only with `parallel_words` above 0), the times it fell back to
    one thread because its threads were not getting their cores (`starved`), and the times a probe found them
    back (`resumed`)."""
    use = lib.last_merge_thread_use()
    return {"parallel_merges": use.parallel_merges, "starved": use.starved, "resumed": use.resumed}


def simulate_busy_machine(stalled_merges: int) -> int:
    """A test hook (`bpe::simulate_busy_machine`): above 0, later merge loops time their merges on a simulated
    clock on which the first `stalled_merges` parallel merges stall as beside a job holding a core; 0 (the
    default) times them for real. The merges do not change. Returns the previous value."""
    if isinstance(stalled_merges, bool) or not isinstance(stalled_merges, int) or stalled_merges < 0:
        raise ValueError(f"stalled_merges must be a non-negative integer, got {stalled_merges!r}")
    return lib.simulate_busy_machine(stalled_merges)


def merge_held_words(
    words: object, num_merges: int, progress: Callable[[int], None] | None, num_threads: int, prune_pairs: int | None,
    parallel_words: int | None, release_words: bool, rules: object,
) -> list[tuple[bytes, bytes]]:
    """`merge` on word counts a NativeWordCounts holds (its `merge` method, which documents the
    arguments and checks `num_threads`): `words` is the capsule it lends them in."""
    return train_merges(
        borrowed_words(words)[0], num_merges, progress, num_threads, prune_pairs, parallel_words, release_words, rules
    )
