#include "scan/special_tokens.hpp"

#include <algorithm>
#include <utility>

namespace bpe {

SpecialTokens::SpecialTokens(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {
    tokens_.erase(std::remove(tokens_.begin(), tokens_.end(), std::string()), tokens_.end());
    // Longest first is what matters; equal-length tokens cannot both match at one place, so among
    // them any fixed order will do.
    std::sort(tokens_.begin(), tokens_.end(), [](const std::string& a, const std::string& b) {
        return a.size() != b.size() ? a.size() > b.size() : a < b;
    });
    tokens_.erase(std::unique(tokens_.begin(), tokens_.end()), tokens_.end());
}

bool SpecialTokens::spans(std::string_view text, size_t position) const {
    for (const std::string& token : tokens_) {
        const size_t length = token.size();
        const size_t first = position >= length - 1 ? position - (length - 1) : 0;
        for (size_t start = first; start < position; ++start) {
            if (start + length <= text.size() && text.compare(start, length, token) == 0) return true;
        }
    }
    return false;
}

}  // namespace bpe
