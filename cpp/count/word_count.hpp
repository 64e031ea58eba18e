// Counting pre-tokens ("words", GPT-2's or another native pattern's) of a whole corpus for BPE training, in parallel.
//
// The text is split on special tokens (they are not training data and no word crosses one), each
// piece is pre-tokenized (pretokenize.hpp) and every word's occurrences are counted. For threads the
// text is cut into chunks at places where cutting changes nothing: the start of a special token, or a
// ' '/'\n' right after a non-space character (see chunking.hpp). Each thread counts into its own
// table; the tables are merged and the words emitted in a canonical order, so the result is
// identical for every thread count and chunk size. Memory: about 64 bytes per distinct word per
// thread (each thread's table holds the words it has seen; sized after the thread's first chunk,
// it can be larger when that chunk's words overestimate the rest), plus the input's pages. On eight
// threads or more the first 104,857 words are held once, in a table all threads share, and a
// thread holds 4 bytes for each of them, its counts (word_table::SharedWords).
//
// Errors: InvalidUtf8Error (pretokenize.hpp) with the smallest invalid offset in the text;
// std::ios_base::failure when the file cannot be read.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "scan/pretokenize_gpt4.hpp"  // PretokenPattern
#include "count/word_counts.hpp"

namespace bpe {

// Called now and then with the bytes counted so far, on the calling thread (between its chunks, and
// once at the end with the whole). Returns true to stop (an interrupt): no thread starts another
// chunk, and the count returns no words.
using CountProgress = bool (*)(void* context, size_t bytes_done);

struct CountOptions {
    int num_threads = 0;     // <= 0: OpenMP's default (OMP_NUM_THREADS, else every core)
    size_t chunk_bytes = 0;  // target chunk size; 0 chooses from the text size and thread count
    // The text a WordCounter expects in all (0: unknown): its tables are sized for that from the first
    // piece, instead of growing by rehashing as a stream comes in pieces.
    size_t expected_bytes = 0;
    CountProgress progress = nullptr;  // may be null
    void* progress_context = nullptr;
    // The pre-tokenizer. A text (a piece between special tokens, cut where chunking.hpp cuts) ends
    // where cl100k's `\s++$` sees an end only where the piece ends: a cut has no whitespace before it.
    PretokenPattern pattern = PretokenPattern::kGpt2;
    // Whose Unicode classes the pattern's \p{L}, \p{N} and \s use: an index into unicode_tables::kTables.
    unsigned unicode_table = 0;
    // Each line (up to and with its '\n') pre-tokenized alone, as HF tokenizers' train(files) reads a
    // file: a whitespace run never spans a line end. Chunks are cut where no word crosses, so also
    // where no line-bound word does.
    bool by_lines = false;
};

// What a count did, for tests and reports: a build that silently lost OpenMP shows threads_used 1.
struct CountStats {
    size_t chunks = 0;
    int threads_used = 0;  // threads that counted at least one chunk
};

// Word counts of `text`, words in canonical order (by hash, then bytes).
CountedWords count_words_in_buffer(std::string_view text, const std::vector<std::string>& special_tokens,
                       const CountOptions& options = {}, CountStats* stats = nullptr);

// The same for a file, memory-mapped (it may be larger than memory).
CountedWords count_words(const std::string& path, const std::vector<std::string>& special_tokens,
                               const CountOptions& options = {}, CountStats* stats = nullptr);

// Counts several texts into one set of tables (one per thread), kept between calls: the byte
// ranges of one cluster task cost one table, not one each. The counts of all texts given, in any
// order, equal count_words of their concatenation when each text starts and ends at a safe cut.
// After an error (InvalidUtf8Error with the offset in that text, or an I/O error) the counts so
// far are incomplete: discard the counter.
class WordCounter {
public:
    WordCounter(const std::vector<std::string>& special_tokens, const CountOptions& options = {});
    ~WordCounter();
    WordCounter(const WordCounter&) = delete;
    WordCounter& operator=(const WordCounter&) = delete;

    // Counts `text` (options.progress, if set, sees bytes of this text). False: stopped by progress.
    bool count(std::string_view text);
    // Counts bytes [begin, end) of the file at `path`, memory-mapped, pages released as counted.
    bool count_file_range(const std::string& path, size_t begin, size_t end);
    // Whether documents joined by `separator` (one of the special tokens) count as each document on its
    // own, whatever they hold: no occurrence of a token can span the separator's start, and no longer
    // token begins with it. <|endoftext|> alone, or with other tokens that start with '<', does.
    bool keeps_documents_apart(std::string_view separator) const;
    // Counts `count` documents, bytes [offsets[i], offsets[i + 1]) of `data` (Arrow's string layout:
    // `offset_bytes` 4 or 8), as the text in which they are joined by `separator`, in place: each one
    // on its own, as keeps_documents_apart (required, else std::invalid_argument) allows. False: a
    // document holds `refused` (when not empty); everything was counted anyway. InvalidUtf8Error
    // gives the offset in the joined text.
    bool count_documents(const char* data, size_t data_size, const void* offsets, int offset_bytes, size_t count,
                         std::string_view separator, std::string_view refused);
    // The same for documents that each lie in their own buffer (`documents[i]`), none read past its end.
    bool count_scattered_documents(const std::string_view* documents, size_t count, std::string_view separator,
                                   std::string_view refused);
    // The counts so far, and the counter emptied. `canonical_order`: words in count_words' order;
    // otherwise in table order, which skips sorting (for tables that will only be added up).
    CountedWords take(bool canonical_order);
    // The counts so far cut into `num_slices` tables by word_slice, each in table order, and the
    // counter emptied: one pass over the table instead of take() and a split.
    std::vector<CountedWords> take_slices(size_t num_slices);

private:
    struct State;
    std::unique_ptr<State> state_;
};

}  // namespace bpe
