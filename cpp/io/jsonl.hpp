// The text field of JSON-lines records, read natively for the common case. Python's json.loads
// stays the judge of everything else: a line this code is not certain json.loads would accept, and
// decode to the same string, is handed back (Fallback) for formats.py to parse as it always has, so
// results and error messages cannot differ between the two paths.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace bpe {

enum class JsonLine : uint8_t {
    kText = 0,      // a JSON object whose `field` appears once and holds a string: that string is in `texts`
    kBlank = 1,     // only ' ', '\t', '\r' or nothing
    kFallback = 2,  // anything else: let json.loads decide
};

struct JsonLineTexts {
    std::string texts;                // the Text lines' strings as UTF-8, one after another
    std::vector<size_t> text_ends;    // one per Text line: where its string ends in `texts`
    std::vector<JsonLine> kinds;      // one per line
    std::vector<size_t> line_ends;    // one per line: where it ends in the buffer, before its '\n'
};

// The lines of `buffer` (each ends with '\n', except perhaps the last; "" holds no line), each
// judged against `field` (UTF-8). A line starts just after the previous line's '\n'.
JsonLineTexts json_line_texts(std::string_view buffer, std::string_view field);

}  // namespace bpe
