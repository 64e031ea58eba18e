// GPT-2 pre-tokenization on UTF-8 bytes, exactly as `regex.finditer` splits text with
//
//     '(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// but as a hand-written state machine that decodes UTF-8 on the fly (no regex engine, no copies).
// Every character matches some alternative, so the pre-tokens tile the text: each starts where the
// previous one ended. The character classes come from cpp/scan/unicode_tables.hpp, generated from the
// same `regex` package the Python pre-tokenizer uses.
//
// Speed: the scanner first tries a 64-byte block at a time. It classifies the block's bytes into bit
// masks (SSE2 or NEON where the compiler targets it, else SWAR on 64-bit words), gives each multi-byte
// character's bytes the class of the character (classify_multibyte), and derives every pre-token
// start in the block from the masks with a few shifts (block_boundaries); the character-at-a-time
// state machine below handles what the block rules cannot decide (non-ASCII spaces, invalid UTF-8,
// pre-tokens running past the block). Both give the same pre-tokens: the tests compare
// every path against `regex`, switching paths at run time with set_scanner_path.
//
// Errors: the visitor-based core returns the offset of the first byte that does not start a valid
// UTF-8 character (what Python reports as UnicodeDecodeError.start); the convenience functions throw
// InvalidUtf8Error carrying that offset. Overlong forms, surrogates and code points past U+10FFFF
// are invalid, as in Python's strict decoder.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "kit/bits.hpp"
#include "scan/unicode_tables.hpp"

#if defined(BPE_SSE2)
#include <emmintrin.h>
#elif defined(BPE_NEON)
#include <arm_neon.h>
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

// Decodes the multi-byte character at `p` (*p >= 0x80); returns its length and sets `code_point`, or
// returns 0 if `p` does not start a valid character. Always inlined: read_multibyte stays the size
// it was for the loops it is inlined into.
BPE_ALWAYS_INLINE unsigned decode_multibyte(const unsigned char* p, const unsigned char* end, uint32_t& code_point) {
    const unsigned char lead = *p;
    const ptrdiff_t available = end - p;
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
    return length;
}

// decode_multibyte giving the character's class: its length and `cls`, or 0 if invalid.
inline unsigned read_multibyte(const unsigned char* p, const unsigned char* end, uint8_t& cls,
                               const unicode_tables::Table& unicode) {
    uint32_t code_point;
    const unsigned length = decode_multibyte(p, end, code_point);
    if (length != 0) cls = unicode_tables::classify(code_point, unicode);
    return length;
}

// Length of the character at `p` (p < end) and its class, or 0 if invalid.
inline unsigned read_char(const unsigned char* p, const unsigned char* end, uint8_t& cls,
                          const unicode_tables::Table& unicode) {
    cls = kAscii.classes[*p];
    if (cls != kLeadByte) return 1;
    return read_multibyte(p, end, cls, unicode);
}

// The fast paths hard-code the ASCII classes; check that the tables agree.
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
static_assert(ascii_classes_are_standard(), "regex's ASCII classes changed: update the fast paths");

using bpe::count_trailing_zeros;  // bits.hpp

#if defined(BPE_SSE2)
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
    return count_trailing_zeros(stops);
}
#elif defined(BPE_NEON)
// The SSE2 function's twin. NEON compares unsigned, so bytes >= 0x80 fall outside every ASCII range
// by themselves; it has no movemask: narrowing each 16-bit lane by 4 bits leaves 4 bits per byte.
inline unsigned ascii_run_length(const unsigned char* p, uint8_t cls) {
    const uint8x16_t bytes = vld1q_u8(p);
    uint8x16_t in_class;
    if (cls == unicode_tables::kLetter) {
        const uint8x16_t folded = vorrq_u8(bytes, vdupq_n_u8(0x20));
        in_class = vandq_u8(vcgeq_u8(folded, vdupq_n_u8('a')), vcleq_u8(folded, vdupq_n_u8('z')));
    } else if (cls == unicode_tables::kNumber) {
        in_class = vandq_u8(vcgeq_u8(bytes, vdupq_n_u8('0')), vcleq_u8(bytes, vdupq_n_u8('9')));
    } else {
        const uint8x16_t folded = vorrq_u8(bytes, vdupq_n_u8(0x20));
        const uint8x16_t letter = vandq_u8(vcgeq_u8(folded, vdupq_n_u8('a')), vcleq_u8(folded, vdupq_n_u8('z')));
        const uint8x16_t digit = vandq_u8(vcgeq_u8(bytes, vdupq_n_u8('0')), vcleq_u8(bytes, vdupq_n_u8('9')));
        const uint8x16_t space = vorrq_u8(vceqq_u8(bytes, vdupq_n_u8(' ')),
                                          vandq_u8(vcgeq_u8(bytes, vdupq_n_u8('\t')), vcleq_u8(bytes, vdupq_n_u8('\r'))));
        const uint8x16_t ascii = vcltq_u8(bytes, vdupq_n_u8(0x80));
        in_class = vbicq_u8(ascii, vorrq_u8(vorrq_u8(letter, digit), space));
    }
    const uint8x8_t nibbles = vshrn_n_u16(vreinterpretq_u16_u8(vmvnq_u8(in_class)), 4);
    const uint64_t stops = vget_lane_u64(vreinterpret_u64_u8(nibbles), 0);
    return stops == 0 ? 16 : count_trailing_zeros(stops) / 4;
}
#endif

// Advances `p` over characters of class `cls` (not kSpace); returns false (with `p` at the bad
// byte) on invalid UTF-8. `kSimd`: skip ASCII runs 16 bytes at a time where SSE2 or NEON is available.
template <bool kSimd>
inline bool skip_run(const unsigned char*& p, const unsigned char* end, uint8_t cls,
                     const unicode_tables::Table& unicode) {
    for (;;) {
#if defined(BPE_SSE2) || defined(BPE_NEON)
        if (kSimd) {
            while (end - p >= 16) {
                const unsigned length = ascii_run_length(p, cls);
                p += length;
                if (length < 16) break;
            }
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
        const unsigned length = read_multibyte(p, end, next_cls, unicode);
        if (length == 0) return false;
        if (next_cls != cls) return true;
        p += length;
    }
}

// ---------------------------------------------------------------------------------------------
// The block fast path

inline constexpr size_t kBlockBytes = 64;

// One bit per byte of a 64-byte block (bit i = byte i) for each class the block rules need.
// Bytes >= 0x80 are in `non_ascii` only.
struct BlockMasks {
    uint64_t letter;      // A-Z a-z
    uint64_t digit;       // 0-9
    uint64_t space;       // regex's ASCII \s: ' ', \t \n \v \f \r
    uint64_t blank;       // ' ' only: the one that joins the next pre-token
    uint64_t apostrophe;  // may start a contraction
    uint64_t non_ascii;
};

// The masks GPT-4's and o200k's rules add to BlockMasks (pretokenize_gpt4.hpp), which SSE2 builds
// in the same pass as the others when asked: one load of each lane instead of a look at each control
// byte and a second pass.
struct NewlineAndCaseMasks {
    uint64_t newline;   // \r \n
    uint64_t case_bit;  // bit 5 of each byte: an ASCII letter's lower case (o200k's rules)
};

// SWAR on 64-bit words: the portable way to build the masks. For 7-bit values x (the high bit
// cleared first), x + (0x80 - c) sets a byte's high bit iff x >= c, and no byte carries into the next.

inline constexpr uint64_t kHighBits = 0x8080808080808080ULL;
inline constexpr uint64_t kLowBits = 0x7F7F7F7F7F7F7F7FULL;
inline constexpr uint64_t repeat_byte(unsigned byte) { return 0x0101010101010101ULL * byte; }

// The high bit of each byte of `flags` gathered into 8 bits, byte 0 lowest.
inline uint64_t gather_high_bits(uint64_t flags) { return ((flags >> 7) * 0x0102040810204080ULL) >> 56; }

inline BlockMasks block_masks_swar(const unsigned char* p) {
    BlockMasks masks{};
    for (unsigned word_index = 0; word_index < kBlockBytes / 8; ++word_index) {
        const uint64_t word = load_little_endian64(p + 8 * word_index);
        const uint64_t non_ascii = word & kHighBits;
        const uint64_t ascii = ~non_ascii & kHighBits;
        const uint64_t x = word & kLowBits;
        const auto at_least = [](uint64_t values, unsigned c) { return values + repeat_byte(0x80 - c); };
        const auto at_most = [](uint64_t values, unsigned c) { return ~(values + repeat_byte(0x7F - c)); };
        const auto equal = [&](unsigned c) { return ~((x ^ repeat_byte(c)) + kLowBits); };
        const uint64_t folded = x | repeat_byte(0x20);
        const uint64_t letter = at_least(folded, 'a') & at_most(folded, 'z') & ascii;
        const uint64_t digit = at_least(x, '0') & at_most(x, '9') & ascii;
        const uint64_t blank = equal(' ') & ascii;
        const uint64_t space = blank | (at_least(x, '\t') & at_most(x, '\r') & ascii);
        const uint64_t apostrophe = equal('\'') & ascii;
        const unsigned shift = 8 * word_index;
        masks.letter |= gather_high_bits(letter) << shift;
        masks.digit |= gather_high_bits(digit) << shift;
        masks.space |= gather_high_bits(space) << shift;
        masks.blank |= gather_high_bits(blank) << shift;
        masks.apostrophe |= gather_high_bits(apostrophe) << shift;
        masks.non_ascii |= gather_high_bits(non_ascii) << shift;
    }
    return masks;
}

#if defined(BPE_SSE2)
template <bool kNewline = false, bool kCaseBit = false>
inline BlockMasks block_masks_sse2(const unsigned char* p, NewlineAndCaseMasks* extra = nullptr) {
    BlockMasks masks{};
    if (kNewline) extra->newline = 0;
    if (kCaseBit) extra->case_bit = 0;
    for (unsigned lane = 0; lane < kBlockBytes / 16; ++lane) {
        const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * lane));
        // Signed compares: bytes >= 0x80 are negative, so never in an ASCII range.
        const __m128i folded = _mm_or_si128(bytes, _mm_set1_epi8(0x20));
        const __m128i letter = _mm_and_si128(_mm_cmpgt_epi8(folded, _mm_set1_epi8('a' - 1)),
                                             _mm_cmplt_epi8(folded, _mm_set1_epi8('z' + 1)));
        const __m128i digit = _mm_and_si128(_mm_cmpgt_epi8(bytes, _mm_set1_epi8('0' - 1)),
                                            _mm_cmplt_epi8(bytes, _mm_set1_epi8('9' + 1)));
        const __m128i blank = _mm_cmpeq_epi8(bytes, _mm_set1_epi8(' '));
        const __m128i space = _mm_or_si128(blank, _mm_and_si128(_mm_cmpgt_epi8(bytes, _mm_set1_epi8('\t' - 1)),
                                                                _mm_cmplt_epi8(bytes, _mm_set1_epi8('\r' + 1))));
        const __m128i apostrophe = _mm_cmpeq_epi8(bytes, _mm_set1_epi8('\''));
        const unsigned shift = 16 * lane;
        masks.letter |= uint64_t(unsigned(_mm_movemask_epi8(letter))) << shift;
        masks.digit |= uint64_t(unsigned(_mm_movemask_epi8(digit))) << shift;
        masks.space |= uint64_t(unsigned(_mm_movemask_epi8(space))) << shift;
        masks.blank |= uint64_t(unsigned(_mm_movemask_epi8(blank))) << shift;
        masks.apostrophe |= uint64_t(unsigned(_mm_movemask_epi8(apostrophe))) << shift;
        masks.non_ascii |= uint64_t(unsigned(_mm_movemask_epi8(bytes))) << shift;
        if (kNewline) {
            const __m128i newline = _mm_or_si128(_mm_cmpeq_epi8(bytes, _mm_set1_epi8('\n')),
                                                 _mm_cmpeq_epi8(bytes, _mm_set1_epi8('\r')));
            extra->newline |= uint64_t(unsigned(_mm_movemask_epi8(newline))) << shift;
        }
        // Shifting 16-bit lanes by 2 moves each byte's bit 5 to its bit 7, what movemask reads.
        if (kCaseBit) extra->case_bit |= uint64_t(unsigned(_mm_movemask_epi8(_mm_slli_epi16(bytes, 2)))) << shift;
    }
    return masks;
}
#elif defined(BPE_NEON)
// One bit per byte of the four compare results `lanes` (0xFF or 0 each), byte i of the block in bit
// i: each byte is weighted by its bit within its half lane, then pairwise additions sum each group
// of eight into one byte (the weights are distinct powers of two, so no sum carries).
inline uint64_t neon_block_bits(const uint8x16_t lanes[4]) {
    static const uint8_t kWeights[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t weights = vld1q_u8(kWeights);
    const uint8x16_t first = vpaddq_u8(vandq_u8(lanes[0], weights), vandq_u8(lanes[1], weights));
    const uint8x16_t second = vpaddq_u8(vandq_u8(lanes[2], weights), vandq_u8(lanes[3], weights));
    const uint8x16_t quarters = vpaddq_u8(first, second);
    return vgetq_lane_u64(vreinterpretq_u64_u8(vpaddq_u8(quarters, quarters)), 0);
}

// block_masks_sse2's twin: the same classes, compared unsigned (bytes >= 0x80 fall outside every
// ASCII range by themselves).
inline BlockMasks block_masks_neon(const unsigned char* p) {
    uint8x16_t letter[4], digit[4], space[4], blank[4], apostrophe[4], non_ascii[4];
    for (unsigned lane = 0; lane < kBlockBytes / 16; ++lane) {
        const uint8x16_t bytes = vld1q_u8(p + 16 * lane);
        const uint8x16_t folded = vorrq_u8(bytes, vdupq_n_u8(0x20));
        letter[lane] = vandq_u8(vcgeq_u8(folded, vdupq_n_u8('a')), vcleq_u8(folded, vdupq_n_u8('z')));
        digit[lane] = vandq_u8(vcgeq_u8(bytes, vdupq_n_u8('0')), vcleq_u8(bytes, vdupq_n_u8('9')));
        blank[lane] = vceqq_u8(bytes, vdupq_n_u8(' '));
        space[lane] =
            vorrq_u8(blank[lane], vandq_u8(vcgeq_u8(bytes, vdupq_n_u8('\t')), vcleq_u8(bytes, vdupq_n_u8('\r'))));
        apostrophe[lane] = vceqq_u8(bytes, vdupq_n_u8('\''));
        non_ascii[lane] = vcgeq_u8(bytes, vdupq_n_u8(0x80));
    }
    BlockMasks masks;
    masks.letter = neon_block_bits(letter);
    masks.digit = neon_block_bits(digit);
    masks.space = neon_block_bits(space);
    masks.blank = neon_block_bits(blank);
    masks.apostrophe = neon_block_bits(apostrophe);
    masks.non_ascii = neon_block_bits(non_ascii);
    return masks;
}
#endif

// The masks on the fast path: SSE2 or NEON where the compiler targets one, else SWAR.
inline BlockMasks block_masks_fast(const unsigned char* p) {
#if defined(BPE_SSE2)
    return block_masks_sse2(p);
#elif defined(BPE_NEON)
    return block_masks_neon(p);
#else
    return block_masks_swar(p);
#endif
}

// Gives the block's multi-byte characters their classes, so that block_boundaries decides around
// them too (most non-English text would otherwise go character by character): each character's
// bytes join the mask of its class (none for "other") and leave `non_ascii`, up to the first one
// that is not valid UTF-8, runs past the block, or is a space (the block rules take a space as one
// byte: `\s+(?!\S)` gives back the run's last character). Always inlined, decoding in line: in the
// counter's loop, which holds every pattern's scanner, GCC had left read_multibyte a call here.
BPE_ALWAYS_INLINE void classify_multibyte(const unsigned char* p, BlockMasks& m, const unicode_tables::Table& unicode) {
    uint64_t pending = m.non_ascii;
    while (pending != 0) {
        const unsigned at = count_trailing_zeros(pending);
        uint32_t code_point;
        const unsigned length = decode_multibyte(p + at, p + kBlockBytes, code_point);
        if (length == 0) return;
        const uint8_t cls = unicode_tables::classify(code_point, unicode);
        if (cls == unicode_tables::kSpace) return;
        const uint64_t bytes = ((uint64_t(1) << length) - 1) << at;  // length <= 4 and at + length <= 64
        if (cls == unicode_tables::kLetter) m.letter |= bytes;
        if (cls == unicode_tables::kNumber) m.digit |= bytes;
        m.non_ascii &= ~bytes;
        pending &= ~bytes;
    }
}

// Pre-token starts in the 64 bytes at `p`, given that a pre-token starts at `p`: bit i set = one
// starts at p + i (bit 0 always, unless the block starts with what it cannot decide: then 0). Only
// starts the block decides are reported: those before the first byte left in `non_ascii` and before
// byte 62 (bytes 62 and 63 are lookahead for contractions).
// The pattern has no lookbehind, so the pre-tokens from a start on depend only on the text after
// it. With K the class of each byte (letter, digit, space or other):
//  * a start where K changes (the pattern's runs are one class each), except that
//  * a space run followed by a non-space splits before its last character (`\s+(?!\S)`
//    backtracks), and if that character is ' ', it starts the next pre-token (` ?\p{L}+` etc.)
//    instead of standing alone;
//  * a contraction '(?:[sdmt]|ll|ve|re) is a pre-token of its own where its apostrophe starts one,
//    i.e. not after another "other" character (inside that run) nor after ' ' (which joins it).
inline uint64_t block_boundaries(const unsigned char* p, const BlockMasks& m) {
    constexpr uint64_t kDecidable = (uint64_t(1) << (kBlockBytes - 2)) - 1;
    const uint64_t before_non_ascii = m.non_ascii != 0 ? (m.non_ascii & (~m.non_ascii + 1)) - 1 : ~uint64_t(0);
    const uint64_t decided = kDecidable & before_non_ascii;
    uint64_t starts = (m.letter ^ (m.letter << 1)) | (m.digit ^ (m.digit << 1)) | (m.space ^ (m.space << 1));
    const uint64_t after_space_run = (m.space << 1) & ~m.space & ~m.non_ascii;
    starts |= after_space_run >> 1;
    starts &= ~(after_space_run & (m.blank << 1));
    const uint64_t other = ~(m.letter | m.digit | m.space | m.non_ascii);
    uint64_t apostrophes = m.apostrophe & ~((other | m.blank) << 1) & decided;
    while (apostrophes != 0) {  // rare: check each candidate's suffix by hand
        const unsigned at = count_trailing_zeros(apostrophes);
        apostrophes &= apostrophes - 1;
        const unsigned char first = p[at + 1];  // at <= 61, so both suffix bytes are in the block
        const unsigned char second = p[at + 2];
        unsigned suffix = 0;
        if (first == 's' || first == 'd' || first == 'm' || first == 't') {
            suffix = 1;
        } else if ((first == 'l' && second == 'l') || ((first == 'v' || first == 'r') && second == 'e')) {
            suffix = 2;
        }
        if (suffix == 0) continue;
        starts &= ~(uint64_t(1) << (at + 1));
        if (at + 1 + suffix < 64) starts |= uint64_t(1) << (at + 1 + suffix);
    }
    return (starts | 1) & decided;
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

// Which way for_each_pretoken finds pre-tokens. All give the same pre-tokens; the switch exists so
// that tests can check each against `regex` on any machine.
enum class ScannerPath : int {
    kFast = 0,    // 64-byte blocks classified with SSE2 or NEON where available (else as kSwar)
    kSwar = 1,    // 64-byte blocks classified with portable 64-bit word arithmetic
    kScalar = 2,  // one character at a time, no block path and no SIMD
};

namespace detail {
inline std::atomic<int> scanner_path{int(ScannerPath::kFast)};
}  // namespace detail

// Read once per for_each_pretoken call. One setting per extension module that includes this
// header, or one per process where the loader merges their copies (glibc does).
inline void set_scanner_path(ScannerPath path) noexcept {
    detail::scanner_path.store(int(path), std::memory_order_relaxed);
}
inline ScannerPath scanner_path() noexcept {
    return ScannerPath(detail::scanner_path.load(std::memory_order_relaxed));
}

namespace detail {

using bpe::count_leading_zeros;  // bits.hpp

// The pre-tokens of a block the block path decided, one on_pretoken call each.
template <typename OnPretoken>
struct EachPretokenOfBlock {
    OnPretoken& on_pretoken;
    void operator()(const unsigned char*, size_t offset, uint64_t boundaries) const {
        unsigned previous = 0;
        boundaries &= boundaries - 1;
        do {
            const unsigned next = count_trailing_zeros(boundaries);
            boundaries &= boundaries - 1;
            on_pretoken(offset + previous, offset + next);
            previous = next;
        } while (boundaries != 0);
    }
};

// The `count` (< 64) bytes at `p` copied to `padded`, the rest of its 64 bytes 0x80 (a byte that
// starts no character). With 64 bytes readable at `p` (`readable`), fixed-size loads and a blend:
// the end of every document between special tokens comes here, and a copy of variable size (a
// call, branches on the size) cost a few percent of encoding.
inline void pad_last_block(const unsigned char* p, size_t count, size_t readable, unsigned char* padded) {
#if defined(BPE_SSE2)
    if (readable >= kBlockBytes) {
        const __m128i kept = _mm_set1_epi8(char(count));
        const __m128i pad = _mm_set1_epi8(char(0x80));
        for (unsigned lane = 0; lane < kBlockBytes / 16; ++lane) {
            const __m128i index = _mm_add_epi8(_mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                               _mm_set1_epi8(char(16 * lane)));
            const __m128i keep = _mm_cmplt_epi8(index, kept);  // indices and count are below 64
            const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * lane));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(padded + 16 * lane),
                             _mm_or_si128(_mm_and_si128(keep, bytes), _mm_andnot_si128(keep, pad)));
        }
        return;
    }
#else
    (void)readable;
#endif
    std::memset(padded, 0x80, kBlockBytes);
    std::memcpy(padded, p, count);
}

// The kBlockBytes at `p` as the block rules read them: the text itself, or, where fewer are left
// before `end`, `padded` filled by pad_last_block (`readable`: the bytes from `base` that may be read).
inline const unsigned char* block_at(const unsigned char* p, const unsigned char* end, const unsigned char* base,
                                     size_t readable, unsigned char* padded) {
    if (size_t(end - p) >= kBlockBytes) return p;
    pad_last_block(p, size_t(end - p), readable - size_t(p - base), padded);
    return padded;
}

// `readable` >= `size`: bytes of `data` up to it may be read (never past `size` as text).
template <ScannerPath kPath, typename OnPretoken, typename OnBlock>
size_t scan_pretokens(const char* data, size_t size, size_t readable, OnPretoken& on_pretoken, OnBlock& on_block,
                      const unicode_tables::Table& unicode) {
    constexpr uint8_t kSpace = unicode_tables::kSpace;
    constexpr bool kSimd = kPath == ScannerPath::kFast;
    const auto* const base = reinterpret_cast<const unsigned char*>(data);
    const unsigned char* const end = base + size;
    const unsigned char* p = base;
    while (p < end) {
        // The text's last bytes go through the block path as a copy padded with 0x80, which starts
        // no character: a pad byte ends every run and lookahead the block decides, as the end of
        // the text does.
        unsigned char padded[kBlockBytes];
        const unsigned char* block = kPath == ScannerPath::kScalar ? p : block_at(p, end, base, readable, padded);
        if (kPath != ScannerPath::kScalar) {
            BlockMasks masks = kSimd ? block_masks_fast(block) : block_masks_swar(block);
            if (masks.non_ascii != 0) classify_multibyte(block, masks, unicode);
            const uint64_t boundaries = block_boundaries(block, masks);
            if (boundaries > 1) {  // 0: the block starts with what it cannot decide
                on_block(block, size_t(p - base), boundaries);
                p += 63 - count_leading_zeros(boundaries);
                continue;
            }
        }

        // One pre-token, character by character.
        const unsigned char* const start = p;
        uint8_t cls;
        unsigned length = read_char(p, end, cls, unicode);
        if (length == 0) return size_t(p - base);
        p += length;

        if (*start == '\'') {
            unsigned suffix;
            if (is_contraction_suffix(p, end, suffix)) {
                p += suffix;
                on_pretoken(size_t(start - base), size_t(p - base));
                continue;
            }
        } else if (*start == ' ' && p < end) {
            // ` ?\p{L}+` and friends: a single space joins the run of letters, digits or other
            // symbols right after it (the apostrophe counts as other; no contraction after a space).
            uint8_t next_cls;
            length = read_char(p, end, next_cls, unicode);
            if (length == 0) return size_t(p - base);
            if (next_cls != kSpace) {
                p += length;
                if (!skip_run<kSimd>(p, end, next_cls, unicode)) return size_t(p - base);
                on_pretoken(size_t(start - base), size_t(p - base));
                continue;
            }
        }

        if (cls != kSpace) {
            if (!skip_run<kSimd>(p, end, cls, unicode)) return size_t(p - base);
            on_pretoken(size_t(start - base), size_t(p - base));
            continue;
        }

        // A whitespace run. `\s+(?!\S)` takes it all at the end of the text; before a non-space it
        // backtracks one character, which then stands alone (`\s+`) unless it is a space that the
        // next pre-token takes as its ` ?` prefix.
        const unsigned char* last = start;
        while (p < end) {
            length = read_char(p, end, cls, unicode);
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

}  // namespace detail

// for_each_pretoken for callers that take the block path's pre-tokens a block at a time: the same
// pre-tokens in the same order, but those the block path decides come as one call
// `on_block(block, offset, boundaries)` per block, the others as `on_pretoken(begin, end)`.
// `boundaries` has a bit set at each pre-token start in the block and one where the last of them
// ends (bit 0 always, at least two bits, none past bit 61); bit i is byte offset + i of `data`.
// `block` holds the block's 64 bytes: `data + offset`, or near the text's end a padded copy (the
// pre-tokens are within the text either way). `readable_size` (at least `size`): bytes of `data`
// up to it may be read, which makes the padded copy cheaper; they are never scanned.
template <typename OnPretoken, typename OnBlock>
size_t for_each_pretoken_block(const char* data, size_t size, size_t readable_size, OnPretoken&& on_pretoken,
                               OnBlock&& on_block, const unicode_tables::Table& unicode = unicode_tables::kTables[0]) {
    const size_t readable = readable_size < size ? size : readable_size;
    switch (scanner_path()) {
        case ScannerPath::kSwar:
            return detail::scan_pretokens<ScannerPath::kSwar>(data, size, readable, on_pretoken, on_block, unicode);
        case ScannerPath::kScalar:
            return detail::scan_pretokens<ScannerPath::kScalar>(data, size, readable, on_pretoken, on_block, unicode);
        default:
            return detail::scan_pretokens<ScannerPath::kFast>(data, size, readable, on_pretoken, on_block, unicode);
    }
}

// Calls `on_pretoken(begin, end)` (byte offsets into `data`) for each pre-token in order. Returns
// kValidUtf8, or the offset of the first invalid byte; the pre-tokens before it have been visited.
template <typename OnPretoken>
size_t for_each_pretoken(const char* data, size_t size, OnPretoken&& on_pretoken,
                         const unicode_tables::Table& unicode = unicode_tables::kTables[0]) {
    detail::EachPretokenOfBlock<OnPretoken> on_block{on_pretoken};
    return for_each_pretoken_block(data, size, size, on_pretoken, on_block, unicode);
}

// End offsets of the pre-tokens of `text` (each starts where the previous ended, the first at 0).
// Throws InvalidUtf8Error.
std::vector<size_t> pretoken_ends(std::string_view text);

}  // namespace bpe
