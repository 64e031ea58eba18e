// GPT-4's pre-tokenization (tiktoken's cl100k_base, and rustbpe's variant of it) on UTF-8 bytes, and
// GPT-4o's (o200k_base, further down: scan_o200k_pretokens),
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
// (\p{L}, \p{N}, \s from cpp/scan/unicode_tables.hpp; \r and \n are the only newlines of the pattern, both
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

#include "scan/pretokenize.hpp"
#include "scan/pretokenize_superword.hpp"

namespace bpe {

// The pre-tokenizers the native scanners run (for_each_pretoken_block_of dispatches on them).
enum class PretokenPattern : int {
    kGpt2 = 0,
    kCl100k = 1,
    kRustbpe = 2,
    kO200k = 3,
    kSuperword = 4,
};

// Where the counter and the encoder may cut a scanner's text into chunks that split no pre-token
// (chunking.cpp), each at a position p not inside a special token:
//  * kAfterNonSpace: text[p] is ' ' or '\n' after a non-space character (GPT-2's: no alternative
//    takes whitespace after a non-space, and `(?!\S)` looks forward from inside the run only);
//  * kAfterLetterOrDigit: text[p] is ' ' or '\n' after an ASCII letter or digit (GPT-4's and
//    o200k's, whose punctuation takes the newlines after it);
//  * kAfterLineEnd: text[p] is neither '\r' nor '\n' and text[p - 1] is one (superword's: its runs
//    and the grouping of its numbers never cross a line end).
// The row of the scanner (cs336_basics/rules/pattern.py) says the same by its `cuts`: the first two
// are "whitespace", the last "line_ends" (chunk_cut_name); the bindings check the two agree.
enum class ChunkCut : int {
    kAfterNonSpace = 0,
    kAfterLetterOrDigit = 1,
    kAfterLineEnd = 2,
};

// The name of a cut as the rows' `cuts` spell it.
inline const char* chunk_cut_name(ChunkCut cut) noexcept {
    return cut == ChunkCut::kAfterLineEnd ? "line_ends" : "whitespace";
}

// Each scanner by the name the bindings find it by: a row's `scanner` in cs336_basics/pattern.py,
// the one list the bindings check the rows against when they load (pattern.check_native_scanners).
struct NamedScanner {
    std::string_view name;
    PretokenPattern pattern;
    ChunkCut cut;  // where its text may be cut into chunks
};
inline constexpr NamedScanner kNamedScanners[] = {
    {"gpt2", PretokenPattern::kGpt2, ChunkCut::kAfterNonSpace},
    {"cl100k", PretokenPattern::kCl100k, ChunkCut::kAfterLetterOrDigit},
    {"rustbpe", PretokenPattern::kRustbpe, ChunkCut::kAfterLetterOrDigit},
    {"o200k", PretokenPattern::kO200k, ChunkCut::kAfterLetterOrDigit},
    {"superword", PretokenPattern::kSuperword, ChunkCut::kAfterLineEnd},
};
inline constexpr size_t kNamedScannerCount = sizeof(kNamedScanners) / sizeof(kNamedScanners[0]);

// The scanner named `name` into `pattern`; false when there is none of that name.
inline bool find_named_scanner(std::string_view name, PretokenPattern& pattern) noexcept {
    for (const NamedScanner& scanner : kNamedScanners) {
        if (scanner.name == name) {
            pattern = scanner.pattern;
            return true;
        }
    }
    return false;
}

// The name of the scanner at `index` of kNamedScanners (index < kNamedScannerCount).
inline const char* named_scanner_name(size_t index) noexcept { return kNamedScanners[index].name.data(); }

// The name of the cut of the scanner at `index` of kNamedScanners (chunk_cut_name).
inline const char* named_scanner_cuts(size_t index) noexcept { return chunk_cut_name(kNamedScanners[index].cut); }

// Where `pattern`'s text may be cut (kNamedScanners' entry for it).
inline constexpr ChunkCut chunk_cut_of(PretokenPattern pattern) noexcept {
    for (const NamedScanner& scanner : kNamedScanners) {
        if (scanner.pattern == pattern) return scanner.cut;
    }
    return ChunkCut::kAfterNonSpace;  // every pattern has its entry (selftest.cpp checks)
}

// The Unicode table at `index` of unicode_tables::kTables (the bindings pass the index); throws
// std::invalid_argument past the last.
inline const unicode_tables::Table& unicode_table(unsigned index) {
    if (index >= unicode_tables::kTableCount) throw std::invalid_argument("no such Unicode table");
    return unicode_tables::kTables[index];
}

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

// The end of the pre-token that starts a whitespace run at `start`, whose first character ends at
// `p` and is followed by a character of class `next_cls` and `next_length` bytes (0: the text's
// end), under GPT-4's and o200k's rules: `\s++$` (cl100k's, `kEndRun`), `\s*[\r\n]+`, `\s+(?!\S)`,
// `\s+`. nullptr on invalid UTF-8, with `p` at the bad byte.
template <bool kEndRun>
inline const unsigned char* whitespace_pretoken_end(const unsigned char* start, const unsigned char*& p,
                                                    const unsigned char* end, unsigned next_length, uint8_t next_cls,
                                                    const unicode_tables::Table& unicode) {
    // Where the run ends, where its last character starts and where its last newline ends.
    const unsigned char* last = start;
    const unsigned char* after_newline = is_newline(*start) ? p : nullptr;
    if (next_length != 0 && next_cls == unicode_tables::kSpace) {
        last = p;
        p += next_length;
        if (is_newline(*last)) after_newline = p;
        while (p < end) {
            uint8_t cls;
            const unsigned length = read_char(p, end, cls, unicode);
            if (length == 0) return nullptr;
            if (cls != unicode_tables::kSpace) break;
            last = p;
            p += length;
            if (is_newline(*last)) after_newline = p;
        }
    }
    if (kEndRun && p == end) return p;                  // \s++$
    if (after_newline != nullptr) return after_newline;  // \s*[\r\n]
    if (p == end || last == start) return p;            // \s+(?!\S) at the end, or \s+ of one character
    return last;  // \s+(?!\S) gives back the last character, which starts the next pre-token
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
inline void classify_multibyte_gpt4(const unsigned char* p, BlockMasks& m, uint64_t& continuation,
                                    const unicode_tables::Table& unicode) {
    uint64_t pending = m.non_ascii;
    while (pending != 0) {
        const unsigned at = count_trailing_zeros(pending);
        uint8_t cls;
        const unsigned length = read_multibyte(p + at, p + kBlockBytes, cls, unicode);
        if (length == 0 || cls == unicode_tables::kSpace || cls == unicode_tables::kNumber) return;
        const uint64_t bytes = ((uint64_t(1) << length) - 1) << at;
        if (cls == unicode_tables::kLetter) m.letter |= bytes;
        continuation |= bytes & (bytes - 1);
        m.non_ascii &= ~bytes;
        pending &= ~bytes;
    }
}

// Bit 5 of each byte of the 64 at `p` (an ASCII letter's lower case), as SWAR builds it.
inline uint64_t case_bit_mask_swar(const unsigned char* p) {
    uint64_t case_bit = 0;
    for (unsigned word_index = 0; word_index < kBlockBytes / 8; ++word_index) {
        const uint64_t word = load_little_endian64(p + 8 * word_index);
        case_bit |= gather_high_bits((word << 2) & kHighBits) << (8 * word_index);
    }
    return case_bit;
}

// GPT-2's block masks and `extra` (its case bits only with kCaseBit): in one pass on SSE2's fast
// path, else a look at each control byte for the newlines and a pass of their own for the case bits.
template <ScannerPath kPath, bool kCaseBit>
BPE_ALWAYS_INLINE BlockMasks block_masks_gpt4(const unsigned char* p, NewlineAndCaseMasks& extra) {
#if defined(BPE_SSE2)
    if (kPath == ScannerPath::kFast) return block_masks_sse2<true, kCaseBit>(p, &extra);
#endif
    const BlockMasks m = kPath == ScannerPath::kFast ? block_masks_fast(p) : block_masks_swar(p);
    // \t..\r are rare beside ' ': one look at each byte tells newlines from the rest.
    extra.newline = 0;
    for (uint64_t controls = m.space & ~m.blank; controls != 0; controls &= controls - 1) {
        const unsigned at = count_trailing_zeros(controls);
        if (is_newline(p[at])) extra.newline |= uint64_t(1) << at;
    }
    extra.case_bit = kCaseBit ? case_bit_mask_swar(p) : 0;
    return m;
}

inline Gpt4Masks gpt4_masks(const unsigned char* p, BlockMasks& m, uint64_t newline,
                            const unicode_tables::Table& unicode) {
    Gpt4Masks g{};
    g.newline = newline;
    if (m.non_ascii != 0) classify_multibyte_gpt4(p, m, g.continuation, unicode);
    g.undecided = m.non_ascii;
    return g;
}

// The starts that cl100k's and o200k's block rules share: `\p{N}{1,3}` cut every three digits, and the
// whitespace alternatives (`white` = H and NL, `taken` = the NL runs punctuation takes before them).
BPE_ALWAYS_INLINE uint64_t number_and_whitespace_starts(uint64_t digit, uint64_t white, uint64_t horizontal,
                                                        uint64_t newline, uint64_t taken, uint64_t decided) {
    uint64_t digit_starts = digit & ~(digit << 1);
    const uint64_t three_digits = digit & (digit << 1) & (digit << 2);
    for (uint64_t step = digit_starts; step != 0;) {
        step = (step << 3) & three_digits;
        digit_starts |= step;
    }
    uint64_t starts = digit_starts;
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
    return starts;
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
    if (g.continuation != 0) {  // an ASCII block has none to carry through
        for (int byte = 1; byte < 4; ++byte) first_of_run |= (first_of_run << 1) & g.continuation;
    }
    const uint64_t lone_other = other & first_of_run;  // with a letter after it, a lone one

    uint64_t starts = letter & ~(letter << 1) & ~(horizontal << 1) & ~(lone_other << 1);
    starts |= other & ~(other << 1) & ~(blank << 1);
    starts |= number_and_whitespace_starts(digit, white, horizontal, newline, taken, decided);
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
// `data` may be read, never scanned past `size`. Not inlined into its callers (nor o200k's): the
// counter's and the encoder's loops hold every pattern's scanner, and inlined they grew past what GCC
// inlines into, which left GPT-2's read_multibyte a call (counting real_mix on one thread: 2.3% more
// instructions than before o200k, 1.4% with these two out of line).
template <bool kEndRun, ScannerPath kPath, typename OnPretoken, typename OnBlock>
BPE_NOINLINE size_t scan_gpt4_pretokens(const char* data, size_t size, size_t readable, OnPretoken& on_pretoken,
                           OnBlock& on_block, const unicode_tables::Table& unicode) {
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
            unsigned char padded[kBlockBytes];
            const unsigned char* block = block_at(p, end, base, readable, padded);
            NewlineAndCaseMasks extra;
            BlockMasks masks = block_masks_gpt4<kPath, false>(block, extra);
            const Gpt4Masks more = gpt4_masks(block, masks, extra.newline, unicode);
            const uint64_t boundaries = gpt4_block_boundaries(block, masks, more);
            if (boundaries > 1) {
                on_block(block, size_t(p - base), boundaries);
                p += 63 - count_leading_zeros(boundaries);
                continue;
            }
        }

        const unsigned char* const start = p;
        uint8_t cls;
        unsigned length = read_char(p, end, cls, unicode);
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
            if (!skip_run<true>(p, end, kLetter, unicode)) return size_t(p - base);
            emit(start, p);
            continue;
        }
        if (cls == kNumber) {  // \p{N}{1,3}: a run is cut every three characters
            for (int more = 0; more < 2 && p < end; ++more) {
                uint8_t next_cls;
                length = read_char(p, end, next_cls, unicode);
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
            next_length = read_char(p, end, next_cls, unicode);
            if (next_length == 0) return size_t(p - base);
        }
        if (next_length != 0 && next_cls == kLetter && !is_newline(*start)) {
            p += next_length;
            if (!skip_run<true>(p, end, kLetter, unicode)) return size_t(p - base);
            emit(start, p);
            continue;
        }
        if (cls == kOther || (*start == ' ' && next_length != 0 && next_cls == kOther)) {
            // ` ?[^\s\p{L}\p{N}]++[\r\n]*`
            if (cls != kOther) p += next_length;
            if (!skip_run<true>(p, end, kOther, unicode)) return size_t(p - base);
            while (p < end && is_newline(*p)) ++p;
            emit(start, p);
            continue;
        }

        const unsigned char* const to = whitespace_pretoken_end<kEndRun>(start, p, end, next_length, next_cls, unicode);
        if (to == nullptr) return size_t(p - base);
        emit(start, to);
        p = to;
    }
    return kValidUtf8;
}

// ---------------------------------------------------------------------------------------------
// o200k (GPT-4o): tiktoken's o200k_base pat_str (cs336_basics/pattern.py), as `regex` matches it:
//
//     [^\r\n\p{L}\p{N}]?UP*LO+C?|[^\r\n\p{L}\p{N}]?UP+LO*C?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*
//     |\s*[\r\n]+|\s+(?!\S)|\s+
//
// with UP = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], LO = [\p{Ll}\p{Lm}\p{Lo}\p{M}] (unicode_tables'
// LetterCase: bit 0 in UP, bit 1 in LO) and C the contractions (?i:'s|'t|'re|'ve|'m|'ll|'d). A
// character "with a case" is in UP or LO: every letter, and the marks (\p{M}, no letter: "other" to
// the prefix and to punctuation runs). Worked out from the backtracking order:
//  * from a character with a case, the pre-token is its "word" (o200k_word_end) and a contraction:
//    the UP run, then the LO run if a lower-only letter (Ll) follows it; else up to the run's last
//    character in both classes (Lm, Lo, a mark); else the whole run (upper-only letters, `UP+`). A
//    mark that starts a pre-token is such a character, not a prefix;
//  * any other character but \r \n (a space, a symbol) before a character with a case is the prefix;
//  * the rest is GPT-4's (digits in threes, ` ?` and a punctuation run, marks in it, taking \r \n and
//    '/' after it; whitespace without `\s++$`).

// read_multibyte (pretokenize.hpp) under o200k: the character's class and case from one lookup
// (unicode_tables::class_and_case), or 0 if invalid.
inline unsigned read_multibyte_o200k(const unsigned char* p, const unsigned char* end, uint8_t& class_and_case,
                                     const unicode_tables::Table& unicode) {
    uint32_t code_point;
    const unsigned length = decode_multibyte(p, end, code_point);
    if (length != 0) class_and_case = unicode_tables::class_and_case(code_point, unicode);
    return length;
}

// read_char (pretokenize.hpp) that also gives o200k's case of the character (unicode_tables::LetterCase).
inline unsigned read_char_o200k(const unsigned char* p, const unsigned char* end, uint8_t& cls, uint8_t& letter_case,
                                const unicode_tables::Table& unicode) {
    if (*p < 0x80) {
        cls = kAscii.classes[*p];
        letter_case = cls != unicode_tables::kLetter ? unicode_tables::kNoCase
                      : (*p & 0x20) != 0             ? unicode_tables::kLower
                                                     : unicode_tables::kUpper;
        return 1;
    }
    uint8_t class_and_case;
    const unsigned length = read_multibyte_o200k(p, end, class_and_case, unicode);
    if (length == 0) return 0;
    cls = class_and_case & ((1u << unicode_tables::kCaseShift) - 1);
    letter_case = class_and_case >> unicode_tables::kCaseShift;
    return length;
}

inline bool is_ascii_lower(unsigned char byte) { return byte >= 'a' && byte <= 'z'; }

// The end of the word `UP*LO+` (else `UP+LO*`) from `t`, a character with a case; nullptr on invalid
// UTF-8, with `t` at the bad byte.
inline const unsigned char* o200k_word_end(const unsigned char*& t, const unsigned char* end,
                                           const unicode_tables::Table& unicode) {
    using unicode_tables::kEitherCase;
    using unicode_tables::kLower;
    using unicode_tables::kUpper;
    const unsigned char*& p = t;
    const unsigned char* after_either = nullptr;  // after the UP run's last character also in LO
    uint8_t cls, letter_case = unicode_tables::kNoCase;
    unsigned length = 0;
    while (p < end) {
        length = read_char_o200k(p, end, cls, letter_case, unicode);
        if (length == 0) return nullptr;
        if ((letter_case & kUpper) == 0) break;
        p += length;
        if (letter_case == kEitherCase) after_either = p;
        letter_case = unicode_tables::kNoCase;
    }
    if (letter_case != kLower) return after_either != nullptr ? after_either : p;
    p += length;  // LO+ from the first lower-only letter, to the first character not in LO
    for (;;) {
        while (p < end && is_ascii_lower(*p)) ++p;
        if (p >= end) return p;
        length = read_char_o200k(p, end, cls, letter_case, unicode);
        if (length == 0) return nullptr;
        if ((letter_case & kLower) == 0) return p;
        p += length;
    }
}

// The contraction after a word at `p`: its length with the apostrophe, or 0.
inline unsigned o200k_contraction(const unsigned char* p, const unsigned char* end) {
    if (p >= end || *p != '\'') return 0;
    const unsigned suffix = contraction_suffix_ci(p + 1, end);
    return suffix != 0 ? 1 + suffix : 0;
}

// The o200k masks beyond GPT-4's: `upper`, letters in UP only, and `both`, letters in UP and LO (Lm,
// Lo; the rest of `letter` is in LO only). The marks, in both classes but no letter (a prefix, part
// of a punctuation run), are left undecided.
struct O200kMasks {
    uint64_t upper;
    uint64_t both;
};

// The values of unicode_tables::class_and_case that classify_multibyte_o200k leaves undecided: the
// spaces and numbers (of any case bits), and "other" with a case (the marks).
constexpr uint16_t undecided_o200k_classes() {
    uint16_t undecided = 0;
    for (unsigned value = 0; value < 16; ++value) {
        const unsigned cls = value & ((1u << unicode_tables::kCaseShift) - 1);
        const unsigned letter_case = value >> unicode_tables::kCaseShift;
        if (cls == unicode_tables::kSpace || cls == unicode_tables::kNumber ||
            (cls == unicode_tables::kOther && letter_case != unicode_tables::kNoCase)) {
            undecided |= uint16_t(1u << value);
        }
    }
    return undecided;
}

// classify_multibyte_gpt4 for o200k: it also stops at a mark, and marks the letters of each case.
inline void classify_multibyte_o200k(const unsigned char* p, BlockMasks& m, uint64_t& continuation, O200kMasks& o,
                                     const unicode_tables::Table& unicode) {
    using unicode_tables::kCaseShift;
    constexpr uint16_t kUndecided = undecided_o200k_classes();
    uint64_t pending = m.non_ascii;
    while (pending != 0) {
        const unsigned at = count_trailing_zeros(pending);
        uint8_t class_and_case;
        const unsigned length = read_multibyte_o200k(p + at, p + kBlockBytes, class_and_case, unicode);
        if (length == 0 || ((kUndecided >> class_and_case) & 1) != 0) return;
        const unsigned cls = class_and_case & ((1u << kCaseShift) - 1);
        const unsigned letter_case = class_and_case >> kCaseShift;
        const uint64_t bytes = ((uint64_t(1) << length) - 1) << at;
        if (cls == unicode_tables::kLetter) m.letter |= bytes;
        if (letter_case == unicode_tables::kUpper) o.upper |= bytes;
        if (letter_case == unicode_tables::kEitherCase) o.both |= bytes;
        continuation |= bytes & (bytes - 1);
        m.non_ascii &= ~bytes;
        pending &= ~bytes;
    }
}

// The '/' bytes of the 64 at `p`: asked for only where a punctuation run's newlines are followed by one.
template <bool kSse2>
inline uint64_t slash_mask(const unsigned char* p) {
    uint64_t slash = 0;
#if defined(BPE_SSE2)
    if (kSse2) {
        for (unsigned lane = 0; lane < kBlockBytes / 16; ++lane) {
            const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * lane));
            slash |= uint64_t(unsigned(_mm_movemask_epi8(_mm_cmpeq_epi8(bytes, _mm_set1_epi8('/'))))) << (16 * lane);
        }
        return slash;
    }
#endif
    for (unsigned word_index = 0; word_index < kBlockBytes / 8; ++word_index) {
        const uint64_t word = load_little_endian64(p + 8 * word_index);
        const uint64_t ascii = ~word & kHighBits;
        const uint64_t is_slash = ~(((word & kLowBits) ^ repeat_byte('/')) + kLowBits) & ascii;
        slash |= gather_high_bits(is_slash) << (8 * word_index);
    }
    return slash;
}

BPE_ALWAYS_INLINE Gpt4Masks o200k_masks(const unsigned char* p, BlockMasks& m, const NewlineAndCaseMasks& extra,
                                        O200kMasks& o, const unicode_tables::Table& unicode) {
    Gpt4Masks g{};
    g.newline = extra.newline;
    o.upper = m.letter & ~extra.case_bit;  // ASCII letters so far
    o.both = 0;
    if (m.non_ascii != 0) classify_multibyte_o200k(p, m, g.continuation, o, unicode);
    g.undecided = m.non_ascii;
    return g;
}

// gpt4_block_boundaries under o200k. The differences:
//  * a letter run also starts a pre-token at an upper-only letter (U) in a word's LO run: after a
//    lower-only letter (l) and any letters of both classes (B) after it; and at the U run that ends
//    a word's UP run after a B, where a non-letter follows (the word ends after its last B);
//  * the newlines a punctuation run takes are a run of \r \n '/' after it (`[\r\n/]*`), whose '/'
//    then neither continues the punctuation run nor starts one;
//  * a contraction is a suffix: an apostrophe right after a letter takes it, unless that letter ends
//    a contraction itself (then the apostrophe starts the next pre-token, a prefix before letters).
template <bool kSse2>
BPE_ALWAYS_INLINE uint64_t o200k_block_boundaries(const unsigned char* p, const BlockMasks& m, const Gpt4Masks& g,
                                       const O200kMasks& o) {
    constexpr uint64_t kDecidable = (uint64_t(1) << (kBlockBytes - 2)) - 1;
    const uint64_t letter = m.letter, digit = m.digit, blank = m.blank, newline = g.newline;
    const uint64_t white = m.space;
    const uint64_t horizontal = white & ~newline;
    const uint64_t other = ~(letter | digit | m.space | m.non_ascii);
    const uint64_t undecided = g.undecided;
    uint64_t decided = kDecidable & (undecided != 0 ? (undecided & (~undecided + 1)) - 1 : ~uint64_t(0));
    const unsigned edge = undecided != 0 ? count_trailing_zeros(undecided) : 64;
    if (edge > 0 && (white >> (edge - 1)) & 1) {
        const uint64_t below = edge - 1 == 0 ? 0 : ~white & ((uint64_t(1) << (edge - 1)) - 1);
        const unsigned run_start = below == 0 ? 0 : 64 - count_leading_zeros(below);
        decided &= (uint64_t(1) << run_start) - 1;
    }
    if (decided == 0) return 0;

    // What a punctuation run takes: each run of \r \n '/' from a newline right after it, carried
    // through to the run's end. A newline after a taken '/' is such a seed too, inside the run: the
    // carry passes it with its bit set, so the seeds are added back.
    const uint64_t seeds = (other << 1) & newline;
    uint64_t taken_kind = newline;
    // A '/' is taken only after such a newline run: the byte after each is looked at before the mask is built.
    for (uint64_t after = (newline + seeds) & other; after != 0; after &= after - 1) {
        if (p[count_trailing_zeros(after)] == '/') {
            taken_kind |= slash_mask<kSse2>(p);
            break;
        }
    }
    const uint64_t taken = (((taken_kind + seeds) ^ taken_kind) & taken_kind) | seeds;
    const uint64_t free_other = other & ~taken;

    uint64_t first_of_run = ~g.continuation & ~(free_other << 1) & ~(blank << 1);
    if (g.continuation != 0) {  // an ASCII block has none to carry through
        for (int byte = 1; byte < 4; ++byte) first_of_run |= (first_of_run << 1) & g.continuation;
    }
    const uint64_t lone_other = free_other & first_of_run;

    // Contractions first: a word ends after its contraction, so the letters of a suffix neither
    // continue nor start a word's case runs.
    uint64_t contraction = 0, after_contraction = 0;
    unsigned suffix_end = 0;  // where the last contraction ended
    for (uint64_t quotes = m.apostrophe & (letter << 1) & decided; quotes != 0; quotes &= quotes - 1) {
        const unsigned at = count_trailing_zeros(quotes);
        if (at == suffix_end) continue;
        const unsigned suffix = contraction_suffix_ci(p + at + 1, p + kBlockBytes);
        if (suffix == 0) continue;
        contraction |= ((uint64_t(1) << (suffix + 1)) - 1) << at;
        suffix_end = at + 1 + suffix;
        if (suffix_end < 64) after_contraction |= uint64_t(1) << suffix_end;
    }
    const uint64_t word = letter & ~contraction;
    const uint64_t upper = o.upper & ~contraction, both = o.both & ~contraction;

    uint64_t starts = word & ~(word << 1) & ~(horizontal << 1) & ~(lone_other << 1);
    // The LO runs: each l, and the B run right after it (one carry each).
    const uint64_t lower = word & ~upper & ~both;
    const uint64_t lower_phase = lower | (((both + ((lower << 1) & both)) ^ both) & both);
    starts |= upper & (lower_phase << 1);
    // A U run after a B of an UP run, ending at what is known to be no letter (nor undecided).
    for (uint64_t seeds = ((both & ~lower_phase) << 1) & upper; seeds != 0; seeds &= seeds - 1) {
        const uint64_t seed = seeds & (~seeds + 1);
        const uint64_t after_run = (upper + seed) & ~upper;
        if ((after_run & ~letter & ~m.non_ascii) != 0) starts |= seed;
    }
    starts |= free_other & ~(free_other << 1) & ~(blank << 1);
    starts |= number_and_whitespace_starts(digit, white, horizontal, newline, taken, decided);
    starts = (starts & ~contraction) | after_contraction;
    return (starts | 1) & decided;
}

// As scan_gpt4_pretokens, under o200k.
template <ScannerPath kPath, typename OnPretoken, typename OnBlock>
BPE_NOINLINE size_t scan_o200k_pretokens(const char* data, size_t size, size_t readable, OnPretoken& on_pretoken,
                            OnBlock& on_block, const unicode_tables::Table& unicode) {
    using unicode_tables::kNumber;
    using unicode_tables::kOther;
    const auto* const base = reinterpret_cast<const unsigned char*>(data);
    const unsigned char* const end = base + size;
    const unsigned char* p = base;
    const auto emit = [&](const unsigned char* from, const unsigned char* to) {
        on_pretoken(size_t(from - base), size_t(to - base));
    };
    while (p < end) {
        if (kPath != ScannerPath::kScalar) {
            unsigned char padded[kBlockBytes];
            const unsigned char* block = block_at(p, end, base, readable, padded);
            NewlineAndCaseMasks extra;
            BlockMasks masks = block_masks_gpt4<kPath, true>(block, extra);
            O200kMasks cases;
            const Gpt4Masks more = o200k_masks(block, masks, extra, cases, unicode);
            const uint64_t boundaries = o200k_block_boundaries<kPath == ScannerPath::kFast>(block, masks, more, cases);
            if (boundaries > 1) {
                on_block(block, size_t(p - base), boundaries);
                p += 63 - count_leading_zeros(boundaries);
                continue;
            }
        }

        const unsigned char* const start = p;
        uint8_t cls, letter_case;
        unsigned length = read_char_o200k(p, end, cls, letter_case, unicode);
        if (length == 0) return size_t(p - base);

        // A word: from here, or after a prefix (anything but \r \n, letters and numbers).
        const unsigned char* word = nullptr;
        uint8_t next_cls = unicode_tables::kSpace;
        unsigned next_length = 0;
        if (letter_case != 0) {
            word = start;
        } else if (cls != kNumber && !is_newline(*start)) {
            p += length;
            if (p < end) {
                uint8_t next_case;
                next_length = read_char_o200k(p, end, next_cls, next_case, unicode);
                if (next_length == 0) return size_t(p - base);
                if (next_case != 0) word = p;
            }
            p = start;
        }
        if (word != nullptr) {
            const unsigned char* to = o200k_word_end(word, end, unicode);
            if (to == nullptr) return size_t(word - base);
            to += o200k_contraction(to, end);
            emit(start, to);
            p = to;
            continue;
        }
        p += length;

        if (cls == kNumber) {  // \p{N}{1,3}
            for (int more = 0; more < 2 && p < end; ++more) {
                length = read_char(p, end, next_cls, unicode);
                if (length == 0) return size_t(p - base);
                if (next_cls != kNumber) break;
                p += length;
            }
            emit(start, p);
            continue;
        }
        if (is_newline(*start) && p < end) {  // the prefix's look at the next character was skipped
            next_length = read_char(p, end, next_cls, unicode);
            if (next_length == 0) return size_t(p - base);
        }
        if (cls == kOther || (*start == ' ' && next_length != 0 && next_cls == kOther)) {
            // ` ?[^\s\p{L}\p{N}]+[\r\n/]*`, marks in the run
            if (cls != kOther) p += next_length;
            if (!skip_run<true>(p, end, kOther, unicode)) return size_t(p - base);
            while (p < end && (is_newline(*p) || *p == '/')) ++p;
            emit(start, p);
            continue;
        }
        const unsigned char* const to = whitespace_pretoken_end<false>(start, p, end, next_length, next_cls, unicode);
        if (to == nullptr) return size_t(p - base);
        emit(start, to);
        p = to;
    }
    return kValidUtf8;
}

}  // namespace detail

// for_each_pretoken (pretokenize.hpp) under any of the native patterns: `on_pretoken(begin, end)`
// for each pre-token in order; kValidUtf8, or the offset of the first invalid byte.
// As for_each_pretoken_block (pretokenize.hpp), under any of the native patterns.
template <typename OnPretoken, typename OnBlock>
size_t for_each_pretoken_block_of(PretokenPattern pattern, const char* data, size_t size, size_t readable_size,
                                  OnPretoken&& on_pretoken, OnBlock&& on_block,
                                  const unicode_tables::Table& unicode = unicode_tables::kTables[0]) {
    if (pattern == PretokenPattern::kGpt2) {
        return for_each_pretoken_block(data, size, readable_size, on_pretoken, on_block, unicode);
    }
    const size_t readable = readable_size < size ? size : readable_size;
    const auto scan = [&](auto end_run, auto path) {
        return detail::scan_gpt4_pretokens<decltype(end_run)::value, decltype(path)::value>(
            data, size, readable, on_pretoken, on_block, unicode);
    };
    using EndRun = std::true_type;
    using NoEndRun = std::false_type;
    using Swar = std::integral_constant<ScannerPath, ScannerPath::kSwar>;
    using Scalar = std::integral_constant<ScannerPath, ScannerPath::kScalar>;
    using Fast = std::integral_constant<ScannerPath, ScannerPath::kFast>;
    if (pattern == PretokenPattern::kSuperword) {
        switch (scanner_path()) {
            case ScannerPath::kSwar:
                return detail::scan_superword_pretokens<ScannerPath::kSwar>(data, size, readable, on_pretoken,
                                                                           on_block, unicode);
            case ScannerPath::kScalar:
                return detail::scan_superword_pretokens<ScannerPath::kScalar>(data, size, readable, on_pretoken,
                                                                             on_block, unicode);
            default:
                return detail::scan_superword_pretokens<ScannerPath::kFast>(data, size, readable, on_pretoken,
                                                                           on_block, unicode);
        }
    }
    if (pattern == PretokenPattern::kO200k) {
        switch (scanner_path()) {
            case ScannerPath::kSwar:
                return detail::scan_o200k_pretokens<ScannerPath::kSwar>(data, size, readable, on_pretoken, on_block,
                                                                       unicode);
            case ScannerPath::kScalar:
                return detail::scan_o200k_pretokens<ScannerPath::kScalar>(data, size, readable, on_pretoken, on_block,
                                                                       unicode);
            default:
                return detail::scan_o200k_pretokens<ScannerPath::kFast>(data, size, readable, on_pretoken, on_block,
                                                                       unicode);
        }
    }
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
size_t for_each_pretoken_of(PretokenPattern pattern, const char* data, size_t size, OnPretoken&& on_pretoken,
                            const unicode_tables::Table& unicode = unicode_tables::kTables[0]) {
    detail::EachPretokenOfBlock<OnPretoken> on_block{on_pretoken};
    return for_each_pretoken_block_of(pattern, data, size, size, on_pretoken, on_block, unicode);
}

// pretoken_ends (pretokenize.hpp) under `pattern`. Throws InvalidUtf8Error.
// `unicode_table`: an index into unicode_tables::kTables.
std::vector<size_t> pretoken_ends(std::string_view text, PretokenPattern pattern, unsigned unicode_table = 0);

}  // namespace bpe
