// Counting GPT-2 pre-tokens ("words") of a whole corpus for BPE training, in parallel.
//
// The text is split on special tokens (they are not training data and no word crosses one), each
// piece is pre-tokenized (pretokenize.hpp) and every word's occurrences are counted. For threads the
// text is cut into chunks at places where cutting changes nothing: the start of a special token, or a
// ' '/'\n' right after a non-space character (see chunk_boundaries). Each thread counts into its own
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

// Special tokens matched as Python's `regex.split` with the tokens sorted longest first and escaped:
// scanning left to right, the leftmost occurrence wins, and of those starting there the longest.
class SpecialTokens {
public:
    explicit SpecialTokens(std::vector<std::string> tokens);

    bool empty() const { return tokens_.empty(); }
    const std::vector<std::string>& tokens() const { return tokens_; }  // longest first

    // Whether some occurrence of a token starts before `position` and ends after it.
    bool spans(std::string_view text, size_t position) const;

    // Calls `on_piece(begin, end)` for each stretch of `text` between matches (empty ones included,
    // as `regex.split` returns them).
    template <typename OnPiece>
    void for_each_piece(std::string_view text, OnPiece&& on_piece) const;

private:
    std::vector<std::string> tokens_;
};

// Called now and then with the bytes counted so far, on the calling thread (between its chunks, and
// once at the end with the whole).
using CountProgress = void (*)(void* context, size_t bytes_done);

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

// Cut offsets [0, ..., text.size()] (strictly increasing), at most one per multiple of
// `chunk_bytes`, each within `chunk_bytes` after its target (targets with no cut in reach are
// skipped). A cut is the start of a special token that no other occurrence spans, preferred within
// min(chunk_bytes, 1 MiB) of the target; else a position p with text[p] in {' ', '\n'} right after a
// non-whitespace character (ASCII letters and digits being the common case), spanned by no special
// token: no GPT-2 alternative matches whitespace after a non-space, so the word before p ends at p,
// and `(?!\S)` only looks forward from p. Counting the chunks separately equals counting the whole.
std::vector<size_t> chunk_boundaries(std::string_view text, const SpecialTokens& special_tokens,
                                     size_t chunk_bytes, int num_threads = 0);

// Word counts of `text`, words in canonical order (by hash, then bytes).
WordCounts count_words_in_buffer(std::string_view text, const std::vector<std::string>& special_tokens,
                       const CountOptions& options = {}, CountReport* report = nullptr);

// The same for a file, memory-mapped (it may be larger than memory).
WordCounts count_words(const std::string& path, const std::vector<std::string>& special_tokens,
                               const CountOptions& options = {}, CountReport* report = nullptr);

template <typename OnPiece>
void SpecialTokens::for_each_piece(std::string_view text, OnPiece&& on_piece) const {
    if (tokens_.empty()) {
        on_piece(size_t(0), text.size());
        return;
    }
    // Next occurrence of each token at or after the scan position; found lazily, reused while valid.
    std::vector<size_t> next(tokens_.size());
    for (size_t i = 0; i < tokens_.size(); ++i) next[i] = text.find(tokens_[i]);
    size_t piece_start = 0;
    for (;;) {
        size_t best = std::string_view::npos;
        size_t best_length = 0;
        for (size_t i = 0; i < tokens_.size(); ++i) {
            // Longest first, so on a tie the earlier (longer) token stays.
            if (next[i] < best) {
                best = next[i];
                best_length = tokens_[i].size();
            }
        }
        if (best == std::string_view::npos) break;
        on_piece(piece_start, best);
        piece_start = best + best_length;
        for (size_t i = 0; i < tokens_.size(); ++i) {
            if (next[i] != std::string_view::npos && next[i] < piece_start) {
                next[i] = text.find(tokens_[i], piece_start);
            }
        }
    }
    on_piece(piece_start, text.size());
}

}  // namespace bpe
