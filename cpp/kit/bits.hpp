// The low-level primitives of the native core, each spelled once: unaligned loads, the 64-bit mixer
// and the byte hash, and the compiler-specific ones (prefetching, bit scans, overflow-checked
// addition, forced inlining, aligned allocation) guarded here. Every other file uses these instead
// of spelling a builtin; a compiler without the builtins gets the portable fallback. The SIMD the
// compiler targets is named here too (BPE_SSE2, BPE_NEON) for the files that have a path for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(_WIN32)
#include <malloc.h>  // _aligned_malloc: Windows' C runtime has no aligned_alloc (MSVC and mingw-w64)
#endif

// SSE2 is x86-64's baseline; MSVC says so with _M_X64 (or _M_IX86_FP on 32-bit x86), not __SSE2__.
// NEON is AArch64's baseline (32-bit ARM lacks the AArch64 instructions the NEON paths use; their
// masks read lanes in little-endian order, AArch64's usual one: __AARCH64EL__).
#if defined(__SSE2__) || defined(_M_X64) || defined(_M_AMD64) || (defined(_M_IX86_FP) && _M_IX86_FP >= 2)
#define BPE_SSE2 1
#elif (defined(__ARM_NEON) && defined(__aarch64__) && defined(__AARCH64EL__)) || defined(_M_ARM64)
#define BPE_NEON 1
#endif

#if defined(__GNUC__) || defined(__clang__)
#define BPE_ALWAYS_INLINE inline __attribute__((always_inline))
#define BPE_NOINLINE __attribute__((noinline))
#else
#define BPE_ALWAYS_INLINE inline
#define BPE_NOINLINE
#endif

// Every Windows target (x86, x64, ARM64) is little-endian; MSVC has no __BYTE_ORDER__ to say so.
#if (defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__) || defined(_WIN32)
#define BPE_LITTLE_ENDIAN 1
#endif

namespace bpe {

// Unaligned loads in the machine's byte order.
inline uint64_t load64(const void* p) {
    uint64_t value;
    std::memcpy(&value, p, 8);
    return value;
}

inline uint32_t load32(const void* p) {
    uint32_t value;
    std::memcpy(&value, p, 4);
    return value;
}

// Eight bytes as a little-endian integer (byte i in bits 8i..8i+7) on any machine.
inline uint64_t load_little_endian64(const unsigned char* p) {
#if defined(BPE_LITTLE_ENDIAN)
    return load64(p);
#else
    uint64_t word = 0;
    for (int i = 7; i >= 0; --i) word = (word << 8) | p[i];
    return word;
#endif
}

// The hash formulas of cpp/ live here, and nowhere else: mix64 (the finalizer), hash_bytes (a byte
// string), fibonacci_spread and spread_two (one multiply per word, for tables indexed by the high
// bits); word_table.hpp's hash_inline is the counter's canonical hash of a short word and stays
// beside its packing.

// The 64-bit finalizer: every input bit reaches every output bit. For keys whose high bits vary
// little from key to key, where a slot is picked from the low bits, and before any bits are dropped.
inline uint64_t mix64(uint64_t h) {
    h ^= h >> 32;
    h *= 0xd6e8feb86659fd93ULL;
    h ^= h >> 29;
    h *= 0x9fb21c651e98df25ULL;
    h ^= h >> 32;
    return h;
}

// 2^64 divided by the golden ratio, odd: multiplying by it (Fibonacci hashing) moves every bit of a
// key into the product's high bits, which pick a slot of a power-of-two table (the top log2(slots)
// bits). One multiply, not mix64's five steps: enough where the keys are small integers (token ids,
// pairs of them) and only the high bits are used, as in the merge loop's pair ids, the encoder's rank
// table and the owners of a parallel merge's changes.
inline constexpr uint64_t kGoldenRatio64 = 0x9E3779B97F4A7C15ULL;
inline constexpr uint64_t fibonacci_spread(uint64_t key) { return key * kGoldenRatio64; }

// Two 64-bit words spread into one, each by its own odd multiplier (a slot from the high bits): the
// encoder's pre-token cache key, whose words are a word's hash and its packed bytes.
inline constexpr uint64_t spread_two(uint64_t first, uint64_t second) {
    return (first * kGoldenRatio64) ^ (second * 0xC2B2AE3D27D4EB4FULL);
}

// The hash of a byte string of any length: one multiply-add per 8 bytes, the tail zero-padded, then
// mix64. It orders count_words' output (word_table's canonical hash of a long word), so it never
// changes.
inline uint64_t hash_bytes(const char* p, size_t length) {
    uint64_t h = kGoldenRatio64 ^ length;
    for (; length >= 8; p += 8, length -= 8) {
        h = (h ^ load64(p)) * 0xc4ceb9fe1a85ec53ULL + 0x2545f4914f6cdd1dULL;
    }
    char tail[8] = {};
    std::memcpy(tail, p, length);
    return mix64(h ^ load64(tail));
}

// Where each thread's own state starts, so that no two threads write to one cache line: 128, not
// 64, as Intel cores fetch lines in aligned pairs (the spatial prefetcher), and two threads' fields
// in one pair then contend as if they shared a line.
constexpr size_t kThreadAlignment = 128;

// Starts loading the cache line at `address` (to read it, or to write it) so a later access hits.
inline void prefetch(const void* address) {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(address);
#else
    (void)address;
#endif
}

inline void prefetch_for_write(const void* address) {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(address, 1);
#else
    (void)address;
#endif
}

inline unsigned count_trailing_zeros(uint64_t bits) {  // bits != 0
#if defined(__GNUC__) || defined(__clang__)
    return unsigned(__builtin_ctzll(bits));
#else
    unsigned count = 0;
    for (; (bits & 1) == 0; bits >>= 1) ++count;
    return count;
#endif
}

inline unsigned count_leading_zeros(uint64_t bits) {  // bits != 0
#if defined(__GNUC__) || defined(__clang__)
    return unsigned(__builtin_clzll(bits));
#else
    unsigned count = 0;
    for (uint64_t top = uint64_t(1) << 63; (bits & top) == 0; top >>= 1) ++count;
    return count;
#endif
}

// `sum += value`, unless that would overflow: then false and `sum` unchanged.
inline bool add_without_overflow(int64_t& sum, int64_t value) {
#if defined(__GNUC__) || defined(__clang__)
    int64_t result;
    if (__builtin_add_overflow(sum, value, &result)) return false;
    sum = result;
    return true;
#else
    if ((value > 0 && sum > INT64_MAX - value) || (value < 0 && sum < INT64_MIN - value)) return false;
    sum += value;
    return true;
#endif
}

// `size` bytes aligned to `alignment` (a power of two), or nullptr; free with `free_aligned`.
inline void* allocate_aligned(size_t alignment, size_t size) {
    size = (size + alignment - 1) / alignment * alignment;  // std::aligned_alloc wants a multiple
#if defined(_WIN32)
    return _aligned_malloc(size, alignment);  // which std::free must not release
#else
    return std::aligned_alloc(alignment, size);
#endif
}

inline void free_aligned(void* pointer) {
#if defined(_WIN32)
    _aligned_free(pointer);
#else
    std::free(pointer);
#endif
}

}  // namespace bpe
