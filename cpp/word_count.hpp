// Counting GPT-2 pre-tokens ("words") of a whole corpus for BPE training, in parallel.
//
// The text is split on special tokens (they are not training data and no word crosses one), each
// piece is pre-tokenized (pretokenize.hpp) and every word's occurrences are counted. For threads the
// text is cut into chunks at places where cutting changes nothing: the start of a special token, or a
// ' '/'\n' right after a non-space character (see chunking.hpp). Each thread counts into its own
// table; the tables are merged and the words emitted in a canonical order, so the result is
// identical for every thread count and chunk size. Memory: about 64 bytes per distinct word per
// thread (each thread's table holds the words it has seen), plus the input's pages.
//
// Errors: InvalidUtf8Error (pretokenize.hpp) with the smallest invalid offset in the text;
// std::ios_base::failure when the file cannot be read.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "bpe_merge.hpp"  // WordCounts

namespace bpe {

// Called now and then with the bytes counted so far, on the calling thread (between its chunks, and
// once at the end with the whole). Returns true to stop (an interrupt): no thread starts another
// chunk, and the count returns no words.
using CountProgress = bool (*)(void* context, size_t bytes_done);

struct CountOptions {
    int num_threads = 0;     // <= 0: OpenMP's default (OMP_NUM_THREADS, else every core)
    size_t chunk_bytes = 0;  // target chunk size; 0 chooses from the text size and thread count
    CountProgress progress = nullptr;  // may be null
    void* progress_context = nullptr;
};

// What a count did, for tests and reports: a build that silently lost OpenMP shows threads_used 1.
struct CountReport {
    size_t chunks = 0;
    int threads_used = 0;  // threads that counted at least one chunk
};

// Word counts of `text`, words in canonical order (by hash, then bytes).
WordCounts count_words_in_buffer(std::string_view text, const std::vector<std::string>& special_tokens,
                       const CountOptions& options = {}, CountReport* report = nullptr);

// The same for a file, memory-mapped (it may be larger than memory).
WordCounts count_words(const std::string& path, const std::vector<std::string>& special_tokens,
                               const CountOptions& options = {}, CountReport* report = nullptr);

}  // namespace bpe
