// One JSON-lines record at a time, by the JSON grammar as Python's json.loads reads it (strict
// strings, ' ', '\t', '\r' as the only whitespace inside a line). Every doubt is a Fallback: the
// cost of one is a json.loads call, the cost of a wrong Text a silently different corpus.
#include "io/jsonl.hpp"

#include <cstring>

#include "kit/bits.hpp"

namespace bpe {
namespace {

// json.loads recurses per level of nesting and stops with a RecursionError somewhere past a few
// hundred; anything near that is left to it.
constexpr int kMaxDepth = 64;
// json.loads turns an integer into a Python int, which refuses more than 4300 digits
// (sys.set_int_max_str_digits); numbers this long are left to it too.
constexpr ptrdiff_t kMaxNumberBytes = 100;

constexpr uint64_t kOnes = 0x0101010101010101ULL;
constexpr uint64_t kHighBits = 0x8080808080808080ULL;

// The bytes of 8 (byte i of `v` is the i-th in memory) that stop a run of bytes copied as they
// are, as the high bit of each: '"', '\\', a control character (json.loads refuses them raw) or a
// non-ASCII byte (its UTF-8 is checked). Bits above the lowest set one may be wrong (borrows).
inline uint64_t special_bytes(uint64_t v) {
    const uint64_t quote = v ^ (kOnes * '"');
    const uint64_t backslash = v ^ (kOnes * '\\');
    return (((v - kOnes * 0x20) & ~v) | ((quote - kOnes) & ~quote) | ((backslash - kOnes) & ~backslash) | v) &
           kHighBits;
}

// The length of the well-formed UTF-8 sequence at p, or 0. Encoded surrogates count as malformed:
// json.loads decodes them ('surrogatepass') and the text then fails to encode, an error to report.
size_t utf8_length(const unsigned char* p, const unsigned char* end) {
    const unsigned c = p[0];
    const ptrdiff_t left = end - p;
    auto continues = [&](ptrdiff_t i) { return i < left && (p[i] & 0xC0) == 0x80; };
    if (c >= 0xC2 && c <= 0xDF) return continues(1) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        const unsigned low = c == 0xE0 ? 0xA0 : 0x80, high = c == 0xED ? 0x9F : 0xBF;
        return left >= 3 && p[1] >= low && p[1] <= high && continues(2) ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        const unsigned low = c == 0xF0 ? 0x90 : 0x80, high = c == 0xF4 ? 0x8F : 0xBF;
        return left >= 4 && p[1] >= low && p[1] <= high && continues(2) && continues(3) ? 4 : 0;
    }
    return 0;
}

char* put_utf8(char* w, uint32_t c) {
    if (c < 0x80) {
        *w++ = static_cast<char>(c);
    } else if (c < 0x800) {
        *w++ = static_cast<char>(0xC0 | (c >> 6));
        *w++ = static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        *w++ = static_cast<char>(0xE0 | (c >> 12));
        *w++ = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        *w++ = static_cast<char>(0x80 | (c & 0x3F));
    } else {
        *w++ = static_cast<char>(0xF0 | (c >> 18));
        *w++ = static_cast<char>(0x80 | ((c >> 12) & 0x3F));
        *w++ = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        *w++ = static_cast<char>(0x80 | (c & 0x3F));
    }
    return w;
}

// Strings are decoded to an output position that never passes the input position: no escape
// decodes to more bytes than it is written with. So one output buffer the size of the input holds
// every text, and any other string (a key, another field's value) is decoded just past the texts
// kept so far, then forgotten.
class LineParser {
  public:
    explicit LineParser(std::string_view field) : field_(field) {}

    // The line [begin, end); a Text's string is decoded at `out`, and `out` moved past it.
    JsonLine parse(const unsigned char* begin, const unsigned char* end, char*& out) {
        p_ = begin;
        end_ = end;
        skip_space();
        if (p_ == end_) return JsonLine::kBlank;
        if (!consume('{')) return JsonLine::kFallback;
        char* text_end = nullptr;
        skip_space();
        if (consume('}')) return JsonLine::kFallback;  // no field at all
        for (;;) {
            char* scratch = text_end ? text_end : out;
            char* key_end = consume('"') ? string_to(scratch) : nullptr;
            if (key_end == nullptr) return JsonLine::kFallback;
            const bool is_field = static_cast<size_t>(key_end - scratch) == field_.size() &&
                                  std::memcmp(scratch, field_.data(), field_.size()) == 0;
            skip_space();
            if (!consume(':')) return JsonLine::kFallback;
            skip_space();
            if (is_field) {
                // Twice (json.loads keeps the last) or not a string (an error): json.loads says.
                if (text_end != nullptr || !consume('"')) return JsonLine::kFallback;
                text_end = string_to(out);
                if (text_end == nullptr) return JsonLine::kFallback;
            } else if (!value(scratch, 1)) {
                return JsonLine::kFallback;
            }
            skip_space();
            if (consume('}')) break;
            if (!consume(',')) return JsonLine::kFallback;
            skip_space();
        }
        skip_space();
        if (p_ != end_ || text_end == nullptr) return JsonLine::kFallback;
        out = text_end;
        return JsonLine::kText;
    }

  private:
    void skip_space() {
        while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\r')) ++p_;
    }

    bool consume(unsigned char c) {
        if (p_ < end_ && *p_ == c) {
            ++p_;
            return true;
        }
        return false;
    }

    bool hex4(uint32_t& value) {
        if (end_ - p_ < 4) return false;
        value = 0;
        for (int i = 0; i < 4; ++i) {
            const unsigned c = *p_++;
            unsigned digit;
            if (c >= '0' && c <= '9') digit = c - '0';
            else if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
            else if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
            else return false;
            value = value << 4 | digit;
        }
        return true;
    }

    // The string after its opening quote, decoded to `w`; the end of what was written, or nullptr.
    char* string_to(char* w) {
        for (;;) {
            while (end_ - p_ >= 8) {
                std::memcpy(w, p_, 8);  // room: the output never passes the input
                const uint64_t special = special_bytes(load_little_endian64(p_));
                const size_t plain = special ? count_trailing_zeros(special) / 8 : 8;
                w += plain;
                p_ += plain;
                if (plain < 8) break;
            }
            if (p_ == end_) return nullptr;
            const unsigned c = *p_;
            if (c == '"') {
                ++p_;
                return w;
            }
            if (c < 0x20) return nullptr;
            if (c < 0x80 && c != '\\') {
                *w++ = static_cast<char>(c);
                ++p_;
            } else if (c >= 0x80) {
                const size_t length = utf8_length(p_, end_);
                if (length == 0) return nullptr;
                std::memcpy(w, p_, length);
                w += length;
                p_ += length;
            } else if ((w = escape_to(w)) == nullptr) {
                return nullptr;
            }
        }
    }

    char* escape_to(char* w) {
        ++p_;  // the backslash
        if (p_ == end_) return nullptr;
        switch (*p_++) {
            case '"': *w++ = '"'; return w;
            case '\\': *w++ = '\\'; return w;
            case '/': *w++ = '/'; return w;
            case 'b': *w++ = '\b'; return w;
            case 'f': *w++ = '\f'; return w;
            case 'n': *w++ = '\n'; return w;
            case 'r': *w++ = '\r'; return w;
            case 't': *w++ = '\t'; return w;
            case 'u': break;
            default: return nullptr;
        }
        uint32_t c;
        if (!hex4(c)) return nullptr;
        // A surrogate not in a high-low pair stays a lone one in Python's str: an error for the
        // text field, none elsewhere. Either way, json.loads decides.
        if (c >= 0xDC00 && c <= 0xDFFF) return nullptr;
        if (c >= 0xD800 && c <= 0xDBFF) {
            uint32_t low;
            if (!consume('\\') || !consume('u') || !hex4(low) || low < 0xDC00 || low > 0xDFFF) return nullptr;
            c = 0x10000 + ((c - 0xD800) << 10) + (low - 0xDC00);
        }
        return put_utf8(w, c);
    }

    bool digits() {
        const unsigned char* start = p_;
        while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
        return p_ != start;
    }

    // Only the grammar: what follows (a '1' after "0", a '.' without digits) is the caller's error.
    bool number() {
        const unsigned char* start = p_;
        consume('-');
        if (consume('0')) {
        } else if (!digits()) {
            return false;  // "-Infinity" too: json.loads takes it, but that is its call
        }
        if (consume('.') && !digits()) return false;
        if (consume('e') || consume('E')) {
            if (!consume('+')) consume('-');
            if (!digits()) return false;
        }
        return p_ - start <= kMaxNumberBytes;
    }

    bool literal(const char* word, size_t length) {
        if (static_cast<size_t>(end_ - p_) < length || std::memcmp(p_, word, length) != 0) return false;
        p_ += length;
        return true;
    }

    // Any value other than the field's, checked and forgotten (its strings decoded at `scratch`).
    bool value(char* scratch, int depth) {
        if (p_ == end_) return false;
        switch (*p_) {
            case '"': ++p_; return string_to(scratch) != nullptr;
            case '{': return depth < kMaxDepth && container(scratch, depth + 1, '}');
            case '[': return depth < kMaxDepth && container(scratch, depth + 1, ']');
            case 't': return literal("true", 4);
            case 'f': return literal("false", 5);
            case 'n': return literal("null", 4);
            default: return number();  // NaN and Infinity fail here: Fallback
        }
    }

    // An object or array from its opening bracket: members separated by ',', no trailing one.
    bool container(char* scratch, int depth, unsigned char close) {
        ++p_;
        skip_space();
        if (consume(close)) return true;
        for (;;) {
            if (close == '}') {
                if (!consume('"') || string_to(scratch) == nullptr) return false;
                skip_space();
                if (!consume(':')) return false;
                skip_space();
            }
            if (!value(scratch, depth)) return false;
            skip_space();
            if (consume(close)) return true;
            if (!consume(',')) return false;
            skip_space();
        }
    }

    std::string_view field_;
    const unsigned char* p_ = nullptr;
    const unsigned char* end_ = nullptr;
};

}  // namespace

JsonLineTexts json_line_texts(std::string_view buffer, std::string_view field) {
    JsonLineTexts result;
    result.texts.resize(buffer.size());
    char* const texts = result.texts.data();
    char* out = texts;
    LineParser parser(field);
    const auto* const begin = reinterpret_cast<const unsigned char*>(buffer.data());
    const auto* const end = begin + buffer.size();
    for (const unsigned char* p = begin; p < end;) {
        const auto* newline = static_cast<const unsigned char*>(std::memchr(p, '\n', end - p));
        const unsigned char* line_end = newline ? newline : end;
        const JsonLine kind = parser.parse(p, line_end, out);
        result.kinds.push_back(kind);
        result.line_ends.push_back(static_cast<size_t>(line_end - begin));
        if (kind == JsonLine::kText) result.text_ends.push_back(static_cast<size_t>(out - texts));
        p = line_end + 1;
    }
    result.texts.resize(static_cast<size_t>(out - texts));
    return result;
}

}  // namespace bpe
