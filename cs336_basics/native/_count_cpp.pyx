# cython: language_level=3, annotation_typing=False
"""bpe_v7's binding: the GPT-2 pre-tokenizer and the parallel word counter (cpp/scan/pretokenize.hpp,
cpp/count/word_count.hpp), and the counted words held in C++ (NativeWordCounts); their merge loop is
_merge_cpp's (`NativeWordCounts.merge` lends it the words, cpp/merge/bpe_merge.hpp).

Python names are the C++ names, but one: `count_file` is `bpe::count_words` (the package's
`count_words` counts any inputs: `ingest.counting`); `count_words_in_buffer` is
`bpe::count_words_in_buffer`. The binding converts types and releases the GIL; the algorithms and
their notes live in the C++. Invalid UTF-8 raises ValueError("invalid UTF-8 at byte offset N"), the
offset counted in bytes from the start of the input; running out of memory raises MemoryError.
"""

import os
from collections.abc import Callable, Iterable
from pickle import PickleBuffer

cimport cs336_basics.native._libbpe as lib

cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object text)  # its characters are then its UTF-8 bytes, at PyUnicode_DATA
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.bytes cimport PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_AsUTF8String, PyUnicode_DATA, PyUnicode_GET_LENGTH
from libc.stdint cimport UINT64_MAX, uint64_t
from libcpp cimport bool as cbool
from libcpp.string cimport string
from libcpp.memory cimport unique_ptr
from libcpp.string_view cimport string_view
from libcpp.utility cimport move
from libcpp.vector cimport vector

from cs336_basics.native._held_words cimport lend_words
from cs336_basics.native._progress cimport ProgressRelay, relay_progress, start_relay


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


# The flag's rule as backend.env_flag states it; this module imports of the package only pattern's check.
if os.environ.get("CS336_SCALAR_SCANNER", "").strip().lower() not in ("", "0", "false", "no"):
    use_scanner_path("scalar")


# The named scanners of the C++ (kNamedScanners), checked against pattern.py's rows at load.
NATIVE_PATTERNS = tuple(lib.named_scanner_name(index).decode() for index in range(lib.kNamedScannerCount))
# Where the C++ cuts each scanner's text into chunks (its ChunkCut, as a row's `cuts` names it).
NATIVE_CUTS = {
    lib.named_scanner_name(index).decode(): lib.named_scanner_cuts(index).decode()
    for index in range(lib.kNamedScannerCount)
}


def _check_rows() -> None:
    """pattern.check_native_scanners, the one check of this list against the rows (a relative import:
    this module loads under either name of the package)."""
    from ..rules.pattern import check_native_scanners

    check_native_scanners(NATIVE_PATTERNS, NATIVE_CUTS)


_check_rows()


cdef lib.PretokenPattern pattern_code(object name) except *:
    """The C++ value of the scanner named `name` (a row's `scanner`, pattern.py)."""
    cdef lib.PretokenPattern code = lib.PretokenPattern.kGpt2  # found below
    cdef bytes spelled = name.encode() if isinstance(name, str) else b""
    if not lib.find_named_scanner(string_view(<const char*>spelled, len(spelled)), code):
        raise ValueError(f"the native scanner runs the patterns {NATIVE_PATTERNS}, not {name!r}")
    return code


# The Unicode versions of the native tables (unicode_tables.hpp), the installed regex's first when current.
UNICODE_VERSIONS = tuple(lib.kUnicodeVersions[index].decode() for index in range(lib.kTableCount))


def regex_unicode_version() -> str:
    """The Unicode version of the table whose classes the installed `regex` has (pattern.installed_unicode,
    the one detection, told apart on every code point where two tables differ, once per process)."""
    from ..rules.pattern import installed_unicode

    return installed_unicode()


def unicode_table_index(unicode: str | None) -> int:
    """The index of a Unicode version's native table: one of UNICODE_VERSIONS, or None for the
    installed `regex`'s (regex_unicode_version)."""
    if unicode is None:
        unicode = regex_unicode_version()
    if unicode not in UNICODE_VERSIONS:
        raise ValueError(f"the native scanners have the Unicode tables {', '.join(UNICODE_VERSIONS)}, not {unicode!r}")
    return UNICODE_VERSIONS.index(unicode)


def pretoken_ends(const unsigned char[::1] data not None, pattern: str = "gpt2", unicode: str | None = None) -> list:
    """End offsets of the pre-tokens of UTF-8 `data` (bytes-like) under one of NATIVE_PATTERNS:
    pre-token i is `data[ends[i - 1]:ends[i]]`, the first starting at 0; they tile the input.
    `unicode`: whose character classes (unicode_table_index)."""
    cdef string_view text = view_of(data)
    cdef vector[size_t] ends
    cdef lib.PretokenPattern code = pattern_code(pattern)
    cdef unsigned table = unicode_table_index(unicode)
    with nogil:
        ends = lib.pretoken_ends(text, code, table)
    return ends


def pretokenize_bytes(
    const unsigned char[::1] data not None, pattern: str = "gpt2", unicode: str | None = None
) -> list:
    """The pre-tokens of UTF-8 `data` (bytes-like) under one of NATIVE_PATTERNS, as bytes."""
    cdef string_view text = view_of(data)
    cdef vector[size_t] ends
    cdef lib.PretokenPattern code = pattern_code(pattern)
    cdef unsigned table = unicode_table_index(unicode)
    with nogil:
        ends = lib.pretoken_ends(text, code, table)
    cdef const char* base = text.data()
    cdef size_t start = 0
    result = []
    for end in ends:
        result.append(base[start:end])
        start = end
    return result


def pretokenize(str text not None, pattern: str = "gpt2", unicode: str | None = None) -> list:
    """The pre-tokens of `text`, exactly as `regex.findall` with the named pattern gives them (with
    `unicode` given, as a regex engine with that Unicode version's classes would)."""
    return [piece.decode("utf-8") for piece in pretokenize_bytes(text.encode("utf-8"), pattern, unicode)]


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


cdef lib.CountOptions make_options(object num_threads, object chunk_bytes, object pattern, object unicode) except *:
    cdef lib.CountOptions options
    options.num_threads = checked_threads(num_threads)
    options.pattern = pattern_code(pattern)
    options.unicode_table = unicode_table_index(unicode)
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


cdef NativeWordCounts wrap_counts(lib.CountedWords& counted, const lib.CountStats& stats, int num_threads):
    cdef NativeWordCounts result = NativeWordCounts.__new__(NativeWordCounts)
    result.words = move(counted)
    result.num_threads = num_threads
    result.chunks = stats.chunks
    result.threads_used = stats.threads_used
    return result


cdef NativeWordCounts wrap_table(lib.CountedWords& table):
    """A table that was not counted here (summed, sorted, loaded): merge() on OpenMP's default threads."""
    cdef lib.CountStats no_count
    return wrap_counts(table, no_count, checked_threads(None))


def count_file(
    input_path: str | os.PathLike,
    special_tokens: Iterable[str] = (),
    num_threads: int | None = None,
    chunk_bytes: int | None = None,
    progress: Callable[[int], object] | None = None,
    pattern: str = "gpt2",
    bint by_lines=False,
    unicode: str | None = None,
) -> NativeWordCounts:
    """Count the pre-tokens (one of NATIVE_PATTERNS') of a UTF-8 file, split on `special_tokens` (which are not counted;
    overlapping ones resolve to the longest), on `num_threads` threads (None: OpenMP's default;
    backend.effective_num_threads resolves -1, -2, ...). The file is memory-mapped and cut into chunks of about
    `chunk_bytes` (None: automatic); the result does not depend on either setting. `progress`, if
    given, is called now and then with the bytes counted since its previous call (so `tqdm.update`
    fits); they add up to the file size. `by_lines`: each line (with its "\n") is pre-tokenized alone, as
    HF tokenizers' `train(files)` reads a file. `unicode`: whose character classes (unicode_table_index)."""
    cdef string path = os.fsencode(input_path)
    cdef vector[string] tokens = encode_special_tokens(special_tokens)
    cdef lib.CountOptions options = make_options(num_threads, chunk_bytes, pattern, unicode)
    options.by_lines = by_lines
    cdef lib.CountedWords counted
    cdef lib.CountStats stats
    errors = []
    cdef ProgressRelay relay
    start_relay(&relay, progress, errors, 1)
    if progress is not None:
        options.progress = relay_progress
        options.progress_context = &relay
    with nogil:
        counted = lib.count_words(path, tokens, options, &stats)
    if errors:
        raise errors[0]
    return wrap_counts(counted, stats, options.num_threads)


# Its name before `count_file`, which callers of this binding still use.
count_words = count_file


def count_words_in_buffer(
    const unsigned char[::1] data not None,
    special_tokens: Iterable[str] = (),
    num_threads: int | None = None,
    chunk_bytes: int | None = None,
    pattern: str = "gpt2",
    unicode: str | None = None,
) -> NativeWordCounts:
    """`count_file` for UTF-8 bytes in memory (bytes-like)."""
    cdef vector[string] tokens = encode_special_tokens(special_tokens)
    cdef lib.CountOptions options = make_options(num_threads, chunk_bytes, pattern, unicode)
    cdef string_view text = view_of(data)
    cdef lib.CountedWords counted
    cdef lib.CountStats stats
    with nogil:
        counted = lib.count_words_in_buffer(text, tokens, options, &stats)
    return wrap_counts(counted, stats, options.num_threads)


cdef object bytes_of(object buffer):
    """A buffer as unsigned bytes, without a copy (pyarrow.Buffer exports signed ones); None is empty."""
    if buffer is None:
        return b""
    view = memoryview(buffer)
    return view if view.format == "B" else view.cast("B")


cdef class WordCounter:
    """Counts several texts and byte ranges of files into one table (`bpe::WordCounter`): the counts
    of what it was given, as if concatenated (each piece must start and end at a safe cut)."""

    cdef unique_ptr[lib.WordCounter] counter
    cdef int num_threads

    def __cinit__(
        self,
        special_tokens: Iterable[str] = (),
        num_threads: int | None = None,
        expected_bytes: int = 0,
        pattern: str = "gpt2",
        unicode: str | None = None,
    ):
        """`expected_bytes`: how much text is coming in all, when known (0: not known), so that the
        tables are sized once, from the first piece, rather than grown as the pieces come. `pattern`:
        one of NATIVE_PATTERNS; `unicode`: whose character classes (unicode_table_index)."""
        cdef vector[string] tokens = encode_special_tokens(special_tokens)
        cdef lib.CountOptions options = make_options(num_threads, None, pattern, unicode)
        if expected_bytes < 0:
            raise ValueError(f"expected_bytes must not be negative, got {expected_bytes!r}")
        options.expected_bytes = expected_bytes
        self.num_threads = options.num_threads
        self.counter.reset(new lib.WordCounter(tokens, options))

    def count(self, const unsigned char[::1] data not None) -> None:
        """Counts UTF-8 bytes in memory (ValueError with the offset in `data` when not UTF-8)."""
        cdef string_view text = view_of(data)
        with nogil:
            self.counter.get().count(text)

    def count_file_range(self, path: str | os.PathLike, size_t begin, size_t end) -> None:
        """Counts bytes [begin, end) of a file, memory-mapped, its pages released as they are counted."""
        cdef string encoded = os.fsencode(path)
        with nogil:
            self.counter.get().count_file_range(encoded, begin, end)

    def keeps_documents_apart(self, separator: str) -> bool:
        """Whether documents joined by `separator` (one of the special tokens) can be counted each on
        its own whatever they hold, as count_documents counts them."""
        cdef bytes encoded = separator.encode("utf-8")
        return self.counter.get().keeps_documents_apart(view_of(encoded))

    def count_documents(
        self,
        data_buffer,
        offsets_buffer,
        int offset_bytes,
        size_t first,
        size_t count,
        separator: str,
        refused: str = "",
    ) -> bool:
        """Counts `count` documents held as an Arrow string array holds them, in place: `offsets` (the
        offsets buffer, `offset_bytes` 4 for string or 8 for large_string, starting at element `first`)
        and `data` (the data buffer), both bytes-like (a pyarrow.Buffer is), as the text in which they
        are joined by `separator`; needs keeps_documents_apart(separator). False: a document holds
        `refused` (when not empty)."""
        if offset_bytes not in (4, 8):
            raise ValueError(f"offset_bytes must be 4 or 8, got {offset_bytes!r}")
        cdef const unsigned char[::1] data = bytes_of(data_buffer)
        cdef const unsigned char[::1] offsets = bytes_of(offsets_buffer)
        if count == 0:
            return True
        if (first + count + 1) * <size_t>offset_bytes > <size_t>offsets.shape[0]:
            raise ValueError("documents: the offsets buffer is shorter than the documents it should hold")
        cdef bytes encoded_separator = separator.encode("utf-8")
        cdef bytes encoded_refused = refused.encode("utf-8")
        cdef string_view separator_view = view_of(encoded_separator)
        cdef string_view refused_view = view_of(encoded_refused)
        cdef string_view text = view_of(data)
        cdef const void* offset_data = &offsets[first * <size_t>offset_bytes]
        cdef cbool kept
        with nogil:
            kept = self.counter.get().count_documents(
                text.data(), text.size(), offset_data, offset_bytes, count, separator_view, refused_view
            )
        return kept

    def count_texts(self, list texts not None, separator: str, refused: str = "") -> tuple:
        """Counts the documents of `texts`, each a str or UTF-8 bytes (bytearray, memoryview), as the
        text in which they are joined by `separator`, each read where it lies: an ASCII str's
        characters and a bytes object's buffer as they are, any other str encoded (or buffer copied)
        once, with the GIL; counting releases it. Needs
        keeps_documents_apart(separator). Returns (False when a document holds `refused` (when not
        empty), the documents' UTF-8 bytes in all). TypeError: an item that is neither; ValueError:
        invalid UTF-8 (the offset in the joined text) or a str that cannot be encoded (a lone
        surrogate)."""
        cdef Py_ssize_t count = len(texts)
        cdef vector[string_view] views
        cdef list encoded = []  # the encodings made here live until counted
        cdef size_t content = 0
        cdef object text
        views.reserve(count)
        for text in texts:
            if isinstance(text, str):
                if PyUnicode_IS_ASCII(text):
                    views.push_back(string_view(<const char*>PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text)))
                else:
                    text = PyUnicode_AsUTF8String(text)
                    encoded.append(text)
                    views.push_back(string_view(PyBytes_AS_STRING(text), PyBytes_GET_SIZE(text)))
            elif isinstance(text, bytes):
                views.push_back(string_view(PyBytes_AS_STRING(text), PyBytes_GET_SIZE(text)))
            elif isinstance(text, (bytearray, memoryview)):
                text = bytes(text)
                encoded.append(text)
                views.push_back(string_view(PyBytes_AS_STRING(text), PyBytes_GET_SIZE(text)))
            else:
                raise TypeError(f"a document is a {type(text).__name__}, not str")
            content += views.back().size()
        cdef bytes encoded_separator = separator.encode("utf-8")
        cdef bytes encoded_refused = refused.encode("utf-8")
        cdef string_view separator_view = view_of(encoded_separator)
        cdef string_view refused_view = view_of(encoded_refused)
        cdef cbool kept
        with nogil:
            kept = self.counter.get().count_scattered_documents(
                views.data(), views.size(), separator_view, refused_view
            )
        return kept, content

    def take(self, canonical_order: bool = False) -> NativeWordCounts:
        """The counts so far (the counter starts again empty): in count_file's canonical order, or
        in table order, which skips sorting (for tables that are only added up)."""
        cdef lib.CountedWords counted
        cdef lib.CountStats stats
        cdef bint canonical = canonical_order
        with nogil:
            counted = self.counter.get().take(canonical)
        return wrap_counts(counted, stats, self.num_threads)

    def take_slices(self, num_slices: int) -> list:
        """The counts so far cut into `num_slices` tables as `NativeWordCounts.split_into_slices`
        cuts them, each in table order (the counter starts again empty): one pass, no sorting."""
        if num_slices < 1:
            raise ValueError(f"num_slices must be positive, got {num_slices!r}")
        cdef vector[lib.CountedWords] slices
        cdef size_t count = num_slices
        cdef lib.CountStats no_count
        with nogil:
            slices = self.counter.get().take_slices(count)
        return [wrap_counts(slices[index], no_count, self.num_threads) for index in range(slices.size())]


cdef class NativeWordCounts:
    """Word counts held in C++ (from count_file): words in a canonical order, identical for every
    thread count and chunk size."""

    cdef lib.CountedWords words
    cdef readonly size_t chunks  # how many chunks the input was cut into
    cdef readonly int threads_used  # how many threads counted at least one chunk
    cdef readonly int num_threads  # threads asked for; merge() counts the initial pairs on as many
    cdef readonly bint released  # merge(release_words=True) has freed the words

    cdef int check_held(self) except -1:
        if self.released:
            raise ValueError("these word counts were freed by merge(release_words=True)")
        return 0

    def __len__(self) -> int:
        self.check_held()
        return self.words.counts.size()

    def to_dict(self) -> dict:
        """`{word_bytes: count}`."""
        self.check_held()
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
        release_words: bool = False,
        num_threads: int | None = None,
        rules: object = None,
    ) -> list:
        """Up to `num_merges` BPE merges of these words as `[(left_bytes, right_bytes), ...]`, in
        creation order, run by the C++ merge loop without the GIL on the threads the words were
        counted on. `progress`, if given, is called now and then with the merges done since its
        previous call (so `tqdm.update` fits). `prune_pairs` and `parallel_words` as for
        `_merge_cpp.merge`. `release_words`: free the words once the merge loop has loaded them (its
        peak memory then holds them no longer); this object can do nothing after that. `num_threads`:
        at most this many threads (a caller's --workers); fewer when the words were counted on fewer.
        `rules`: a `phases.MergeRules` (None: the defaults), as for `_merge_cpp.merge`."""
        self.check_held()
        cdef int threads = self.num_threads
        if num_threads is not None:
            threads = min(threads, checked_threads(num_threads))
        from ._merge_cpp import merge_held_words

        try:
            return merge_held_words(
                lend_words(&self.words), num_merges, progress, threads, prune_pairs, parallel_words, release_words,
                rules,
            )
        finally:
            # Spent once the loop has loaded the words, even if it stopped later (a progress error);
            # arguments refused before that leave the words as they were.
            self.released = bool(release_words) and self.words.counts.empty()

    def total_count(self) -> int:
        """The counts added up: how many words were counted."""
        self.check_held()
        cdef size_t index
        cdef uint64_t part = 0, count
        total = 0
        for index in range(self.words.counts.size()):
            count = <uint64_t>self.words.counts[index]
            if part + count < part:  # would wrap: move the part into the Python int
                total += part
                part = 0
            part += count
        return total + part

    def text_bytes(self) -> int:
        """Each word's length times its count, added up: the bytes of text the words cover."""
        self.check_held()
        cdef size_t index
        cdef uint64_t part = 0, length, count, piece
        total = 0
        for index in range(self.words.counts.size()):
            length = self.words.offsets[index + 1] - self.words.offsets[index]
            count = <uint64_t>self.words.counts[index]
            if length != 0 and count > UINT64_MAX // length:  # the product would wrap
                total += length * <object>count
                continue
            piece = length * count
            if part + piece < part:  # the sum would wrap: move the part into the Python int
                total += part
                part = 0
            part += piece
        return total + part

    def to_arrays(self) -> tuple:
        """The count file's arrays `(words, lengths, counts)`: the words' bytes back to back, their
        lengths (uint32) and their counts (uint64), in native byte order and this table's word order."""
        self.check_held()
        cdef size_t size = self.words.counts.size()
        cdef bytes lengths = PyBytes_FromStringAndSize(NULL, 4 * size)
        cdef bytes counts = PyBytes_FromStringAndSize(NULL, 8 * size)
        cdef void* length_data = PyBytes_AS_STRING(lengths)
        cdef void* count_data = PyBytes_AS_STRING(counts)
        with nogil:
            lib.word_counts_to_arrays(self.words, length_data, count_data)
        return <bytes>self.words.bytes, lengths, counts

    def __reduce_ex__(self, protocol):
        # Pickled as three flat arrays: a few copies of memory, no object per word. With protocol 5
        # (Dask's) they go out of band: sent as they are, not copied into the pickle stream.
        arrays = self.to_arrays()
        if protocol >= 5:
            arrays = tuple(PickleBuffer(array) for array in arrays)
        return word_counts_from_arrays, arrays

    def split_into_slices(self, num_slices: int) -> list:
        """These words cut into `num_slices` tables by a hash of the word, the same for every table
        (tables summed slice by slice share no word: their sums concatenate)."""
        self.check_held()
        if num_slices < 1:
            raise ValueError(f"num_slices must be positive, got {num_slices!r}")
        cdef vector[lib.CountedWords] slices
        cdef size_t count = num_slices
        with nogil:
            slices = lib.split_into_slices(self.words, count)
        return [wrap_table(slices[index]) for index in range(slices.size())]

    def sorted_by_bytes(self) -> NativeWordCounts:
        """The same counts, words in ascending byte order (the count file's order)."""
        self.check_held()
        cdef lib.CountedWords sorted_words
        with nogil:
            sorted_words = lib.sorted_by_bytes(self.words)
        return wrap_table(sorted_words)

    def first_unordered_word(self) -> int:
        """The index of the first word not strictly greater than the one before, else len(self)."""
        self.check_held()
        return lib.first_unordered_word(self.words)


cdef size_t words_in_arrays(const unsigned char[::1] lengths, const unsigned char[::1] counts) except? 0:
    cdef size_t size = <size_t>lengths.shape[0] // 4
    if <size_t>lengths.shape[0] != 4 * size or <size_t>counts.shape[0] != 8 * size:
        raise ValueError(
            f"word-count arrays: {lengths.shape[0]} bytes of lengths and {counts.shape[0]} bytes of counts "
            "are not 4 and 8 bytes a word"
        )
    return size


cdef int append_arrays(
    lib.CountedWords* table,
    const unsigned char[::1] words,
    const unsigned char[::1] lengths,
    const unsigned char[::1] counts,
) except -1:
    cdef size_t size = words_in_arrays(lengths, counts)
    cdef string_view blob = view_of(words)
    cdef const void* length_data = &lengths[0] if size else NULL
    cdef const void* count_data = &counts[0] if size else NULL
    with nogil:
        lib.append_word_counts_from_arrays(table[0], blob.data(), blob.size(), length_data, count_data, size)
    return 0


def word_counts_from_arrays(
    const unsigned char[::1] words not None,
    const unsigned char[::1] lengths not None,
    const unsigned char[::1] counts not None,
) -> NativeWordCounts:
    """A table from the count file's arrays (see NativeWordCounts.to_arrays; bytes-like, native byte
    order). ValueError when they do not fit together or a count is 0; OverflowError when a count
    does not fit in int64 (the caller keeps such a table in Python)."""
    cdef lib.CountedWords table
    append_arrays(&table, words, lengths, counts)
    return wrap_table(table)


def concatenate_arrays(array_sets: Iterable[tuple]) -> NativeWordCounts:
    """One table from several tables' arrays `(words, lengths, counts)` (as word_counts_from_arrays
    takes them), one after the other: their sum when no word is in two of them (slices). One copy,
    where building each table and concatenating them makes two."""
    sets = [tuple(arrays) for arrays in array_sets]
    cdef lib.CountedWords table
    cdef size_t num_words = 0, num_bytes = 0
    for words, lengths, counts in sets:
        num_words += words_in_arrays(lengths, counts)
        num_bytes += memoryview(words).nbytes
    table.reserve(num_words, num_bytes)
    for words, lengths, counts in sets:
        append_arrays(&table, words, lengths, counts)
    return wrap_table(table)


cdef NativeWordCounts combine_tables(tables, bint add):
    """The tables added up (`add`) or one after the other, as a new table; the inputs unchanged."""
    held = list(tables)  # keeps every table alive while C++ reads it
    cdef vector[const lib.CountedWords*] pointers
    cdef NativeWordCounts table
    for table in held:
        pointers.push_back(&table.words)
    cdef lib.CountedWords total
    with nogil:
        if add:
            total = lib.add_word_counts(pointers)
        else:
            total = lib.concatenate_word_counts(pointers)
    return wrap_table(total)


def concatenate_word_counts(tables: Iterable[NativeWordCounts]) -> NativeWordCounts:
    """The tables one after the other, as a new table: their sum when no word is in two of them."""
    return combine_tables(tables, False)


def add_word_counts(tables: Iterable[NativeWordCounts]) -> NativeWordCounts:
    """The sum of native tables, as a new table (the inputs are not changed): every distinct word
    once, in the order of first appearance. OverflowError when a sum does not fit in int64."""
    return combine_tables(tables, True)


# ---------------------------------------------------------------------------------------------
# JSON lines

def json_line_texts(const unsigned char[::1] block not None, str field not None) -> list:
    """One item per line of `block` (bytes-like; lines end with b"\\n", the last perhaps not): the
    UTF-8 of the record's `field` string as bytes, None for a blank line (only spaces, tabs, carriage
    returns), or `(start, end)`, the line's bytes in `block` without its newline, for json.loads
    to judge (anything not certainly a record with that string field, errors included)."""
    cdef string_view text = view_of(block)
    # A lone surrogate in the name matches no key this reads (every such key is handed back).
    cdef string name = field.encode("utf-8", "surrogatepass")
    cdef lib.JsonLineTexts found
    with nogil:
        found = lib.json_line_texts(text, string_view(name.data(), name.size()))
    cdef const char* texts = found.texts.data()
    cdef size_t index, line_start = 0, text_start = 0, text_index = 0, text_end
    cdef int kind
    items = [None] * <Py_ssize_t>found.kinds.size()
    for index in range(found.kinds.size()):
        kind = <int>found.kinds[index]
        if kind == 0:  # JsonLine::kText
            text_end = found.text_ends[text_index]
            items[index] = texts[text_start:text_end]
            text_start = text_end
            text_index += 1
        elif kind == 2:  # JsonLine::kFallback
            items[index] = (line_start, found.line_ends[index])
        line_start = found.line_ends[index] + 1
    return items


def json_line_documents(const unsigned char[::1] block not None, str field not None) -> tuple:
    """json_line_texts with the records' strings left where the reader wrote them, one after another,
    for WordCounter.count_documents to count in place: (texts, ends, lines, fallbacks) -- `texts`
    the strings' UTF-8 (bytes), `ends` their offsets in it as native int64 (bytes; one more than
    strings, from 0), `lines` how many lines `block` holds, and `fallbacks` a list of (line index,
    start, end), the lines json.loads must judge (as json_line_texts hands them back)."""
    cdef string_view text = view_of(block)
    cdef string name = field.encode("utf-8", "surrogatepass")
    cdef lib.JsonLineTexts found
    with nogil:
        found = lib.json_line_texts(text, string_view(name.data(), name.size()))
    cdef size_t strings = found.text_ends.size()
    cdef bytes texts = PyBytes_FromStringAndSize(found.texts.data(), <Py_ssize_t>found.texts.size())
    cdef bytes ends = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>((strings + 1) * sizeof(long long)))
    cdef long long* end_at = <long long*>PyBytes_AS_STRING(ends)
    cdef size_t index, line_start = 0
    end_at[0] = 0
    for index in range(strings):
        end_at[index + 1] = <long long>found.text_ends[index]
    fallbacks = []
    for index in range(found.kinds.size()):
        if <int>found.kinds[index] == 2:  # JsonLine::kFallback
            fallbacks.append((index, line_start, found.line_ends[index]))
        line_start = found.line_ends[index] + 1
    return texts, ends, <Py_ssize_t>found.kinds.size(), fallbacks
