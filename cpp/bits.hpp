// The compiler-specific primitives of the native core, guarded once: prefetching, bit scans,
// overflow-checked addition, forced inlining and aligned allocation. Every other file uses these
// instead of spelling a builtin; a compiler without the builtins gets the portable fallback.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#if defined(__GNUC__) || defined(__clang__)
#define BPE_ALWAYS_INLINE inline __attribute__((always_inline))
#define BPE_NOINLINE __attribute__((noinline))
#else
#define BPE_ALWAYS_INLINE inline
#define BPE_NOINLINE
#endif

namespace bpe {

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

// `size` bytes aligned to `alignment` (a power of two); free with `free_aligned`.
inline void* allocate_aligned(size_t alignment, size_t size) {
    size = (size + alignment - 1) / alignment * alignment;  // std::aligned_alloc wants a multiple
    return std::aligned_alloc(alignment, size);
}

inline void free_aligned(void* pointer) { std::free(pointer); }

}  // namespace bpe
