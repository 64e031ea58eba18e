// Special tokens (e.g. <|endoftext|>): where they occur in UTF-8 text, with the semantics of Python's
// `regex.split` over the tokens escaped and sorted longest first. Training splits the corpus on them
// (word_count.cpp, chunking.cpp); encoding emits each one's id (bpe_encode.cpp).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

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
    void for_each_piece(std::string_view text, OnPiece&& on_piece) const {
        for_each_part(text, on_piece, [](size_t) {});
    }

    // The same, and `on_token(index)` for each match in between (its index in tokens()), in text
    // order: piece, token, piece, ..., piece.
    template <typename OnPiece, typename OnToken>
    void for_each_part(std::string_view text, OnPiece&& on_piece, OnToken&& on_token) const;

private:
    std::vector<std::string> tokens_;
};

template <typename OnPiece, typename OnToken>
void SpecialTokens::for_each_part(std::string_view text, OnPiece&& on_piece, OnToken&& on_token) const {
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
        size_t best_token = 0;
        for (size_t i = 0; i < tokens_.size(); ++i) {
            // Longest first, so on a tie the earlier (longer) token stays.
            if (next[i] < best) {
                best = next[i];
                best_token = i;
            }
        }
        if (best == std::string_view::npos) break;
        on_piece(piece_start, best);
        on_token(best_token);
        piece_start = best + tokens_[best_token].size();
        for (size_t i = 0; i < tokens_.size(); ++i) {
            if (next[i] != std::string_view::npos && next[i] < piece_start) {
                next[i] = text.find(tokens_[i], piece_start);
            }
        }
    }
    on_piece(piece_start, text.size());
}

}  // namespace bpe
