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
// Built as the GPT-2 scanner (pretokenize.hpp) is, sharing its UTF-8 decoding, its character classes
// (\p{L}, \p{N}, \s from cpp/unicode_tables.hpp; \r and \n are the only newlines of the pattern, both
// in \s), its error rule (the offset of the first byte that does not start a valid character), its
// 64-byte block masks and its switch between paths (set_scanner_path): a block path decides what it
// can of each block from the masks (gpt4_block_boundaries), and a character-at-a-time state machine
// takes one pre-token where it cannot (multi-byte spaces and numbers, whitespace at a block's end,
// invalid UTF-8); letter and "other" runs are skipped 16 ASCII bytes at a time there.
#pragma once

#include <cstddef>
#include <string_view>
#include <type_traits>
#include <vector>

#include "pretokenize.hpp"

namespace bpe {

// The pre-tokenizers the native scanners run; the values are what the bindings pass.
enum class PretokenPattern : int {
    kGpt2 = 0,
    kCl100k = 1,
    kRustbpe = 2,
};

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


// ---------------------------------------------------------------------------------------------
// The block path

// The masks GPT-4's rules need beyond GPT-2's (BlockMasks).
struct Gpt4Masks {
    uint64_t newline;       // \r \n
    uint64_t continuation;  // bytes after the first of a multi-byte character the block classified
    uint64_t undecided;     // what the block rules leave to the state machine: the non-ASCII bytes
                            // classify_multibyte_gpt4 left (spaces, numbers, invalid)
};

// classify_multibyte (pretokenize.hpp) for GPT-4's rules: it also stops at a multi-byte number,
// whose runs are cut every three characters (the block rules count ASCII digits, a byte each), and
// it marks the continuation bytes of what it classified, so that a multi-byte "other" character
// counts as one where one character matters (`[^\r\n\p{L}\p{N}]?+` before letters).
inline void classify_multibyte_gpt4(const unsigned char* p, BlockMasks& m, uint64_t& continuation) {
    uint64_t pending = m.non_ascii;
    while (pending != 0) {
        const unsigned at = count_trailing_zeros(pending);
        uint8_t cls;
        const unsigned length = read_multibyte(p + at, p + kBlockBytes, cls);
        if (length == 0 || cls == unicode_tables::kSpace || cls == unicode_tables::kNumber) return;
        const uint64_t bytes = ((uint64_t(1) << length) - 1) << at;
        if (cls == unicode_tables::kLetter) m.letter |= bytes;
        continuation |= bytes & (bytes - 1);
        m.non_ascii &= ~bytes;
        pending &= ~bytes;
    }
}

inline Gpt4Masks gpt4_masks(const unsigned char* p, BlockMasks& m) {
    Gpt4Masks g{};
    // \t..\r are rare beside ' ': one look at each byte tells newlines from the rest.
    for (uint64_t controls = m.space & ~m.blank; controls != 0; controls &= controls - 1) {
        const unsigned at = count_trailing_zeros(controls);
        if (is_newline(p[at])) g.newline |= uint64_t(1) << at;
    }
    if (m.non_ascii != 0) classify_multibyte_gpt4(p, m, g.continuation);
    g.undecided = m.non_ascii;
    return g;
}

// Pre-token starts in the 64 bytes at `p`, given that one starts at `p`, as block_boundaries gives
// GPT-2's (bit 0 set unless nothing could be decided; only starts before the first undecided byte and
// before byte 62). With L letters, N ASCII digits, O "other" (anything else but whitespace), B ' ', H
// ' ' \t \v \f and NL \r \n, and no lookbehind in the pattern:
//  * an L run starts one unless an H precedes it, or a lone O character that starts one itself
//    (`[^\r\n\p{L}\p{N}]?+\p{L}+`): an O run of one character, neither after an O nor after a ' ';
//  * an O run starts one unless a ' ' precedes it (` ?[^\s\p{L}\p{N}]++`), and takes the NLs right
//    after it (`[\r\n]*`); a contraction takes over where its apostrophe starts one;
//  * an N run starts one every three characters (`\p{N}{1,3}`);
//  * a whitespace run (H and NL, what the O before it left) starts one; so does the character after
//    its last NL when H follow it (`\s*[\r\n]`), and its last H when two or more H end it
//    (`\s+(?!\S)` gives the last back, to stand alone or join what follows as above). Which of
//    these apply depends on where the run ends: a run that reaches an undecided byte or the block's
//    end is left, with the pre-token before it, to the next block or the state machine.
inline uint64_t gpt4_block_boundaries(const unsigned char* p, const BlockMasks& m, const Gpt4Masks& g) {
    constexpr uint64_t kDecidable = (uint64_t(1) << (kBlockBytes - 2)) - 1;
    const uint64_t letter = m.letter, digit = m.digit, blank = m.blank, newline = g.newline;
    const uint64_t white = m.space;
    const uint64_t horizontal = white & ~newline;
    const uint64_t other = ~(letter | digit | m.space | m.non_ascii);
    const uint64_t undecided = g.undecided;
    uint64_t decided = kDecidable & (undecided != 0 ? (undecided & (~undecided + 1)) - 1 : ~uint64_t(0));
    // A whitespace run that touches the first undecided byte, or the block's end, is cut off whole.
    const unsigned edge = undecided != 0 ? count_trailing_zeros(undecided) : 64;
    if (edge > 0 && (white >> (edge - 1)) & 1) {
        const uint64_t below = edge - 1 == 0 ? 0 : ~white & ((uint64_t(1) << (edge - 1)) - 1);
        const unsigned run_start = below == 0 ? 0 : 64 - count_leading_zeros(below);
        decided &= (uint64_t(1) << run_start) - 1;
    }
    if (decided == 0) return 0;

    // Newlines an O run takes: each NL run that starts right after an O, carried through to its end.
    const uint64_t seeds = (other << 1) & newline;
    const uint64_t taken = ((newline + seeds) ^ newline) & newline;

    // Characters (their every byte) that start a run of O and do not follow a ' '.
    uint64_t first_of_run = ~g.continuation & ~(other << 1) & ~(blank << 1);
    for (int byte = 1; byte < 4; ++byte) first_of_run |= (first_of_run << 1) & g.continuation;
    const uint64_t lone_other = other & first_of_run;  // with a letter after it, a lone one

    uint64_t starts = letter & ~(letter << 1) & ~(horizontal << 1) & ~(lone_other << 1);
    starts |= other & ~(other << 1) & ~(blank << 1);
    uint64_t digit_starts = digit & ~(digit << 1);
    const uint64_t three_digits = digit & (digit << 1) & (digit << 2);
    for (uint64_t step = digit_starts; step != 0;) {
        step = (step << 3) & three_digits;
        digit_starts |= step;
    }
    starts |= digit_starts;
    const uint64_t free_white = white & ~taken;
    starts |= free_white & (~(white << 1) | (taken << 1));
    // The last H of a run that ends in two or more H.
    starts |= horizontal & (horizontal << 1) & ~(white >> 1);
    // After the last NL of a run, where H follow it: only H up to the run's end.
    for (uint64_t after = (newline << 1) & horizontal & decided; after != 0; after &= after - 1) {
        const uint64_t at = after & (~after + 1);
        const uint64_t past = (horizontal + at) & ~horizontal;
        if ((past & newline) == 0) starts |= at;
    }
    // Contractions where their apostrophe starts a pre-token.
    for (uint64_t quotes = m.apostrophe & starts & decided; quotes != 0; quotes &= quotes - 1) {
        const unsigned at = count_trailing_zeros(quotes);
        const unsigned suffix = contraction_suffix_ci(p + at + 1, p + kBlockBytes);
        if (suffix == 0) continue;
        starts &= ~(((uint64_t(1) << suffix) - 1) << (at + 1));
        if (at + 1 + suffix < 64) starts |= uint64_t(1) << (at + 1 + suffix);
    }
    return (starts | 1) & decided;
}

// `kEndRun`: cl100k's `\s++$`. As scan_pretokens (pretokenize.hpp): `readable` >= `size` bytes of
// `data` may be read, never scanned past `size`.
template <bool kEndRun, ScannerPath kPath, typename OnPretoken, typename OnBlock>
size_t scan_gpt4_pretokens(const char* data, size_t size, size_t readable, OnPretoken& on_pretoken,
                           OnBlock& on_block) {
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
        if (kPath != ScannerPath::kScalar) {
            // The text's last bytes as a copy padded with 0x80, which starts no character: the block
            // rules leave what touches it (a run at the text's end) undecided.
            const unsigned char* block = p;
            unsigned char padded[kBlockBytes];
            if (size_t(end - p) < kBlockBytes) {
                pad_last_block(p, size_t(end - p), readable - size_t(p - base), padded);
                block = padded;
            }
            BlockMasks masks = kPath == ScannerPath::kFast ? block_masks_fast(block) : block_masks_swar(block);
            const Gpt4Masks more = gpt4_masks(block, masks);
            const uint64_t boundaries = gpt4_block_boundaries(block, masks, more);
            if (boundaries > 1) {
                on_block(block, size_t(p - base), boundaries);
                p += 63 - count_leading_zeros(boundaries);
                continue;
            }
        }

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
// As for_each_pretoken_block (pretokenize.hpp), under any of the native patterns.
template <typename OnPretoken, typename OnBlock>
size_t for_each_pretoken_block_of(PretokenPattern pattern, const char* data, size_t size, size_t readable_size,
                                  OnPretoken&& on_pretoken, OnBlock&& on_block) {
    if (pattern == PretokenPattern::kGpt2) return for_each_pretoken_block(data, size, readable_size, on_pretoken, on_block);
    const size_t readable = readable_size < size ? size : readable_size;
    const auto scan = [&](auto end_run, auto path) {
        return detail::scan_gpt4_pretokens<decltype(end_run)::value, decltype(path)::value>(data, size, readable,
                                                                                           on_pretoken, on_block);
    };
    using EndRun = std::true_type;
    using NoEndRun = std::false_type;
    using Fast = std::integral_constant<ScannerPath, ScannerPath::kFast>;
    using Swar = std::integral_constant<ScannerPath, ScannerPath::kSwar>;
    using Scalar = std::integral_constant<ScannerPath, ScannerPath::kScalar>;
    const bool end_run = pattern == PretokenPattern::kCl100k;
    switch (scanner_path()) {
        case ScannerPath::kSwar:
            return end_run ? scan(EndRun{}, Swar{}) : scan(NoEndRun{}, Swar{});
        case ScannerPath::kScalar:
            return end_run ? scan(EndRun{}, Scalar{}) : scan(NoEndRun{}, Scalar{});
        default:
            return end_run ? scan(EndRun{}, Fast{}) : scan(NoEndRun{}, Fast{});
    }
}

template <typename OnPretoken>
size_t for_each_pretoken_of(PretokenPattern pattern, const char* data, size_t size, OnPretoken&& on_pretoken) {
    detail::EachPretokenOfBlock<OnPretoken> on_block{on_pretoken};
    return for_each_pretoken_block_of(pattern, data, size, size, on_pretoken, on_block);
}

// pretoken_ends (pretokenize.hpp) under `pattern`. Throws InvalidUtf8Error.
std::vector<size_t> pretoken_ends(std::string_view text, PretokenPattern pattern);

}  // namespace bpe
