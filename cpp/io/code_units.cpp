#include "io/code_units.hpp"

#include <cstdint>
#include <cstring>

#include "kit/bits.hpp"  // BPE_SSE2

#if defined(BPE_SSE2)
#include <emmintrin.h>
#endif

namespace bpe {
namespace {

// How many of the units at `in` (at most `count`) start an ASCII run that can be copied as bytes,
// in whole groups, and copies them. The scalar loop below takes the rest.
template <typename Unit>
size_t copy_ascii(const Unit* in, size_t count, unsigned char* out) {
    size_t done = 0;
#if defined(BPE_SSE2)
    if (sizeof(Unit) == 1) {
        for (; done + 16 <= count; done += 16) {
            const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + done));
            if (_mm_movemask_epi8(bytes) != 0) break;
            _mm_storeu_si128(reinterpret_cast<__m128i*>(out + done), bytes);
        }
        return done;
    }
    if (sizeof(Unit) == 2) {
        const __m128i high = _mm_set1_epi16(int16_t(0xFF80));
        for (; done + 16 <= count; done += 16) {
            const __m128i first = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + done));
            const __m128i second = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + done + 8));
            const __m128i beyond = _mm_and_si128(_mm_or_si128(first, second), high);
            if (_mm_movemask_epi8(_mm_cmpeq_epi8(beyond, _mm_setzero_si128())) != 0xFFFF) break;
            _mm_storeu_si128(reinterpret_cast<__m128i*>(out + done), _mm_packus_epi16(first, second));
        }
        return done;
    }
#endif
    for (; done + 8 <= count; done += 8) {
        uint32_t any = 0;
        for (size_t i = 0; i < 8; ++i) any |= uint32_t(in[done + i]);
        if (any >= 0x80) break;
        for (size_t i = 0; i < 8; ++i) out[done + i] = static_cast<unsigned char>(in[done + i]);
    }
    return done;
}

template <typename Unit>
size_t to_utf8(const Unit* in, size_t count, unsigned char* out) {
    unsigned char* const start = out;
    size_t i = 0;
    while (i < count) {
        const size_t ascii = copy_ascii(in + i, count - i, out);
        i += ascii;
        out += ascii;
        // Then characters one at a time until the next ASCII group can start (at most a group's worth).
        for (const size_t stop = i + 16 < count ? i + 16 : count; i < stop; ++i) {
            const uint32_t c = in[i];
            if (c < 0x80) {
                *out++ = static_cast<unsigned char>(c);
            } else if (c < 0x800) {
                out[0] = static_cast<unsigned char>(0xC0 | (c >> 6));
                out[1] = static_cast<unsigned char>(0x80 | (c & 0x3F));
                out += 2;
            } else if (c < 0x10000) {
                if (c >= 0xD800 && c <= 0xDFFF) return kSurrogateInText;
                out[0] = static_cast<unsigned char>(0xE0 | (c >> 12));
                out[1] = static_cast<unsigned char>(0x80 | ((c >> 6) & 0x3F));
                out[2] = static_cast<unsigned char>(0x80 | (c & 0x3F));
                out += 3;
            } else {
                out[0] = static_cast<unsigned char>(0xF0 | (c >> 18));
                out[1] = static_cast<unsigned char>(0x80 | ((c >> 12) & 0x3F));
                out[2] = static_cast<unsigned char>(0x80 | ((c >> 6) & 0x3F));
                out[3] = static_cast<unsigned char>(0x80 | (c & 0x3F));
                out += 4;
            }
        }
    }
    return size_t(out - start);
}

}  // namespace

size_t utf8_from_code_units(const void* units, size_t count, int unit_bytes, char* out) {
    auto* const bytes = reinterpret_cast<unsigned char*>(out);
    switch (unit_bytes) {
        case 1:
            return to_utf8(static_cast<const uint8_t*>(units), count, bytes);
        case 2:
            return to_utf8(static_cast<const uint16_t*>(units), count, bytes);
        default:
            return to_utf8(static_cast<const uint32_t*>(units), count, bytes);
    }
}

}  // namespace bpe
