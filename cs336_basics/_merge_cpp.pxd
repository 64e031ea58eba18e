# The contract of cpp/bpe_merge.hpp for Cython: `cimport` these to build word counts and run the C++
# merge loop without the GIL (bpe_v6 does it in _merge_cpp.pyx; bpe_v7 may do it after counting).
from cpython.ref cimport PyObject
from libc.stdint cimport int64_t, uint64_t
from libcpp.string cimport string
from libcpp.utility cimport pair
from libcpp.vector cimport vector


cdef extern from "bpe_merge.hpp" namespace "bpe" nogil:
    cdef cppclass WordCounts:
        string bytes
        vector[uint64_t] offsets
        vector[int64_t] counts
        void add(const char* data, size_t length, int64_t count) except +
        void reserve(size_t num_words, size_t num_bytes) except +
        size_t size()

    ctypedef pair[string, string] Merge
    size_t kDefaultPrunePairs
    ctypedef void (*MergeProgress)(void* context, size_t merges_done) noexcept nogil

    vector[Merge] train_merges(
        const WordCounts& words, size_t num_merges, MergeProgress progress, void* context,
        int num_threads, size_t prune_pairs
    ) except +


# Progress reported by C++ without the GIL (a count so far), relayed to a Python callable that is
# given the increase since its last call (tqdm.update fits), at most once per `every`. What the
# callable raises lands in `errors`, and reporting stops.
cdef struct ProgressRelay:
    PyObject* report
    PyObject* errors  # a list
    size_t every
    size_t reported
    bint failed

cdef void start_relay(ProgressRelay* relay, object report, list errors, size_t every) noexcept
cdef void relay_progress(void* context, size_t total_done) noexcept nogil
cdef void flush_progress(ProgressRelay* relay, size_t total_done) noexcept


# train_merges without the GIL, progress relayed to a Python callable (tqdm.update fits); bpe_v7's
# native word counts use it too, with its threads counting the initial pairs. `prune_pairs` None is
# the C++ default.
cdef list run_train_merges(
    const WordCounts& words, object num_merges, object progress, int num_threads=*, object prune_pairs=*
)
