#include "scan/pretokenize.hpp"

#include "scan/pretokenize_gpt4.hpp"

#include <string>

namespace bpe {

InvalidUtf8Error::InvalidUtf8Error(size_t offset)
    : std::invalid_argument("invalid UTF-8 at byte offset " + std::to_string(offset)), offset_(offset) {}

std::vector<size_t> pretoken_ends(std::string_view text) {
    std::vector<size_t> ends;
    // English averages about five bytes per pre-token; reserving avoids most regrowth.
    ends.reserve(text.size() / 4 + 1);
    const size_t invalid =
        for_each_pretoken(text.data(), text.size(), [&](size_t, size_t end) { ends.push_back(end); });
    if (invalid != kValidUtf8) throw InvalidUtf8Error(invalid);
    return ends;
}

std::vector<size_t> pretoken_ends(std::string_view text, PretokenPattern pattern, unsigned unicode_table_index) {
    const unicode_tables::Table& unicode = unicode_table(unicode_table_index);
    if (pattern == PretokenPattern::kGpt2 && unicode_table_index == 0) return pretoken_ends(text);
    std::vector<size_t> ends;
    ends.reserve(text.size() / 4 + 1);
    const size_t invalid = for_each_pretoken_of(
        pattern, text.data(), text.size(), [&](size_t, size_t end) { ends.push_back(end); }, unicode);
    if (invalid != kValidUtf8) throw InvalidUtf8Error(invalid);
    return ends;
}

}  // namespace bpe
