// SuperBPE's second-stage pre-tokenization (the `superword` row of cs336_basics/rules/pattern.py) on
// UTF-8 bytes, exactly as `regex.finditer` splits text with
//
//     \p{N}{1,3}(?=(?:\p{N}{3})*(?!\p{N}))|[^\r\n\p{N}]+|[\r\n]+
//
// Every character is in one of three classes: N (\p{N}, by the Unicode table given), NL (\r \n) and
// O (anything else). The pre-tokens are the runs of O and the runs of NL whole, and each run of N in
// groups of three characters counted from its end: a run of n characters first gives its
// ((n - 1) % 3) + 1 characters (the lookahead lets `\p{N}{1,3}` take no more than leaves a multiple
// of three), then threes. Nothing looks behind, so from any pre-token's start the rest splits alike.
//
// A run of O is most often a whole line: the scanner skips it with the 64-byte masks of the bytes
// that can end it (\r, \n, an ASCII digit, a byte >= 0x80, whose character is decoded and ends the
// run only as a number), built with SSE2 (NEON) on the fast path and SWAR on the other; the scalar
// path goes a byte at a time. Where pre-tokens are short (numbers, blank lines) a block path decides
// the starts of a 64-byte block from its masks (superword_block_boundaries) and reports them as one
// on_block call, as GPT-2's and GPT-4's scanners do.
//
// Errors as the other scanners (pretokenize.hpp): the offset of the first byte that does not start a
// valid character; every path reports the pre-tokens wholly before the one that holds it, and no other.
#pragma once

#include <cstddef>
#include <cstdint>

#include "scan/pretokenize.hpp"

namespace bpe {
namespace detail {

// The masks of a 64-byte block that the superword rules read.
struct SuperwordMasks {
    uint64_t digit;      // 0-9 (and, after classify_multibyte_superword, nothing else)
    uint64_t newline;    // \r \n
    uint64_t non_ascii;  // bytes >= 0x80 (after classify_multibyte_superword: those left undecided)
};

#if defined(BPE_SSE2)
inline SuperwordMasks superword_masks_sse2(const unsigned char* p) {
    SuperwordMasks m{};
    for (unsigned lane = 0; lane < kBlockBytes / 16; ++lane) {
        const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * lane));
        // Signed compares: bytes >= 0x80 are negative, so never a digit.
        const __m128i digit = _mm_and_si128(_mm_cmpgt_epi8(bytes, _mm_set1_epi8('0' - 1)),
                                            _mm_cmplt_epi8(bytes, _mm_set1_epi8('9' + 1)));
        const __m128i newline =
            _mm_or_si128(_mm_cmpeq_epi8(bytes, _mm_set1_epi8('\n')), _mm_cmpeq_epi8(bytes, _mm_set1_epi8('\r')));
        const unsigned shift = 16 * lane;
        m.digit |= uint64_t(unsigned(_mm_movemask_epi8(digit))) << shift;
        m.newline |= uint64_t(unsigned(_mm_movemask_epi8(newline))) << shift;
        m.non_ascii |= uint64_t(unsigned(_mm_movemask_epi8(bytes))) << shift;
    }
    return m;
}
#endif

inline SuperwordMasks superword_masks_swar(const unsigned char* p) {
    SuperwordMasks m{};
    for (unsigned word_index = 0; word_index < kBlockBytes / 8; ++word_index) {
        const uint64_t word = load_little_endian64(p + 8 * word_index);
        const uint64_t non_ascii = word & kHighBits;
        const uint64_t ascii = ~non_ascii & kHighBits;
        const uint64_t x = word & kLowBits;
        const uint64_t digit = (x + repeat_byte(0x80 - '0')) & ~(x + repeat_byte(0x7F - '9')) & ascii;
        const uint64_t newline =
            (~((x ^ repeat_byte('\n')) + kLowBits) | ~((x ^ repeat_byte('\r')) + kLowBits)) & ascii;
        const unsigned shift = 8 * word_index;
        m.digit |= gather_high_bits(digit) << shift;
        m.newline |= gather_high_bits(newline) << shift;
        m.non_ascii |= gather_high_bits(non_ascii) << shift;
    }
    return m;
}

// The masks on `kPath` (not kScalar): SSE2 on the fast path where the compiler targets it; NEON's
// GPT-2 masks and a look at each control byte for the newlines; else SWAR.
template <ScannerPath kPath>
BPE_ALWAYS_INLINE SuperwordMasks superword_masks(const unsigned char* p) {
#if defined(BPE_SSE2)
    if (kPath == ScannerPath::kFast) return superword_masks_sse2(p);
#elif defined(BPE_NEON)
    if (kPath == ScannerPath::kFast) {
        const BlockMasks gpt2 = block_masks_neon(p);
        SuperwordMasks m{gpt2.digit, 0, gpt2.non_ascii};
        for (uint64_t controls = gpt2.space & ~gpt2.blank; controls != 0; controls &= controls - 1) {
            const unsigned at = count_trailing_zeros(controls);
            if (p[at] == '\n' || p[at] == '\r') m.newline |= uint64_t(1) << at;
        }
        return m;
    }
#endif
    return superword_masks_swar(p);
}

// The bytes of a valid character whose lead byte is `lead`.
inline unsigned utf8_length(unsigned char lead) { return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4; }

// Advances `p` over a run of O ([^\r\n\p{N}]) to the first character that is not in it (or `end`);
// false, with `p` at the bad byte, on invalid UTF-8. Reads nothing at or past `end`.
template <ScannerPath kPath>
inline bool skip_superword_run(const unsigned char*& p, const unsigned char* end, const unicode_tables::Table& unicode) {
    using unicode_tables::kNumber;
    if (kPath != ScannerPath::kScalar) {
        while (end - p >= ptrdiff_t(kBlockBytes)) {
            const SuperwordMasks m = superword_masks<kPath>(p);
            uint64_t stops = m.digit | m.newline | m.non_ascii;
            unsigned passed = 0;  // bytes of the block known to be in the run
            for (;;) {
                stops &= ~uint64_t(0) << passed;
                if (stops == 0) {
                    passed = kBlockBytes;
                    break;
                }
                const unsigned at = count_trailing_zeros(stops);
                if (p[at] < 0x80) {  // \r \n or a digit
                    p += at;
                    return true;
                }
                uint8_t cls;
                const unsigned length = read_multibyte(p + at, end, cls, unicode);
                if (length == 0 || cls == kNumber) {
                    p += at;
                    return length != 0;
                }
                passed = at + length;
                if (passed >= kBlockBytes) break;
            }
            p += passed;
        }
    }
    while (p < end) {
        const unsigned char byte = *p;
        if (byte < 0x80) {
            if (byte == '\r' || byte == '\n' || (byte >= '0' && byte <= '9')) return true;
            ++p;
            continue;
        }
        uint8_t cls;
        const unsigned length = read_multibyte(p, end, cls, unicode);
        if (length == 0) return false;
        if (cls == kNumber) return true;
        p += length;
    }
    return true;
}

// Gives the block's multi-byte characters that are no number the class O (they leave `non_ascii`),
// up to the first that is a number (a number's groups count characters, which the block rules count
// as bytes), is not valid UTF-8 or runs past the block.
inline void classify_multibyte_superword(const unsigned char* p, SuperwordMasks& m, const unicode_tables::Table& unicode) {
    uint64_t pending = m.non_ascii;
    while (pending != 0) {
        const unsigned at = count_trailing_zeros(pending);
        uint8_t cls;
        const unsigned length = read_multibyte(p + at, p + kBlockBytes, cls, unicode);
        if (length == 0 || cls == unicode_tables::kNumber) return;
        const uint64_t bytes = ((uint64_t(1) << length) - 1) << at;  // length <= 4 and at + length <= 64
        m.non_ascii &= ~bytes;
        pending &= ~bytes;
    }
}

// Pre-token starts in the 64 bytes at `p`, given that one starts at `p`, as block_boundaries gives
// GPT-2's (bit 0 set unless nothing could be decided; only starts before the first undecided byte and
// before byte 62). With the classes N (ASCII digits here), NL and O of each byte:
//  * a run of one class starts a pre-token, and is decided where the next run starts at a decided
//    byte: a run that touches the first undecided byte, or byte 62, is left whole to what comes next
//    (the block's last start is where that run begins);
//  * a decided run of N of n bytes also starts one at each multiple of three bytes before its end,
//    after its first byte: (n - 1) % 3 + 1 bytes, then threes.
inline uint64_t superword_block_boundaries(const SuperwordMasks& m) {
    constexpr uint64_t kDecidable = (uint64_t(1) << (kBlockBytes - 2)) - 1;
    const uint64_t undecided = m.non_ascii;
    const uint64_t decided = kDecidable & (undecided != 0 ? (undecided & (~undecided + 1)) - 1 : ~uint64_t(0));
    const uint64_t digit = m.digit, newline = m.newline;
    uint64_t starts = (digit ^ (digit << 1)) | (newline ^ (newline << 1));
    // The groups of each decided run of digits, counted back from the byte after it.
    const uint64_t three_digits = digit & (digit >> 1) & (digit >> 2);
    const uint64_t not_first = digit << 1;  // a digit before: no run's first byte
    for (uint64_t group = (digit << 1) & ~digit & decided; group != 0;) {
        group = (group >> 3) & three_digits & not_first;
        starts |= group;
    }
    return (starts | 1) & decided;
}

// As scan_gpt4_pretokens (pretokenize_gpt4.hpp), under the superword pattern. Not inlined into its
// callers, as the GPT-4 scanners are not.
template <ScannerPath kPath, typename OnPretoken, typename OnBlock>
BPE_NOINLINE size_t scan_superword_pretokens(const char* data, size_t size, size_t readable, OnPretoken& on_pretoken,
                                             OnBlock& on_block, const unicode_tables::Table& unicode) {
    using unicode_tables::kNumber;
    const auto* const base = reinterpret_cast<const unsigned char*>(data);
    const unsigned char* const end = base + size;
    const unsigned char* p = base;
    const auto emit = [&](const unsigned char* from, const unsigned char* to) {
        on_pretoken(size_t(from - base), size_t(to - base));
    };
    while (p < end) {
        if (kPath != ScannerPath::kScalar) {
            // The text's last bytes as a copy padded with 0x80, which starts no character: the run
            // that reaches the text's end is left undecided, to the state machine.
            unsigned char padded[kBlockBytes];
            const unsigned char* block = block_at(p, end, base, readable, padded);
            SuperwordMasks masks = superword_masks<kPath>(block);
            if (masks.non_ascii != 0) classify_multibyte_superword(block, masks, unicode);
            const uint64_t boundaries = superword_block_boundaries(masks);
            if (boundaries > 1) {
                on_block(block, size_t(p - base), boundaries);
                p += 63 - count_leading_zeros(boundaries);
                continue;
            }
        }

        // One run, character by character.
        const unsigned char* const start = p;
        if (*start == '\r' || *start == '\n') {  // [\r\n]+
            ++p;
            while (p < end && (*p == '\r' || *p == '\n')) ++p;
            emit(start, p);
            continue;
        }
        uint8_t cls;
        unsigned length = read_char(p, end, cls, unicode);
        if (length == 0) return size_t(p - base);
        p += length;
        if (cls != kNumber) {  // [^\r\n\p{N}]+
            if (!skip_superword_run<kPath>(p, end, unicode)) return size_t(p - base);
            emit(start, p);
            continue;
        }
        // A run of numbers: counted to its end, then cut in threes from there.
        size_t characters = 1;
        while (p < end) {
            if (*p < 0x80) {
                if (*p < '0' || *p > '9') break;
                ++p;
            } else {
                length = read_multibyte(p, end, cls, unicode);
                if (length == 0) return size_t(p - base);
                if (cls != kNumber) break;
                p += length;
            }
            ++characters;
        }
        const unsigned char* from = start;
        for (size_t group = (characters - 1) % 3 + 1; from < p; group = 3) {
            const unsigned char* to = from;
            for (size_t taken = 0; taken < group; ++taken) to += utf8_length(*to);
            emit(from, to);
            from = to;
        }
    }
    return kValidUtf8;
}

}  // namespace detail
}  // namespace bpe
