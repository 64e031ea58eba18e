# The C++ library in cpp/ (built once as the static library `bpe`, see setup.py) as Cython sees it.
# Every binding cimports its declarations from here: `cimport cs336_basics.native._libbpe as lib`, then
# `lib.count_words(...)` is `bpe::count_words` -- the same name on both sides of the boundary.
# Everything runs without the GIL; C++ exceptions become Python ones through `except +`
# (std::bad_alloc -> MemoryError; std::invalid_argument, and so InvalidUtf8Error -> ValueError;
# std::ios_base::failure -> OSError).
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libcpp cimport bool as cbool
from libcpp.pair cimport pair
from libcpp.string cimport string
from libcpp.string_view cimport string_view
from libcpp.vector cimport vector


cdef extern from "kit/omp_shim.hpp" namespace "bpe" nogil:
    bint openmp_enabled() noexcept
    int omp_default_threads() noexcept


# word_counts.hpp: the table counting makes, count files hold and the merge loop trains on.
cdef extern from "count/word_counts.hpp" namespace "bpe" nogil:
    cdef cppclass CountedWords:
        string bytes
        vector[uint64_t] offsets
        vector[int64_t] counts
        void add(const char* data, size_t length, int64_t count) except +
        void reserve(size_t num_words, size_t num_bytes) except +
        size_t size()


# bpe_merge.hpp: word counts in, merges out (bpe_v6, and bpe_v7 after its counting).
cdef extern from "merge/bpe_merge.hpp" namespace "bpe" nogil:
    cdef struct Merge:  # the ids of the merged tokens: bytes 0-255, then 256 + k for merge k
        uint32_t left
        uint32_t right
    size_t kDefaultPrunePairs
    size_t kDefaultParallelWords
    ctypedef cbool (*MergeProgress)(void* context, size_t merges_done) noexcept nogil  # true: stop
    enum class TieBreak:  # a value of tie_break_names(): the binding finds a row's by its name
        pass
    vector[string] tie_break_names() except +
    cdef struct MergeLimits:  # merge_limits.MergeLimits; 0, false: no limit
        int64_t min_frequency
        size_t max_token_length
        size_t max_words
        cbool no_colon_space

    cdef struct MergeThreadUse:  # how the last train_merges on this thread used its threads
        size_t parallel_merges
        size_t starved
        size_t resumed
    MergeThreadUse last_merge_thread_use() noexcept
    size_t simulate_busy_machine(size_t stalled_merges) noexcept  # a test hook; returns the previous value
    vector[Merge] train_merges(
        const CountedWords& words, size_t num_merges, MergeProgress progress, void* context,
        int num_threads, size_t prune_pairs, size_t parallel_words, TieBreak tie_break,
        const vector[Merge]& replay, MergeLimits limits
    ) except +
    vector[Merge] train_merges_releasing_words(
        CountedWords& words, size_t num_merges, MergeProgress progress, void* context,
        int num_threads, size_t prune_pairs, size_t parallel_words, TieBreak tie_break,
        const vector[Merge]& replay, MergeLimits limits
    ) except +


# pretokenize.hpp: the GPT-2 pre-tokenizer.
cdef extern from "scan/pretokenize.hpp" namespace "bpe" nogil:
    vector[size_t] pretoken_ends(string_view text) except +
    enum class ScannerPath:
        pass
    void set_scanner_path(ScannerPath path) noexcept
    ScannerPath scanner_path() noexcept


# pretokenize_gpt4.hpp: the patterns the native scanner runs, each found by its name (kNamedScanners).
cdef extern from "scan/pretokenize_gpt4.hpp" namespace "bpe" nogil:
    enum class PretokenPattern:
        kGpt2
    const size_t kNamedScannerCount
    bint find_named_scanner(string_view name, PretokenPattern& pattern) noexcept
    const char* named_scanner_name(size_t index) noexcept
    const char* named_scanner_cuts(size_t index) noexcept
    vector[size_t] pretoken_ends(string_view text, PretokenPattern pattern, unsigned unicode_table) except +


# unicode_tables.hpp: the character classes of each Unicode version the references use.
cdef extern from "scan/unicode_tables.hpp" namespace "bpe::unicode_tables" nogil:
    const unsigned kTableCount
    const char* kUnicodeVersions[]


# word_count.hpp: counting the pre-tokens of a corpus on OpenMP threads (bpe_v7).
cdef extern from "count/word_count.hpp" namespace "bpe" nogil:
    ctypedef cbool (*CountProgress)(void* context, size_t bytes_done) noexcept nogil  # true: stop

    cdef cppclass CountOptions:
        int num_threads
        size_t chunk_bytes
        size_t expected_bytes
        CountProgress progress
        void* progress_context
        PretokenPattern pattern
        unsigned unicode_table
        cbool by_lines

    cdef cppclass CountStats:
        size_t chunks
        int threads_used

    CountedWords count_words(
        const string& path, const vector[string]& special_tokens, const CountOptions& options,
        CountStats* stats
    ) except +
    CountedWords count_words_in_buffer(
        string_view text, const vector[string]& special_tokens, const CountOptions& options,
        CountStats* stats
    ) except +

    cdef cppclass WordCounter:
        WordCounter(const vector[string]& special_tokens, const CountOptions& options) except +
        cbool count(string_view text) except +
        cbool count_file_range(const string& path, size_t begin, size_t end) except +
        cbool keeps_documents_apart(string_view separator)
        cbool count_documents(
            const char* data, size_t data_size, const void* offsets, int offset_bytes, size_t count,
            string_view separator, string_view refused
        ) except +
        cbool count_scattered_documents(
            const string_view* documents, size_t count, string_view separator, string_view refused
        ) except +
        CountedWords take(cbool canonical_order) except +
        vector[CountedWords] take_slices(size_t num_slices) except +


# count_table.hpp: whole word-count tables: sums, the count file's order and arrays.
cdef extern from "count/count_table.hpp" namespace "bpe" nogil:
    CountedWords add_word_counts(const vector[const CountedWords*]& tables) except +
    vector[CountedWords] split_into_slices(const CountedWords& words, size_t num_slices) except +
    CountedWords concatenate_word_counts(const vector[const CountedWords*]& tables) except +
    CountedWords sorted_by_bytes(const CountedWords& words) except +
    size_t first_unordered_word(const CountedWords& words)
    CountedWords word_counts_from_arrays(
        const char* blob, size_t blob_size, const void* lengths, const void* counts, size_t num_words
    ) except +
    void append_word_counts_from_arrays(
        CountedWords& words, const char* blob, size_t blob_size, const void* lengths, const void* counts,
        size_t num_words
    ) except +
    void word_counts_to_arrays(const CountedWords& words, void* lengths, void* counts) except +


# code_units.hpp: UTF-8 from a str's code units, without the Python API.
cdef extern from "io/code_units.hpp" namespace "bpe" nogil:
    const size_t kSurrogateInText
    size_t max_utf8_bytes_per_unit(int unit_bytes)
    size_t utf8_from_code_units(const void* units, size_t count, int unit_bytes, char* out)


# bpe_encode.hpp: encoding text with a trained vocabulary (the tokenizer).
cdef extern from "encode/bpe_encode.hpp" namespace "bpe" nogil:
    cdef struct MergeRule:
        uint32_t left
        uint32_t right
        uint32_t merged

    # Ids of room past a text's worst case (one id per byte) that Encoder.encode asks for.
    const size_t kEncoderSpareIds "bpe::Encoder::kSpareIds"

    # true: stop
    ctypedef cbool (*IdSink)(void* context, const uint32_t* ids, size_t count, size_t bytes_done) noexcept nogil

    cdef cppclass Encoder:
        Encoder(
            const vector[uint32_t]& byte_ids,
            const vector[MergeRule]& merges,
            const vector[pair[string, uint32_t]]& special_tokens,
            size_t cache_slots,
            PretokenPattern pattern,
            unsigned unicode_table,
        ) except +
        size_t encode(string_view text, uint32_t* out) except +
        vector[size_t] pieces(string_view text, size_t piece_bytes) except +
        void encode_batch(
            const vector[string_view]& texts, uint32_t* const* outs, size_t* counts, int threads
        ) except +
        size_t encode_file(
            const string& path, int threads, size_t chunk_bytes, IdSink sink, void* context
        ) except +
        size_t cache_slots()


# jsonl.hpp: the text field of JSON-lines records, the lines json.loads must judge handed back.
cdef extern from "io/jsonl.hpp" namespace "bpe" nogil:
    enum class JsonLine:
        pass

    cdef cppclass JsonLineTexts:
        string texts
        vector[size_t] text_ends
        vector[JsonLine] kinds
        vector[size_t] line_ends

    JsonLineTexts json_line_texts(string_view buffer, string_view field) except +
