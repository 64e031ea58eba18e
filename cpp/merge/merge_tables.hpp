// The merge loop's tables (bpe_merge.cpp): token bytes, pair ids, pair records with their word
// lists, one merge's summed count changes, and heap entries. Only bpe_merge.cpp includes it.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "merge/bpe_merge.hpp"
#include "kit/integer_map.hpp"

// Inlining the merge loop's hot paths should not depend on a compiler's heuristics: GCC 13 left
// list_word out of line once the loop had a second, parallel path, and the loop got 4% slower
// (BPE_ALWAYS_INLINE, BPE_NOINLINE: bits.hpp).

namespace bpe {
namespace merge_tables {

using TokenId = int32_t;
using PairId = int32_t;
using WordId = int32_t;

// Each byte's place among HF tokenizers' 256 initial tokens: GPT-2's byte-level characters by code
// point. The printable bytes (33-126, 161-172, 174-255) are their own characters and come first, in
// byte order; the other 68 map to 256 + n in byte order, so they follow in byte order.
inline uint32_t hf_byte_rank(int byte) {
    const auto printable = [](int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174; };
    uint32_t rank = 0;
    for (int other = 0; other < byte; ++other) rank += printable(other) == printable(byte);
    return printable(byte) ? rank : 188 + rank;  // 188 printable bytes
}

// The bytes of every token, so comparing two tokens allocates nothing. Stored in blocks that never
// move: a token is written once, where it stays (a growing string copied every token at each
// doubling, seconds and twice the memory when one long word makes tokens of many megabytes).
// The tie-break rules by id rank each token by one integer, its prefix (see add), so they compare
// no bytes and keep none.
class TokenTable {
public:
    explicit TokenTable(TieBreak tie_break = TieBreak::kCs336) : tie_break_(tie_break) {
        for (int byte = 0; byte < 256; ++byte) {
            char* symbol = reserve(1);
            *symbol = static_cast<char>(byte);
            add(symbol, 1);
        }
    }

    TokenId add_merge(TokenId left, TokenId right) {
        if (tie_break_ != TieBreak::kCs336) {
            add(nullptr, 0);
            return static_cast<TokenId>(tokens_.size() - 1);
        }
        const Token x = tokens_[left];
        const Token y = tokens_[right];
        const size_t length = size_t(x.length) + y.length;
        if (length > UINT32_MAX) throw std::length_error("train_merges: a token of more than 4 GiB");
        char* joined = reserve(length);
        std::memcpy(joined, x.data, x.length);
        std::memcpy(joined + x.length, y.data, y.length);
        add(joined, length);
        return static_cast<TokenId>(tokens_.size() - 1);
    }

    size_t size() const { return tokens_.size(); }

    // Python's bytes order: unsigned byte-wise, a proper prefix first.
    // Perf: heap pushes compare many tied pairs (most pairs have tiny counts), so each token keeps
    // its first 8 bytes as a big-endian integer, zero-padded; differing prefixes decide in one
    // integer compare (a zero pad only ties with a real zero byte, which the memcmp then settles).
    // By id (kSmallestId, kHf) the prefix is unique to its token, so the memcmp is never reached.
    int compare(TokenId x, TokenId y) const {
        const Token& a = tokens_[x];
        const Token& b = tokens_[y];
        if (a.prefix != b.prefix) return a.prefix < b.prefix ? -1 : 1;
        if (x == y) return 0;
        // memcmp compares as unsigned char, as Python does.
        const int order = std::memcmp(a.data, b.data, std::min(a.length, b.length));
        if (order != 0) return order;
        return a.length < b.length ? -1 : (a.length > b.length ? 1 : 0);
    }

private:
    struct Token {
        uint64_t prefix;   // first 8 bytes, big-endian, zero-padded
        const char* data;  // in blocks_
        uint32_t length;
    };
    // Tokens share blocks of this size; a token over a quarter of it has a block of its own.
    static constexpr size_t kBlockBytes = size_t(1) << 16;

    // Room for `length` bytes that never moves.
    char* reserve(size_t length) {
        if (length > kBlockBytes / 4) {
            blocks_.emplace_back(new char[length]);
            return blocks_.back().get();
        }
        if (block_left_ < length) {
            blocks_.emplace_back(new char[kBlockBytes]);
            block_free_ = blocks_.back().get();
            block_left_ = kBlockBytes;
        }
        char* room = block_free_;
        block_free_ += length;
        block_left_ -= length;
        return room;
    }

    void add(const char* data, size_t length) {
        uint64_t prefix = 0;
        if (tie_break_ == TieBreak::kCs336) {
            for (size_t at = 0; at < 8; ++at) {
                prefix = (prefix << 8) | (at < length ? static_cast<unsigned char>(data[at]) : 0u);
            }
        } else {
            // The smallest rank wins a tie, the greatest prefix does: a merged token ranks by its
            // id, a byte by its value or (kHf) by hf_byte_rank.
            const size_t id = tokens_.size();
            const bool hf_byte = tie_break_ == TieBreak::kHf && id < 256;
            prefix = UINT64_MAX - (hf_byte ? hf_byte_rank(int(id)) : id);
        }
        tokens_.push_back({prefix, data, static_cast<uint32_t>(length)});
    }

    TieBreak tie_break_;
    std::vector<std::unique_ptr<char[]>> blocks_;
    char* block_free_ = nullptr;  // the shared block's unused tail
    size_t block_left_ = 0;
    std::vector<Token> tokens_;
};

// The CS336 tie-break: among pairs with equal counts the merge goes to the lexicographically
// GREATEST (left_bytes, right_bytes), compared as Python compares a tuple of two bytes objects
// (the rules by id through the same compare: TokenTable ranks their tokens).
// True when pair x = (x_left, x_right) ranks below pair y.
inline bool pair_bytes_less(const TokenTable& tokens, TokenId x_left, TokenId x_right, TokenId y_left,
                     TokenId y_right) {
    const int left_order = tokens.compare(x_left, y_left);
    if (left_order != 0) return left_order < 0;
    return tokens.compare(x_right, y_right) < 0;
}

// What the limits on a token's words and on ": " read of it (MergeLimits), kept per token so that a
// pair's is known from its tokens' without reading their bytes: its words (non-empty pieces between
// space bytes), its first and last bytes, and whether it holds ": ".
struct TokenShape {
    uint64_t words;
    unsigned char first;
    unsigned char last;
    bool colon_space;

    static TokenShape of_byte(unsigned char byte) { return {byte != ' ', byte, byte, false}; }

    // The token `left` then `right`: where they meet, the last word of one and the first of the other
    // are one word unless a space lies between.
    static TokenShape joined(const TokenShape& left, const TokenShape& right) {
        const bool one_word = left.last != ' ' && right.first != ' ';
        const bool colon_space = left.colon_space || right.colon_space || (left.last == ':' && right.first == ' ');
        return {left.words + right.words - one_word, left.first, right.last, colon_space};
    }
};

inline uint64_t pair_key(TokenId left, TokenId right) {
    return bpe::pair_key(static_cast<uint32_t>(left), static_cast<uint32_t>(right));
}
inline TokenId key_left(uint64_t key) { return static_cast<TokenId>(key >> 32); }
inline TokenId key_right(uint64_t key) { return static_cast<TokenId>(key & 0xFFFFFFFFu); }

// Pair key -> pair id (std::unordered_map chases a node pointer per lookup and is much slower,
// docs/PERFORMANCE.md). Nothing is ever erased: a pair whose count reaches 0 can never come back
// (see merge_word), so dead keys just keep their slot until a prune builds a new map.
class PairIdMap {
public:
    static constexpr PairId kMissing = -1;

    // Room for `expected` pairs before the map first grows.
    explicit PairIdMap(size_t expected = size_t(1) << 15) : ids_(expected) {}

    PairId find(uint64_t key) const { return ids_.find(key, kMissing); }
    bool may_contain(uint64_t key) const { return ids_.may_contain(key); }
    PairId find_concurrently(uint64_t key) const { return ids_.find_concurrently(key, kMissing); }
    void prefetch(uint64_t key) const { ids_.prefetch(key); }

    // The id of `key`, inserting `new_id` first if the key is absent.
    PairId find_or_insert(uint64_t key, PairId new_id) { return ids_.find_or_insert(key, new_id); }

    // Keys known to be new, inserted by several threads at once (see IntegerMap).
    void reserve_more(size_t extra) { ids_.reserve_more(extra); }
    void insert_new_concurrently(uint64_t key, PairId id) { ids_.insert_absent_concurrently(key, id); }
    void add_inserted(size_t count) { ids_.add_inserted(count); }

private:
    IntegerMap<PairId> ids_;
};

// Word lists longer than a pair record holds inline, in blocks of 4, 8, 16, ... word ids carved
// from large chunks, with a free list per block size: a list that grows or dies hands its block to
// the next list of that size, so no list costs a malloc and a free (they were a tenth of the merge
// loop, docs/PERFORMANCE.md). Blocks live until the pool is reset or destroyed; a block may go back
// to another pool than the one it came from (one pool per thread). Free blocks of 1,024 ids and
// more go to Spares, which the pools share.
class WordListPool {
private:
    struct FreeBlock {
        FreeBlock* next;
    };
    static constexpr size_t kChunkBytes = size_t(1) << 20;
    static constexpr size_t kClasses = 32;
    // Free blocks of this size class and above are shared (Spares).
    static constexpr size_t kSharedClass = 10;
    // Blocks of this size class and above are chunks of their own (more than a quarter chunk).
    static constexpr size_t kOwnChunkClass = 17;
    static_assert((size_t(1) << (kOwnChunkClass - 1)) * 4 == kChunkBytes / 4, "a quarter chunk is carved");

public:
    static constexpr uint32_t kSmallestBlock = 4;

    // The pools' free blocks of kSharedClass and above, under a lock (taken for lists of 1,024
    // words and more, a few per merge). The first merges free hundreds of megabytes of such lists
    // (the byte pairs'); kept by the pool that freed them, they left the other threads carving new
    // memory (docs/PERFORMANCE.md).
    class Spares {
    public:
        void give(WordId* block, size_t size_class) {
            std::lock_guard<std::mutex> lock(mutex_);
            auto* freed = reinterpret_cast<FreeBlock*>(block);
            freed->next = free_[size_class];
            free_[size_class] = freed;
            held_.store(held_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        }
        // The smallest free block of `size_class` or above, and its class; null when none.
        std::pair<WordId*, size_t> take(size_t size_class) {
            if (held_.load(std::memory_order_relaxed) == 0) return {nullptr, 0};  // no lock while empty
            std::lock_guard<std::mutex> lock(mutex_);
            for (size_t held = size_class; held < kClasses; ++held) {
                FreeBlock* block = free_[held];
                if (block == nullptr) continue;
                free_[held] = block->next;
                held_.store(held_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
                return {reinterpret_cast<WordId*>(block), held};
            }
            return {nullptr, 0};
        }
        // Forgets every block (their pools are being reset).
        void clear() {
            std::lock_guard<std::mutex> lock(mutex_);
            std::fill(std::begin(free_), std::end(free_), nullptr);
            held_.store(0, std::memory_order_relaxed);
        }

    private:
        std::mutex mutex_;
        FreeBlock* free_[kClasses] = {};
        std::atomic<size_t> held_{0};  // blocks in free_
    };

    void share(Spares* spares) { spares_ = spares; }

    // The smallest power of two that is at least num_words and kSmallestBlock.
    static uint32_t block_size(uint32_t num_words) {
        if (num_words <= kSmallestBlock) return kSmallestBlock;
        return uint32_t(1) << (64 - count_leading_zeros(uint64_t(num_words - 1)));
    }

    // A block of `size` word ids, a power of two of at least kSmallestBlock.
    WordId* allocate(uint32_t size) {
        WordId* block = take_free(size_class(size));
        return block != nullptr ? block : carve(size);
    }

    // Room for `size` word ids, rounded up to kSmallestBlock: a free block of the next power of
    // two, whose tail goes back at once (release_range), or new memory of just that size.
    // Perf: new memory carved to measure is not touched here. Giving back a tail wrote its link
    // into a new page: 12K page faults on one thread as the byte pairs' lists were made.
    WordId* allocate_exact(uint32_t size) {
        const uint32_t used = exact_size(size);
        const uint32_t held = block_size(used);
        WordId* block = take_free(size_class(held));
        if (block == nullptr) return carve(used);
        release_range(block + used, held - used);
        return block;
    }

    // `size` word ids, a multiple of kSmallestBlock, given back as blocks of powers of two,
    // largest first. Out of line: called once per list, and inlined it moved GCC's inlining of the
    // merge loop's own helpers.
    BPE_NOINLINE void release_range(WordId* words, uint32_t size) {
        while (size != 0) {
            const uint32_t piece = uint32_t(1) << (63 - count_leading_zeros(uint64_t(size)));
            release(words, piece);
            words += piece;
            size -= piece;
        }
    }

    // What a list of num_words (more than kInlineWords) holds once it is complete.
    static uint32_t exact_size(uint32_t num_words) { return (num_words + kSmallestBlock - 1) & ~(kSmallestBlock - 1); }

    void release(WordId* block, uint32_t size) {
        const size_t size_class = this->size_class(size);
        if (size_class >= kSharedClass && spares_ != nullptr) {
            spares_->give(block, size_class);
            return;
        }
        auto* freed = reinterpret_cast<FreeBlock*>(block);
        freed->next = free_[size_class];
        free_[size_class] = freed;
    }

    // Frees every block at once (the Spares are the caller's to clear).
    void reset() {
        Spares* spares = spares_;
        *this = WordListPool();
        spares_ = spares;
    }

private:
    static_assert(sizeof(FreeBlock) <= kSmallestBlock * sizeof(WordId), "a free block holds its link");

    static size_t size_class(uint32_t size) { return size_t(count_trailing_zeros(size)); }

    // [0, 2^wanted) of a free block of class `held` is the caller's; [2^wanted, 2^(wanted + 1)),
    // [2^(wanted + 1), 2^(wanted + 2)), ... go back.
    WordId* split(WordId* words, size_t wanted, size_t held) {
        for (size_t piece = wanted; piece < held; ++piece) release(words + (size_t(1) << piece), uint32_t(1) << piece);
        return words;
    }

    // The smallest free block of class `wanted` or above, split to that class; null when none.
    // Perf: a larger free block is split (the smallest there is) before a chunk is carved: the
    // lists of the first merges free hundreds of megabytes in big blocks, and new memory costs a
    // page fault per 4 KiB (docs/PERFORMANCE.md).
    WordId* take_free(size_t wanted) {
        for (size_t held = wanted; held < kSharedClass; ++held) {
            FreeBlock* block = free_[held];
            if (block == nullptr) continue;
            free_[held] = block->next;
            return split(reinterpret_cast<WordId*>(block), wanted, held);
        }
        if (spares_ != nullptr) {
            const auto [block, held] = spares_->take(std::max(wanted, kSharedClass));
            if (block != nullptr) return split(block, wanted, held);
        }
        return nullptr;
    }

    // `size` word ids of new memory, a multiple of kSmallestBlock.
    WordId* carve(uint32_t size) {
        const size_t bytes = size_t(size) * sizeof(WordId);
        if (size_class(block_size(size)) >= kOwnChunkClass) return new_chunk(bytes);  // a long list: its own chunk
        if (bytes > chunk_left_) {
            chunk_next_ = new_chunk(kChunkBytes);
            chunk_left_ = kChunkBytes;
        }
        WordId* block = chunk_next_;
        chunk_next_ += size;
        chunk_left_ -= bytes;
        return block;
    }

    WordId* new_chunk(size_t bytes) {
        chunks_.emplace_back(new uint64_t[(bytes + sizeof(uint64_t) - 1) / sizeof(uint64_t)]);
        return reinterpret_cast<WordId*>(chunks_.back().get());
    }

    std::vector<std::unique_ptr<uint64_t[]>> chunks_;  // 8-byte aligned, for the free links
    WordId* chunk_next_ = nullptr;
    size_t chunk_left_ = 0;
    FreeBlock* free_[kClasses] = {};
    Spares* spares_ = nullptr;
};

// One pair's record: its tokens, its count, and the words listed under it (the inverted index,
// which may hold words that have lost the pair since). 32 bytes, so a count change and a listing
// touch one cache line.
// Memory: most pairs are born late, occur in a word or two and are never merged, so the first two
// word ids live inline and only longer lists take a block from a WordListPool. A pair gains words
// only in the merge that creates its newer token (merge_word), so its list is complete when that
// merge ends: it grows in blocks of powers of two while it is being listed (list_word), then keeps
// only what it holds (settle_words), as a list made to measure does (resize_words).
struct PairRecord {
    int64_t count;
    TokenId left;
    TokenId right;
    uint32_t num_words;  // words listed: inline while at most kInlineWords, else in `spilled`
    union {
        WordId inline_words[2];
        WordId* spilled;  // WordListPool::exact_size(num_words) ids; block_size(num_words) while listing
    };

    static constexpr uint32_t kInlineWords = 2;

    const WordId* words() const { return num_words <= kInlineWords ? inline_words : spilled; }

    // A word gains a pair only while it is being rewritten, so if it is listed already it is last.
    BPE_ALWAYS_INLINE void list_word(WordId word, WordListPool& pool) {
        if (num_words > 0 && words()[num_words - 1] == word) return;
        if (num_words < kInlineWords) {
            inline_words[num_words++] = word;
            return;
        }
        if (num_words == kInlineWords) {
            WordId* moved = pool.allocate(WordListPool::kSmallestBlock);
            std::memcpy(moved, inline_words, sizeof(inline_words));
            spilled = moved;
        } else if ((num_words & (num_words - 1)) == 0) {  // a full block: its size is a power of two
            WordId* grown = pool.allocate(2 * num_words);
            std::memcpy(grown, spilled, size_t(num_words) * sizeof(WordId));
            pool.release(spilled, num_words);
            spilled = grown;
        }
        spilled[num_words++] = word;
    }

    // A complete list's words back to the pool.
    void clear_words(WordListPool& pool) {
        if (num_words > kInlineWords) pool.release_range(spilled, WordListPool::exact_size(num_words));
        num_words = 0;
    }

    // Once list_word has listed every word the pair will have: the room past them goes back.
    void settle_words(WordListPool& pool) {
        if (num_words <= kInlineWords) return;
        const uint32_t used = WordListPool::exact_size(num_words);
        pool.release_range(spilled + used, WordListPool::block_size(num_words) - used);
    }

    // Replaces the list by `size` words for the caller to fill in; returns where they go.
    WordId* resize_words(uint32_t size, WordListPool& pool) {
        clear_words(pool);
        num_words = size;
        if (size <= kInlineWords) return inline_words;
        spilled = pool.allocate_exact(size);
        return spilled;
    }
};
static_assert(sizeof(PairRecord) == 32, "a pair record should stay half a cache line");

// Pair records by PairId, in blocks that never move: growing copies nothing (a doubling vector
// would hold old and new copies at once) and a record's address stays valid while new pairs are
// added.
class PairTable {
public:
    PairTable() = default;
    PairTable(const PairTable&) = delete;
    PairTable& operator=(const PairTable&) = delete;
    // The word lists stay with their pool.
    void clear() {
        blocks_.clear();
        size_ = 0;
    }

    PairRecord& operator[](PairId id) { return blocks_[size_t(id) >> kBlockBits][size_t(id) & kBlockMask]; }
    const PairRecord& operator[](PairId id) const {
        return blocks_[size_t(id) >> kBlockBits][size_t(id) & kBlockMask];
    }
    size_t size() const { return size_; }

    void swap(PairTable& other) noexcept {
        blocks_.swap(other.blocks_);
        std::swap(size_, other.size_);
    }

    PairId add(TokenId left, TokenId right) {
        if (size_ >= static_cast<size_t>(INT32_MAX)) throw std::length_error("train_merges: more than 2^31 pairs");
        if ((size_ >> kBlockBits) == blocks_.size()) blocks_.emplace_back(new PairRecord[kBlockSize]);
        PairRecord& record = blocks_[size_ >> kBlockBits][size_ & kBlockMask];
        record.count = 0;
        record.left = left;
        record.right = right;
        record.num_words = 0;
        return static_cast<PairId>(size_++);
    }

    // Room for `extra` more records without allocating, so that threads can fill in records past
    // size() side by side; grow_to then counts them (every field of each filled in by the caller).
    void reserve(size_t extra) {
        if (size_ + extra > static_cast<size_t>(INT32_MAX)) throw std::length_error("train_merges: more than 2^31 pairs");
        while ((blocks_.size() << kBlockBits) < size_ + extra) blocks_.emplace_back(new PairRecord[kBlockSize]);
    }
    void grow_to(size_t size) { size_ = size; }

private:
    static constexpr size_t kBlockBits = 16;
    static constexpr size_t kBlockSize = size_t(1) << kBlockBits;
    static constexpr size_t kBlockMask = kBlockSize - 1;
    std::vector<std::unique_ptr<PairRecord[]>> blocks_;
    size_t size_ = 0;
};

// The count changes of one merge (left, right) -> new token, summed per pair before any pair record
// is touched, and the words that gain a pair. A merge makes a few changes per word it rewrites but
// to few distinct pairs, so summed here, in a table that stays in cache, the big tables are touched
// once per distinct pair instead of once per change (docs/PERFORMANCE.md).
// Every changed pair but the merged one (whose count just drops to 0) is next to an occurrence:
// (x, left) and (right, y) lose, (x, new) and (new, y) gain. So a change is found by its side and
// its other token x or y in a dense array per side, with no hashing.
class MergeDeltas {
public:
    enum Side : uint32_t {
        kBeforeLeft = 0,   // (x, left), which includes (right, left)
        kAfterRight = 1,   // (right, y)
        kBeforeNew = 2,    // (x, new token), which includes (new, new)
        kAfterNew = 3,     // (new token, y)
    };
    struct Change {
        uint64_t key;   // pair_key(left, right)
        int64_t delta;  // summed count change
        PairId pair;    // filled in when the changes are applied
        Side side;
    };
    struct Listing {
        uint32_t change;  // index into changes()
        WordId word;      // a word that gained the pair
    };

    // Room for changes naming tokens below `num_tokens`.
    void reserve_tokens(size_t num_tokens) {
        if (slots_[0].size() >= num_tokens) return;
        for (std::vector<uint32_t>& slots : slots_) slots.resize(std::max(num_tokens, 2 * slots.size()), 0);
    }

    // Adds `delta` to the change of the pair `key`, which `side` and `other` name; returns the
    // change's index.
    uint32_t add(Side side, TokenId other, uint64_t key, int64_t delta) {
        uint32_t& slot = slots_[side][size_t(other)];
        if (slot != 0) {
            changes_[slot - 1].delta += delta;
            return slot - 1;
        }
        changes_.push_back({key, delta, 0, side});
        slot = static_cast<uint32_t>(changes_.size());
        return slot - 1;
    }

    // Adds a loss like add(), unless `tracked.may_contain(key)` is false: a loss of a pair that is
    // not tracked changes nothing, and most losses of merges of a few thousand words are such (84%
    // on OWT-like text), so they are dropped here rather than looked up in the pair map by
    // apply_changes. Once dropped, the pair's slot drops its later losses in this merge too.
    void add_loss(Side side, TokenId other, uint64_t key, int64_t delta, const PairIdMap& tracked) {
        uint32_t& slot = slots_[side][size_t(other)];
        if (slot == kUntracked) return;
        if (slot != 0) {
            changes_[slot - 1].delta += delta;
        } else if (tracked.may_contain(key)) {
            changes_.push_back({key, delta, 0, side});
            slot = static_cast<uint32_t>(changes_.size());
        } else {
            slot = kUntracked;
            untracked_.push_back(uint64_t(side) << 32 | uint64_t(uint32_t(other)));
        }
    }

    // Whether the losses of the pair that `side` and `other` name are being dropped (add_loss).
    bool drops(Side side, TokenId other) const { return slots_[side][size_t(other)] == kUntracked; }

    // Room for `count` more listings, so that list() need not check (one check per word).
    void reserve_listings(size_t count) {
        if (num_listings_ + count > listings_.size()) {
            listings_.resize(std::max(num_listings_ + count, 2 * listings_.size()));
        }
    }
    void list(uint32_t change, WordId word) {
        Listing& listing = listings_[num_listings_++];
        listing.change = change;
        listing.word = word;
    }

    // Adds another table's change (its side, pair and delta); returns its index here.
    uint32_t add(const Change& change) { return add(change.side, other_token(change), change.key, change.delta); }

    std::vector<Change>& changes() { return changes_; }

    // Keeps the listings for which keep(listing) is true, in order.
    template <typename Keep>
    void keep_listings(Keep&& keep) {
        size_t kept = 0;
        for (size_t at = 0; at < num_listings_; ++at) {
            if (keep(listings_[at])) listings_[kept++] = listings_[at];
        }
        num_listings_ = kept;
    }
    struct Listings {
        const Listing* first;
        const Listing* last;
        const Listing* begin() const { return first; }
        const Listing* end() const { return last; }
    };
    Listings listings() const { return {listings_.data(), listings_.data() + num_listings_}; }

    void clear() {
        for (const Change& change : changes_) slots_[change.side][size_t(other_token(change))] = 0;
        for (const uint64_t dropped : untracked_) slots_[dropped >> 32][size_t(uint32_t(dropped))] = 0;
        changes_.clear();
        untracked_.clear();
        num_listings_ = 0;
    }

    // The token beside the merged pair's side of a change: where the change is summed.
    static TokenId other_token(const Change& change) {
        return change.side == kBeforeLeft || change.side == kBeforeNew ? key_left(change.key) : key_right(change.key);
    }

private:

    static constexpr uint32_t kUntracked = UINT32_MAX;  // a slot whose losses are dropped

    std::vector<Change> changes_;
    std::vector<uint64_t> untracked_;  // side << 32 | other token of each kUntracked slot
    std::vector<Listing> listings_;  // the first num_listings_ are this merge's
    size_t num_listings_ = 0;
    std::vector<uint32_t> slots_[4];    // per side, by other token: index + 1 into changes_, 0 when none
};

// Perf: the entry carries the pair's tokens (as its key) rather than reading them from the pair
// table, so comparing two entries with equal counts reads no pair record.
struct HeapEntry {
    int64_t count;  // the pair's count when pushed; stale once the pair's count differs
    uint64_t key;   // pair_key(left, right)
    PairId pair;
};

}  // namespace merge_tables
}  // namespace bpe
