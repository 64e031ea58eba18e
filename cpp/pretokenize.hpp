// GPT-2 pre-tokenization on UTF-8 bytes, exactly as `regex.finditer` splits text with
//
//     '(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// but as a hand-written state machine that decodes UTF-8 on the fly (no regex engine, no copies).
// Every character matches some alternative, so the pre-tokens tile the text: each starts where the
// previous one ended. The character classes come from cpp/unicode_tables.hpp, generated from the
// same `regex` package the Python pre-tokenizer uses.
//
// Errors: the visitor-based core returns the offset of the first byte that does not start a valid
// UTF-8 character (what Python reports as UnicodeDecodeError.start); the convenience functions throw
// InvalidUtf8Error carrying that offset. Overlong forms, surrogates and code points past U+10FFFF
// are invalid, as in Python's strict decoder.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "unicode_tables.hpp"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace bpe {

// Derives from std::invalid_argument so that Cython's `except +` raises it as a Python ValueError.
class InvalidUtf8Error : public std::invalid_argument {
public:
    explicit InvalidUtf8Error(size_t offset);
    size_t offset() const noexcept { return offset_; }

private:
    size_t offset_;
};

// Returned by the visitor-based functions when the whole input was valid.
inline constexpr size_t kValidUtf8 = static_cast<size_t>(-1);

namespace detail {

// Class of each byte when it is a whole (ASCII) character; kLeadByte marks bytes >= 0x80.
inline constexpr uint8_t kLeadByte = 4;

struct AsciiClassTable {
    uint8_t classes[256];
    constexpr AsciiClassTable() : classes() {
        for (int byte = 0; byte < 256; ++byte) {
            classes[byte] = byte < 0x80 ? uint8_t(unicode_tables::classify(uint32_t(byte))) : kLeadByte;
        }
    }
};
inline constexpr AsciiClassTable kAscii{};

inline bool is_continuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

// Decodes the multi-byte character at `p` (*p >= 0x80); returns its length and sets `cls`, or
// returns 0 if `p` does not start a valid character.
inline unsigned read_multibyte(const unsigned char* p, const unsigned char* end, uint8_t& cls) {
    const unsigned char lead = *p;
    const ptrdiff_t available = end - p;
    uint32_t code_point;
    unsigned length;
    if (lead >= 0xC2 && lead <= 0xDF) {
        if (available < 2 || !is_continuation(p[1])) return 0;
        code_point = (uint32_t(lead & 0x1F) << 6) | (p[1] & 0x3F);
        length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        if (available < 3 || !is_continuation(p[1]) || !is_continuation(p[2])) return 0;
        // E0 needs >= A0 (not overlong); ED needs <= 9F (no surrogates).
        if ((lead == 0xE0 && p[1] < 0xA0) || (lead == 0xED && p[1] > 0x9F)) return 0;
        code_point = (uint32_t(lead & 0x0F) << 12) | (uint32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
        length = 3;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        if (available < 4 || !is_continuation(p[1]) || !is_continuation(p[2]) || !is_continuation(p[3])) {
            return 0;
        }
        // F0 needs >= 90 (not overlong); F4 needs <= 8F (at most U+10FFFF).
        if ((lead == 0xF0 && p[1] < 0x90) || (lead == 0xF4 && p[1] > 0x8F)) return 0;
        code_point = (uint32_t(lead & 0x07) << 18) | (uint32_t(p[1] & 0x3F) << 12) |
                     (uint32_t(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
        length = 4;
    } else {
        return 0;  // a continuation byte, C0/C1 (always overlong) or F5..FF
    }
    cls = unicode_tables::classify(code_point);
    return length;
}

// Length of the character at `p` (p < end) and its class, or 0 if invalid.
inline unsigned read_char(const unsigned char* p, const unsigned char* end, uint8_t& cls) {
    cls = kAscii.classes[*p];
    if (cls != kLeadByte) return 1;
    return read_multibyte(p, end, cls);
}

#if defined(__SSE2__)
// The 16-byte fast path below hard-codes the ASCII classes; check that the tables agree.
constexpr bool ascii_classes_are_standard() {
    for (int byte = 0; byte < 0x80; ++byte) {
        const bool letter = (byte >= 'A' && byte <= 'Z') || (byte >= 'a' && byte <= 'z');
        const bool digit = byte >= '0' && byte <= '9';
        const bool space = byte == ' ' || (byte >= '\t' && byte <= '\r');
        const uint8_t expected = letter ? unicode_tables::kLetter
                                 : digit ? unicode_tables::kNumber
                                 : space ? unicode_tables::kSpace
                                         : unicode_tables::kOther;
        if (kAscii.classes[byte] != expected) return false;
    }
    return true;
}
static_assert(ascii_classes_are_standard(), "regex's ASCII classes changed: update ascii_run_length");

// How many of the 16 bytes at `p` continue an ASCII run of class `cls` (letter, number or other).
// Computing it without a loop avoids the mispredicted branch at the end of every short run.
inline unsigned ascii_run_length(const unsigned char* p, uint8_t cls) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    // Signed compares: bytes >= 0x80 are negative, so never in an ASCII range.
    const __m128i folded = _mm_or_si128(bytes, _mm_set1_epi8(0x20));
    const __m128i letter = _mm_and_si128(_mm_cmpgt_epi8(folded, _mm_set1_epi8('a' - 1)),
                                         _mm_cmplt_epi8(folded, _mm_set1_epi8('z' + 1)));
    const __m128i digit = _mm_and_si128(_mm_cmpgt_epi8(bytes, _mm_set1_epi8('0' - 1)),
                                        _mm_cmplt_epi8(bytes, _mm_set1_epi8('9' + 1)));
    __m128i in_class;
    if (cls == unicode_tables::kLetter) {
        in_class = letter;
    } else if (cls == unicode_tables::kNumber) {
        in_class = digit;
    } else {
        const __m128i space = _mm_or_si128(_mm_cmpeq_epi8(bytes, _mm_set1_epi8(' ')),
                                           _mm_and_si128(_mm_cmpgt_epi8(bytes, _mm_set1_epi8('\t' - 1)),
                                                         _mm_cmplt_epi8(bytes, _mm_set1_epi8('\r' + 1))));
        const __m128i ascii = _mm_cmpgt_epi8(bytes, _mm_set1_epi8(-1));
        in_class = _mm_andnot_si128(_mm_or_si128(_mm_or_si128(letter, digit), space), ascii);
    }
    const unsigned stops = ~unsigned(_mm_movemask_epi8(in_class)) | 0x10000u;
    return unsigned(__builtin_ctz(stops));
}
#endif

// Advances `p` over characters of class `cls` (not kSpace); returns false (with `p` at the bad
// byte) on invalid UTF-8.
inline bool skip_run(const unsigned char*& p, const unsigned char* end, uint8_t cls) {
    for (;;) {
#if defined(__SSE2__)
        while (end - p >= 16) {
            const unsigned length = ascii_run_length(p, cls);
            p += length;
            if (length < 16) break;
        }
#endif
        if (p >= end) return true;
        const uint8_t ascii = kAscii.classes[*p];
        if (ascii == cls) {
            ++p;
            continue;
        }
        if (ascii != kLeadByte) return true;
        uint8_t next_cls;
        const unsigned length = read_multibyte(p, end, next_cls);
        if (length == 0) return false;
        if (next_cls != cls) return true;
        p += length;
    }
}

inline bool is_contraction_suffix(const unsigned char* p, const unsigned char* end, unsigned& length) {
    if (p >= end) return false;
    switch (*p) {
        case 's': case 'd': case 'm': case 't': length = 1; return true;
        case 'l': case 'v': case 'r': break;
        default: return false;
    }
    if (end - p < 2) return false;
    const unsigned char second = p[1];
    if ((*p == 'l' && second == 'l') || ((*p == 'v' || *p == 'r') && second == 'e')) {
        length = 2;
        return true;
    }
    return false;
}

}  // namespace detail

// Calls `on_pretoken(begin, end)` (byte offsets into `data`) for each pre-token in order. Returns
// kValidUtf8, or the offset of the first invalid byte; the pre-tokens before it have been visited.
template <typename OnPretoken>
size_t for_each_pretoken(const char* data, size_t size, OnPretoken&& on_pretoken) {
    constexpr uint8_t kSpace = unicode_tables::kSpace;
    const auto* const base = reinterpret_cast<const unsigned char*>(data);
    const unsigned char* const end = base + size;
    const unsigned char* p = base;
    while (p < end) {
        const unsigned char* const start = p;
        uint8_t cls;
        unsigned length = detail::read_char(p, end, cls);
        if (length == 0) return size_t(p - base);
        p += length;

        if (*start == '\'') {
            unsigned suffix;
            if (detail::is_contraction_suffix(p, end, suffix)) {
                p += suffix;
                on_pretoken(size_t(start - base), size_t(p - base));
                continue;
            }
        } else if (*start == ' ' && p < end) {
            // ` ?\p{L}+` and friends: a single space joins the run of letters, digits or other
            // symbols right after it (the apostrophe counts as other; no contraction after a space).
            uint8_t next_cls;
            length = detail::read_char(p, end, next_cls);
            if (length == 0) return size_t(p - base);
            if (next_cls != kSpace) {
                p += length;
                if (!detail::skip_run(p, end, next_cls)) return size_t(p - base);
                on_pretoken(size_t(start - base), size_t(p - base));
                continue;
            }
        }

        if (cls != kSpace) {
            if (!detail::skip_run(p, end, cls)) return size_t(p - base);
            on_pretoken(size_t(start - base), size_t(p - base));
            continue;
        }

        // A whitespace run. `\s+(?!\S)` takes it all at the end of the text; before a non-space it
        // backtracks one character, which then stands alone (`\s+`) unless it is a space that the
        // next pre-token takes as its ` ?` prefix.
        const unsigned char* last = start;
        while (p < end) {
            length = detail::read_char(p, end, cls);
            if (length == 0) return size_t(p - base);
            if (cls != kSpace) break;
            last = p;
            p += length;
        }
        if (p == end || last == start) {
            on_pretoken(size_t(start - base), size_t(p - base));
            continue;
        }
        on_pretoken(size_t(start - base), size_t(last - base));
        if (*last == ' ') {
            p = last;
        } else {
            on_pretoken(size_t(last - base), size_t(p - base));
        }
    }
    return kValidUtf8;
}

// End offsets of the pre-tokens of `text` (each starts where the previous ended, the first at 0).
// Throws InvalidUtf8Error.
std::vector<size_t> pretoken_ends(std::string_view text);

}  // namespace bpe
