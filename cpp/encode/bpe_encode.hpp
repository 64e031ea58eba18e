// Encoding text with a trained BPE vocabulary: the compiled twin of cs336_basics/tokenizer.py.
//
// Same semantics as the Python reference: split on special tokens (leftmost occurrence first, the
// longest of those starting there), pre-tokenize the rest with the vocabulary's pattern (GPT-2's,
// pretokenize.hpp, or cl100k's, rustbpe's, o200k's, pretokenize_gpt4.hpp),
// and within each pre-token repeatedly merge every occurrence of the adjacent pair whose merge has
// the lowest rank, left to right, until no adjacent pair has a merge.
//
// Pure C++17 with no Python dependency; cs336_basics/_encode.pyx is the binding.
//
// Performance notes (the measurements are in docs/PERFORMANCE.md, "Encoder"):
// - Pre-tokens repeat, so their ids are cached (WordCache): every word has a 32-byte slot in a set
//   of four (most recently used first), keyed by the word itself when it has up to kInlineBytes
//   bytes, else by its hash; up to kInlineIds ids sit in the slot (kNarrowInlineIds when every id
//   fits 16 bits), more (and a long word's bytes, checked on every hit) in an arena emptied when
//   full. A hit in a set's first way is one compare of two words and a copy of the slot's ids. Merging is what costs: a miss costs some 50 hits.
// - Lookups go in batches (BatchedLookup): the scanner only records where words end, a block of
//   them at a time (for_each_pretoken_block); each batch's keys are computed and its sets
//   prefetched while the batch before it is looked up, across special tokens, so memory fetches
//   overlap instead of each lookup waiting for its own.
// - Misses merge short words on a small array, looking up again only pairs next to a merged token,
//   in a pair table of 8-byte slots in buckets of four (1 MiB for GPT-2's 50K merges) that holds the
//   pair itself when every id is below 2^16 - 1 (a bucket's four checks compared without a branch:
//   mispredicted branches are what a miss costs most); the first lookups, pairs of two bytes, in a
//   256 x 256 table. Words longer than kShortWord, up to kMediumWord bytes (superword pre-tokens,
//   whole lines), keep each pair's rank in an array with the least of each block of 32 (merge_medium:
//   a round scans the blocks' least and visits only blocks that hold the round's rank); longer ones
//   use a heap of candidate pairs with lazy deletion, so a megabyte without a space is O(n log n);
//   from kHugeWord bytes a bucket per merge number
//   instead (merge_huge), whose rounds read memory in order where a big heap's pops missed the
//   caches (a megabyte of random letters 2.8 -> 9.7 MB/s).
// - Ids are written straight into the caller's buffer, sized for the worst case (one id per byte):
//   no copy of the result, and untouched pages of the buffer are never faulted in.
// - Each thread encodes with its own cache. The caches are taken with try_lock: a second caller
//   encoding with the same Encoder at the same time runs uncached instead of waiting.
// - encode_file: threads take chunks in file order as they come free, into a ring of buffers; the
//   calling thread hands finished ones to the sink in order between chunks of its own, so writing
//   overlaps encoding and no thread waits at a barrier.
//
// Memory: a cache reserves its address space when created and never grows: cache_slots * 32 bytes
// of slots (in huge pages where the system grants them) plus cache_slots * 16 bytes of arena,
// resident as it is used. encode uses one; encode_batch and encode_file one per thread, made on
// first use and kept.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "scan/pretokenize_gpt4.hpp"  // PretokenPattern
#include "scan/special_tokens.hpp"

namespace bpe {

// Merge number `rank` (its index in the list) turns the adjacent pair (left, right) into `merged`.
struct MergeRule {
    uint32_t left;
    uint32_t right;
    uint32_t merged;
};

// Receives the ids of encode_file in file order, with the bytes of the file encoded so far; returns
// true to stop (a failed write, an interrupt).
using IdSink = bool (*)(void* context, const uint32_t* ids, size_t count, size_t bytes_done);

class Encoder {
public:
    static constexpr size_t kInlineBytes = 15;
    static constexpr size_t kInlineIds = 3;
    static constexpr size_t kNarrowInlineIds = 6;  // in the same bytes, when every id is below 2^16
    // Ids past the text's worst case (one per byte) that `out` must have room for: a cache hit
    // copies a slot's ids and the rest of its capacity unconditionally.
    static constexpr size_t kSpareIds = kNarrowInlineIds - 1;
    // Up to here merge_short; then merge_medium up to kMediumWord, merge_long, merge_huge. Words of
    // 49-128 bytes went to the heap before (real_mix's superword pre-tokens: 21.2 -> 32.6 MB/s).
    static constexpr size_t kShortWord = 128;
    static constexpr size_t kMediumWord = size_t(1) << 11;
    // From here merge_huge, below merge_long; and from merges / kHugeWordPerMerge bytes at least,
    // which keeps merge_huge's arrays (8 bytes per merge) within a few times the word's own.
    static constexpr size_t kHugeWord = size_t(1) << 11;
    static constexpr size_t kHugeWordPerMerge = 32;

    // `byte_ids[b]` is the id of the single byte b (256 entries); `merges` in rank order (a pair that
    // repeats keeps its first rank); `special_tokens` as (UTF-8 bytes, id), any order, none empty;
    // `cache_slots` is rounded up to a power of two, at least four (0 disables the caches); `pattern`
    // is the pre-tokenizer the vocabulary was trained with, `unicode_table` the index of its character
    // classes in unicode_tables::kTables.
    // Throws std::invalid_argument on malformed arguments, std::bad_alloc if the cache cannot be
    // reserved.
    Encoder(const std::vector<uint32_t>& byte_ids, const std::vector<MergeRule>& merges,
            const std::vector<std::pair<std::string, uint32_t>>& special_tokens, size_t cache_slots,
            PretokenPattern pattern = PretokenPattern::kGpt2, unsigned unicode_table = 0);
    ~Encoder();
    Encoder(const Encoder&) = delete;
    Encoder& operator=(const Encoder&) = delete;

    // Writes the ids of `text` (UTF-8) to `out`, which has room for text.size() + kSpareIds ids (no
    // token is shorter than a byte), and returns how many it wrote. Throws InvalidUtf8Error
    // (pretokenize.hpp) with the offset of the first invalid byte; `out` then holds the ids of the
    // text before it.
    size_t encode(std::string_view text, uint32_t* out);

    // Offsets [0, ..., text.size()] that cut `text` into pieces of about `piece_bytes` whose ids,
    // encoded one by one, are the ids of the whole (chunking.hpp): a caller can then size its
    // buffer for one piece at a time instead of the whole text's worst case.
    std::vector<size_t> pieces(std::string_view text, size_t piece_bytes) const;

    // Appends the ids of `text` to `out` (the same, for C++ callers).
    void encode(std::string_view text, std::vector<uint32_t>& out);

    // encode for each text on `threads` threads (<= 0: OpenMP's default): `outs[i]` has room for
    // texts[i].size() + kSpareIds ids, `counts[i]` receives how many were written.
    void encode_batch(const std::vector<std::string_view>& texts, uint32_t* const* outs, size_t* counts,
                      int threads);

    // Encodes the file at `path` (memory-mapped) on `threads` threads, cut into chunks of about
    // `chunk_bytes` (0: a default) where cutting cannot change the ids (chunking.hpp), and hands the
    // ids to `sink` chunk by chunk in file order; memory holds the ids of a few chunks per thread.
    // Returns the number of ids, or stops early when the sink asks to (the returned count is then
    // what the sink received). Throws InvalidUtf8Error with the file offset (the ids before the
    // chunk holding it have been delivered), std::ios_base::failure when the file cannot be read.
    size_t encode_file(const std::string& path, int threads, size_t chunk_bytes, IdSink sink, void* context);

    size_t cache_slots() const { return cache_slots_; }

private:
    class PairRanks;
    class WordCache;
    struct PendingWord;
    template <bool kNarrow>
    class BatchedLookup;

    // A batch of caches for `threads` threads, or none (uncached) when another call holds them.
    class CacheLease;

    size_t encode_with(std::string_view text, uint32_t* out, WordCache* cache) const;
    template <bool kNarrow>
    size_t encode_cached(std::string_view text, uint32_t* out, WordCache& cache) const;
    uint32_t* encode_ordinary(std::string_view text, size_t offset, uint32_t* out) const;
    uint32_t* encode_word(const PendingWord& word, uint32_t* out, WordCache& cache) const;
    uint32_t* merge(const unsigned char* word, size_t size, uint32_t* out) const;
    size_t merge_short(const unsigned char* word, size_t size, uint32_t* ids) const;
    uint32_t byte_pair_rank(unsigned char left, unsigned char right) const {
        return byte_pair_ranks_[size_t(left) * 256 + right];
    }
    uint32_t* merge_medium(const unsigned char* word, size_t size, uint32_t* out) const;
    uint32_t* merge_long(const unsigned char* word, size_t size, uint32_t* out) const;
    uint32_t* merge_huge(const unsigned char* word, size_t size, uint32_t* out) const;

    uint32_t byte_ids_[256];
    std::unique_ptr<PairRanks> pairs_;
    std::vector<uint32_t> byte_pair_ranks_;  // [left byte * 256 + right byte]: the rank of their ids' pair
    SpecialTokens specials_;
    std::vector<uint32_t> special_ids_;  // the id of each of specials_.tokens()
    PretokenPattern pattern_;
    const unicode_tables::Table* unicode_;  // the pattern's character classes (unicode_tables::kTables)

    size_t huge_word_ = kHugeWord;  // words of this size and more go to merge_huge
    size_t cache_slots_ = 0;
    bool narrow_ids_ = false;  // every id is below 2^16: the caches keep up to kNarrowInlineIds inline
    std::vector<std::unique_ptr<WordCache>> caches_;  // one per thread, made on first use
    std::mutex caches_mutex_;
};

}  // namespace bpe
