# The contract of the native pre-tokenizer and word counter (cpp/pretokenize.hpp, cpp/word_count.hpp)
# for Cython. Everything here runs without the GIL; C++ exceptions become Python ones through
# `except +` (InvalidUtf8Error derives from std::invalid_argument, so it arrives as ValueError).
from libcpp.string cimport string
from libcpp.string_view cimport string_view
from libcpp.vector cimport vector

from cs336_basics._merge_cpp cimport WordCounts


cdef extern from "omp_shim.hpp" nogil:
    bint native_openmp_enabled "bpe::openmp_enabled"() noexcept
    int omp_default_threads "bpe::omp_default_threads"() noexcept


# C names given in full where the Python function of the same name would shadow them.
cdef extern from "pretokenize.hpp" nogil:
    vector[size_t] find_pretoken_ends "bpe::pretoken_ends"(string_view text) except +
    enum class ScannerPath "bpe::ScannerPath":
        pass
    void set_native_scanner_path "bpe::set_scanner_path"(ScannerPath path) noexcept
    ScannerPath native_scanner_path "bpe::scanner_path"() noexcept


cdef extern from "word_count.hpp" namespace "bpe" nogil:
    ctypedef void (*CountProgress)(void* context, size_t bytes_done) noexcept nogil

    cdef cppclass CountOptions:
        int num_threads
        size_t chunk_bytes
        CountProgress progress
        void* progress_context

    cdef cppclass CountReport:
        size_t chunks
        int threads_used

    WordCounts count_text_words "bpe::count_words"(
        string_view text, const vector[string]& special_tokens, const CountOptions& options,
        CountReport* report
    ) except +
    WordCounts count_words_in_file(
        const string& path, const vector[string]& special_tokens, const CountOptions& options,
        CountReport* report
    ) except +


cdef class NativeWordCounts:
    cdef WordCounts words
    cdef readonly size_t chunks  # how many chunks the input was cut into
    cdef readonly int threads_used  # how many threads counted at least one chunk
    cdef readonly int num_threads  # threads asked for; merge() counts the initial pairs on as many
