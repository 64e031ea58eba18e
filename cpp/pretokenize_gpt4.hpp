// GPT-4's pre-tokenization (tiktoken's cl100k_base, and rustbpe's variant of it) on UTF-8 bytes,
// exactly as `regex.finditer` splits text with cs336_basics/pattern.py's strings:
//
//     '(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*
//     |\s*[\r\n]|\s+(?!\S)|\s+                                   (rustbpe)
//
// and cl100k's, which has `\s++$` before `\s*[\r\n]` (a whitespace run that reaches the end of the
// text is one pre-token even across newlines). Its other differences (possessive `\p{L}++`,
// `{1,3}+`, `[\r\n]*+`, a last `\s` for `\s+`) match the same text: nothing after them could take back
// what they give up.
//
// A character-at-a-time state machine beside the GPT-2 scanner (pretokenize.hpp), sharing its UTF-8
// decoding, its character classes (\p{L}, \p{N}, \s from cpp/unicode_tables.hpp; \r and \n are the
// only newlines of the pattern, both in \s) and its error rule (the offset of the first byte that
// does not start a valid character). Letter and "other" runs are skipped 16 ASCII bytes at a time.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "pretokenize.hpp"

namespace bpe {

// The pre-tokenizers the native scanners run; the values are what the bindings pass.
enum class PretokenPattern : int {
    kGpt2 = 0,
    kCl100k = 1,
    kRustbpe = 2,
};

inline bool is_known_pattern(int pattern) { return pattern >= 0 && pattern <= 2; }

namespace detail {

inline bool is_newline(unsigned char byte) { return byte == '\r' || byte == '\n'; }

// The suffix of a contraction `(?i:[sdmt]|ll|ve|re)` at `p`: its length in bytes, or 0. Under
// `regex`'s simple case folding the only non-ASCII letter these fold from is U+017F (long s, C5 BF).
inline unsigned contraction_suffix_ci(const unsigned char* p, const unsigned char* end) {
    if (p >= end) return 0;
    const unsigned char first = *p | 0x20;  // ASCII letters to lower case; others stay no letter below
    if (*p < 0x80) {
        if (first == 's' || first == 'd' || first == 'm' || first == 't') return 1;
        if (end - p < 2 || p[1] >= 0x80) return 0;
        const unsigned char second = p[1] | 0x20;
        if ((first == 'l' && second == 'l') || ((first == 'v' || first == 'r') && second == 'e')) return 2;
        return 0;
    }
    return (end - p >= 2 && p[0] == 0xC5 && p[1] == 0xBF) ? 2 : 0;
}

// `kEndRun`: cl100k's `\s++$`. Only on_pretoken(begin, end) is called (no block path yet).
template <bool kEndRun, typename OnPretoken>
size_t scan_gpt4_pretokens(const char* data, size_t size, OnPretoken& on_pretoken) {
    using unicode_tables::kLetter;
    using unicode_tables::kNumber;
    using unicode_tables::kOther;
    using unicode_tables::kSpace;
    const auto* const base = reinterpret_cast<const unsigned char*>(data);
    const unsigned char* const end = base + size;
    const unsigned char* p = base;
    const auto emit = [&](const unsigned char* from, const unsigned char* to) {
        on_pretoken(size_t(from - base), size_t(to - base));
    };
    while (p < end) {
        const unsigned char* const start = p;
        uint8_t cls;
        unsigned length = read_char(p, end, cls);
        if (length == 0) return size_t(p - base);
        p += length;

        if (*start == '\'') {
            const unsigned suffix = contraction_suffix_ci(p, end);
            if (suffix != 0) {
                p += suffix;
                emit(start, p);
                continue;
            }
        }
        if (cls == kLetter) {
            if (!skip_run<true>(p, end, kLetter)) return size_t(p - base);
            emit(start, p);
            continue;
        }
        if (cls == kNumber) {  // \p{N}{1,3}: a run is cut every three characters
            for (int more = 0; more < 2 && p < end; ++more) {
                uint8_t next_cls;
                length = read_char(p, end, next_cls);
                if (length == 0) return size_t(p - base);
                if (next_cls != kNumber) break;
                p += length;
            }
            emit(start, p);
            continue;
        }

        // Other, or whitespace: what follows decides. A letter joins anything but a newline before
        // it (`[^\r\n\p{L}\p{N}]?+\p{L}+`); an "other" joins a single ' ' before it.
        uint8_t next_cls = kSpace;
        unsigned next_length = 0;
        if (p < end) {
            next_length = read_char(p, end, next_cls);
            if (next_length == 0) return size_t(p - base);
        }
        if (next_length != 0 && next_cls == kLetter && !is_newline(*start)) {
            p += next_length;
            if (!skip_run<true>(p, end, kLetter)) return size_t(p - base);
            emit(start, p);
            continue;
        }
        if (cls == kOther || (*start == ' ' && next_length != 0 && next_cls == kOther)) {
            // ` ?[^\s\p{L}\p{N}]++[\r\n]*`
            if (cls != kOther) p += next_length;
            if (!skip_run<true>(p, end, kOther)) return size_t(p - base);
            while (p < end && is_newline(*p)) ++p;
            emit(start, p);
            continue;
        }

        // A whitespace run from `start`: where it ends, where its last character starts and where
        // its last newline ends (the run's end of `\s*[\r\n]`).
        const unsigned char* last = start;
        const unsigned char* after_newline = is_newline(*start) ? p : nullptr;
        if (next_length != 0 && next_cls == kSpace) {
            last = p;
            p += next_length;
            if (is_newline(*last)) after_newline = p;
            while (p < end) {
                length = read_char(p, end, cls);
                if (length == 0) return size_t(p - base);
                if (cls != kSpace) break;
                last = p;
                p += length;
                if (is_newline(*last)) after_newline = p;
            }
        }
        if (kEndRun && p == end) {  // \s++$
            emit(start, p);
        } else if (after_newline != nullptr) {  // \s*[\r\n]
            emit(start, after_newline);
            p = after_newline;
        } else if (p == end || last == start) {  // \s+(?!\S) at the end, or \s+ of one character
            emit(start, p);
        } else {  // \s+(?!\S) gives back the last character, which starts the next pre-token
            emit(start, last);
            p = last;
        }
    }
    return kValidUtf8;
}

}  // namespace detail

// for_each_pretoken (pretokenize.hpp) under any of the native patterns: `on_pretoken(begin, end)`
// for each pre-token in order; kValidUtf8, or the offset of the first invalid byte.
template <typename OnPretoken>
size_t for_each_pretoken_of(PretokenPattern pattern, const char* data, size_t size, OnPretoken&& on_pretoken) {
    switch (pattern) {
        case PretokenPattern::kCl100k:
            return detail::scan_gpt4_pretokens<true>(data, size, on_pretoken);
        case PretokenPattern::kRustbpe:
            return detail::scan_gpt4_pretokens<false>(data, size, on_pretoken);
        default:
            return for_each_pretoken(data, size, on_pretoken);
    }
}

// pretoken_ends (pretokenize.hpp) under `pattern`. Throws InvalidUtf8Error.
std::vector<size_t> pretoken_ends(std::string_view text, PretokenPattern pattern);

}  // namespace bpe
