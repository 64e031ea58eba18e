# cython: language_level=3, annotation_typing=False
"""bpe_v7's binding: the GPT-2 pre-tokenizer and the parallel word counter (cpp/pretokenize.hpp,
cpp/word_count.hpp), and the merge loop run straight on the counted words (cpp/bpe_merge.hpp).

Python names are the C++ names: `count_words` is `bpe::count_words`, `count_words_in_buffer` is
`bpe::count_words_in_buffer`. The binding converts types and releases the GIL; the algorithms and
their notes live in the C++. Invalid UTF-8 raises ValueError("invalid UTF-8 at byte offset N"), the
offset counted in bytes from the start of the input; running out of memory raises MemoryError.
"""

import os
from collections.abc import Callable, Iterable

cimport cs336_basics._libbpe as lib
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport uint64_t
from libcpp.string cimport string
from libcpp.string_view cimport string_view
from libcpp.utility cimport move
from libcpp.vector cimport vector

from cs336_basics._merging cimport train_merges
from cs336_basics._progress cimport ProgressRelay, relay_progress, start_relay


def openmp_enabled() -> bool:
    """Whether the library was compiled with OpenMP (else counting runs on one thread)."""
    return lib.openmp_enabled()


def omp_default_threads() -> int:
    """Threads an OpenMP region uses by default (OMP_NUM_THREADS, else every core); 1 without OpenMP."""
    return lib.omp_default_threads()


# ---------------------------------------------------------------------------------------------
# Pre-tokenization

cdef inline string_view view_of(const unsigned char[::1] data) noexcept:
    if data.shape[0] == 0:
        return string_view()
    return string_view(<const char*>&data[0], <size_t>data.shape[0])


SCANNER_PATHS = ("fast", "swar", "scalar")  # the order of bpe::ScannerPath


def use_scanner_path(name: str) -> str:
    """Make this module's pre-tokenizer (and counting) take one of SCANNER_PATHS, which all give
    the same pre-tokens ("scalar": no block fast path, no SIMD); returns the previous path. For
    tests; CS336_SCALAR_SCANNER=1 in the environment selects "scalar" at import."""
    if name not in SCANNER_PATHS:
        raise ValueError(f"scanner path must be one of {SCANNER_PATHS}, got {name!r}")
    previous = SCANNER_PATHS[<int>lib.scanner_path()]
    lib.set_scanner_path(<lib.ScannerPath><int>SCANNER_PATHS.index(name))
    return previous


# The flag's rule as backend.env_flag states it; this module imports nothing of the package.
if os.environ.get("CS336_SCALAR_SCANNER", "").strip().lower() not in ("", "0", "false", "no"):
    use_scanner_path("scalar")


def pretoken_ends(const unsigned char[::1] data not None) -> list:
    """End offsets of the GPT-2 pre-tokens of UTF-8 `data` (bytes-like): pre-token i is
    `data[ends[i - 1]:ends[i]]`, the first starting at 0; they tile the input."""
    cdef string_view text = view_of(data)
    cdef vector[size_t] ends
    with nogil:
        ends = lib.pretoken_ends(text)
    return ends


def pretokenize_bytes(const unsigned char[::1] data not None) -> list:
    """The GPT-2 pre-tokens of UTF-8 `data` (bytes-like), as bytes."""
    cdef string_view text = view_of(data)
    cdef vector[size_t] ends
    with nogil:
        ends = lib.pretoken_ends(text)
    cdef const char* base = text.data()
    cdef size_t start = 0
    result = []
    for end in ends:
        result.append(base[start:end])
        start = end
    return result


def pretokenize(str text not None) -> list:
    """The GPT-2 pre-tokens of `text`, exactly as `regex.findall` with the GPT-2 pattern gives them."""
    cdef bytes encoded = text.encode("utf-8")
    cdef string_view view = view_of(encoded)
    cdef vector[size_t] ends
    with nogil:
        ends = lib.pretoken_ends(view)
    cdef const char* base = view.data()
    cdef size_t start = 0
    result = []
    for end in ends:
        result.append(PyUnicode_DecodeUTF8(base + start, end - start, NULL))
        start = end
    return result


# ---------------------------------------------------------------------------------------------
# Counting

cdef int checked_threads(object num_threads) except -1:
    """Threads the C++ will really run on: None is OpenMP's default, a positive count is itself, and
    either is 1 without OpenMP. Counts relative to the cores (-1, -2, ...) are resolved by
    backend.effective_num_threads before they get here; this module imports nothing of the package."""
    if num_threads is not None and (isinstance(num_threads, bool) or not isinstance(num_threads, int)):
        raise TypeError(f"num_threads must be an int or None, got {num_threads!r}")
    if num_threads is not None and num_threads <= 0:
        raise ValueError(f"num_threads must be positive or None here, got {num_threads!r}")
    if not lib.openmp_enabled():
        return 1
    if num_threads is None:
        return lib.omp_default_threads()
    return num_threads


cdef lib.CountOptions make_options(object num_threads, object chunk_bytes) except *:
    cdef lib.CountOptions options
    options.num_threads = checked_threads(num_threads)
    if chunk_bytes is None:
        options.chunk_bytes = 0  # chosen from the input size and thread count
    elif isinstance(chunk_bytes, bool) or not isinstance(chunk_bytes, int) or chunk_bytes <= 0:
        raise ValueError(f"chunk_bytes must be a positive integer or None, got {chunk_bytes!r}")
    else:
        options.chunk_bytes = chunk_bytes
    return options


cdef vector[string] encode_special_tokens(object special_tokens) except *:
    if isinstance(special_tokens, (str, bytes)):
        raise TypeError(f"special_tokens must be a list of strings, got {special_tokens!r}")
    cdef vector[string] tokens
    for token in special_tokens:
        if not isinstance(token, str) or not token:
            raise ValueError(f"special tokens must be non-empty strings, got {token!r}")
        tokens.push_back(token.encode("utf-8"))
    return tokens


cdef NativeWordCounts wrap_counts(lib.WordCounts& counted, const lib.CountReport& report, int num_threads):
    cdef NativeWordCounts result = NativeWordCounts.__new__(NativeWordCounts)
    result.words = move(counted)
    result.num_threads = num_threads
    result.chunks = report.chunks
    result.threads_used = report.threads_used
    return result


def count_words(
    input_path: str | os.PathLike,
    special_tokens: Iterable[str] = (),
    num_threads: int | None = None,
    chunk_bytes: int | None = None,
    progress: Callable[[int], object] | None = None,
) -> NativeWordCounts:
    """Count the GPT-2 pre-tokens of a UTF-8 file, split on `special_tokens` (which are not counted;
    overlapping ones resolve to the longest), on `num_threads` threads (None: OpenMP's default;
    backend.effective_num_threads resolves -1, -2, ...). The file is memory-mapped and cut into chunks of about
    `chunk_bytes` (None: automatic); the result does not depend on either setting. `progress`, if
    given, is called now and then with the bytes counted since its previous call (so `tqdm.update`
    fits); they add up to the file size."""
    cdef string path = os.fsencode(input_path)
    cdef vector[string] tokens = encode_special_tokens(special_tokens)
    cdef lib.CountOptions options = make_options(num_threads, chunk_bytes)
    cdef lib.WordCounts counted
    cdef lib.CountReport report
    errors = []
    cdef ProgressRelay relay
    start_relay(&relay, progress, errors, 1)
    if progress is not None:
        options.progress = relay_progress
        options.progress_context = &relay
    with nogil:
        counted = lib.count_words(path, tokens, options, &report)
    if errors:
        raise errors[0]
    return wrap_counts(counted, report, options.num_threads)


def count_words_in_buffer(
    const unsigned char[::1] data not None,
    special_tokens: Iterable[str] = (),
    num_threads: int | None = None,
    chunk_bytes: int | None = None,
) -> NativeWordCounts:
    """`count_words` for UTF-8 bytes in memory (bytes-like)."""
    cdef vector[string] tokens = encode_special_tokens(special_tokens)
    cdef lib.CountOptions options = make_options(num_threads, chunk_bytes)
    cdef string_view text = view_of(data)
    cdef lib.WordCounts counted
    cdef lib.CountReport report
    with nogil:
        counted = lib.count_words_in_buffer(text, tokens, options, &report)
    return wrap_counts(counted, report, options.num_threads)


cdef class NativeWordCounts:
    """Word counts held in C++ (from count_words): words in a canonical order, identical for every
    thread count and chunk size."""

    cdef lib.WordCounts words
    cdef readonly size_t chunks  # how many chunks the input was cut into
    cdef readonly int threads_used  # how many threads counted at least one chunk
    cdef readonly int num_threads  # threads asked for; merge() counts the initial pairs on as many

    def __len__(self) -> int:
        return self.words.counts.size()

    def to_dict(self) -> dict:
        """`{word_bytes: count}`."""
        cdef const char* data = self.words.bytes.data()
        cdef size_t index
        cdef uint64_t start, end
        result = {}
        for index in range(self.words.counts.size()):
            start = self.words.offsets[index]
            end = self.words.offsets[index + 1]
            result[data[start:end]] = self.words.counts[index]
        return result

    def merge(
        self,
        num_merges: int,
        progress: Callable[[int], object] | None = None,
        *,
        prune_pairs: int | None = None,
        parallel_words: int | None = None,
    ) -> list:
        """Up to `num_merges` BPE merges of these words as `[(left_bytes, right_bytes), ...]`, in
        creation order, run by the C++ merge loop without the GIL on the threads the words were
        counted on. `progress`, if given, is called now and then with the merges done since its
        previous call (so `tqdm.update` fits). `prune_pairs` and `parallel_words` as for
        `_merge_cpp.merge`."""
        return train_merges(self.words, num_merges, progress, self.num_threads, prune_pairs, parallel_words)
