// Encoding text with a trained BPE vocabulary: the compiled twin of cs336_basics/tokenizer.py.
//
// Same semantics as the Python reference: split on special tokens (leftmost occurrence first, the
// longest of those starting there), pre-tokenize the rest with the GPT-2 pattern (pretokenize.hpp),
// and within each pre-token repeatedly merge every occurrence of the adjacent pair whose merge has
// the lowest rank, left to right, until no adjacent pair has a merge.
//
// Pure C++17 with no Python dependency; cs336_basics/_encode.pyx is the binding.
//
// Performance notes (single thread, GPT-2 vocabulary, 50 MB of mixed-language text):
// - Pre-tokenizing runs at several hundred MB/s; the merge loop is what costs, and it is bound by
//   memory latency (each pair-rank lookup is a likely cache miss), not by arithmetic.
// - So most of the work is avoided: pre-tokens repeat, and the ids of one of up to kCachedBytes
//   bytes that gives up to kCachedIds ids are cached in a fixed two-way set-associative table
//   (64-byte slots, least recently used of the two replaced). Its address space is reserved by the
//   constructor; encoding never grows memory beyond its output, which is what lets encode_iterable
//   run under a tight address-space limit. A bigger table keeps more of the long tail of rare
//   words: of the 50 MB's cacheable pre-tokens, 2**16 slots miss ~15%, 2**18 ~9.5%.
// - Cache lookups are batched (kBatch pre-tokens hashed and their slots prefetched before any is
//   looked up), so their misses overlap: about 20% faster than one lookup at a time.
// - Short words run the merge loop on a small array; only pairs next to a merged token are looked
//   up again. Words longer than kShortWord use a heap of candidate pairs with lazy deletion, so a
//   megabyte without a space is O(n log n) instead of O(n^2).
// - The cache is taken with try_lock: a second thread encoding with the same Encoder at the same
//   time runs uncached instead of waiting, so threads never serialize on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "special_tokens.hpp"

namespace bpe {

// Merge number `rank` (its index in the list) turns the adjacent pair (left, right) into `merged`.
struct MergeRule {
    uint32_t left;
    uint32_t right;
    uint32_t merged;
};

class Encoder {
public:
    static constexpr size_t kCachedBytes = 26;
    static constexpr size_t kCachedIds = 8;
    static constexpr size_t kShortWord = 48;

    // `byte_ids[b]` is the id of the single byte b (256 entries); `merges` in rank order (a pair that
    // repeats keeps its first rank); `special_tokens` as (UTF-8 bytes, id), any order, none empty;
    // `cache_slots` is rounded up to a power of two (0 disables the cache). Throws
    // std::invalid_argument on malformed arguments, std::bad_alloc if the cache cannot be reserved.
    Encoder(const std::vector<uint32_t>& byte_ids, const std::vector<MergeRule>& merges,
            const std::vector<std::pair<std::string, uint32_t>>& special_tokens, size_t cache_slots);
    ~Encoder();
    Encoder(const Encoder&) = delete;
    Encoder& operator=(const Encoder&) = delete;

    // Appends the ids of `text` (UTF-8) to `out`. Throws InvalidUtf8Error (pretokenize.hpp) with the
    // offset of the first invalid byte; `out` then holds the ids of the text before that point.
    void encode(std::string_view text, std::vector<uint32_t>& out);

    size_t cache_slots() const { return cache_ ? 2 * (cache_mask_ + 1) : 0; }

private:
    struct CacheSlot;
    class PairTable;
    // A pre-token waiting in encode_ordinary_with's batch; `hash` is set when it is cacheable.
    struct PendingWord {
        const unsigned char* data;
        size_t size;
        uint64_t hash;
    };
    static constexpr size_t kBatch = 16;

    // `offset`: where `text` starts in the caller's text, for error messages.
    void encode_ordinary_with(std::string_view text, size_t offset, std::vector<uint32_t>& out, CacheSlot* cache);
    void encode_word(const PendingWord& word, std::vector<uint32_t>& out, CacheSlot* cache);
    size_t merge_short(uint32_t* ids, size_t count) const;
    void merge_long(const unsigned char* word, size_t size, std::vector<uint32_t>& out) const;

    uint32_t byte_ids_[256];
    std::unique_ptr<PairTable> pairs_;
    SpecialTokens specials_;
    std::vector<uint32_t> special_ids_;  // the id of each of specials_.tokens()

    struct FreeDeleter {
        void operator()(void* memory) const;
    };
    std::unique_ptr<CacheSlot, FreeDeleter> cache_;
    size_t cache_mask_ = 0;  // number of two-slot sets - 1
    std::mutex cache_mutex_;
};

}  // namespace bpe
