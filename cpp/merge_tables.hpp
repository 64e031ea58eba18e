// The merge loop's tables (bpe_merge.cpp): token bytes, pair ids, pair records with their word
// lists, one merge's summed count changes, and heap entries. Only bpe_merge.cpp includes it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "integer_map.hpp"

namespace bpe {
namespace merge_tables {

using TokenId = int32_t;
using PairId = int32_t;
using WordId = int32_t;

// The bytes of every token, back to back, so comparing two tokens allocates nothing.
class TokenTable {
public:
    TokenTable() {
        for (int byte = 0; byte < 256; ++byte) {
            const char symbol = static_cast<char>(byte);
            append(&symbol, 1);
        }
    }

    TokenId add_merge(TokenId left, TokenId right) {
        const Token x = tokens_[left];
        const Token y = tokens_[right];
        std::string joined;
        joined.reserve(x.length + y.length);
        joined.append(pool_, x.start, x.length).append(pool_, y.start, y.length);
        append(joined.data(), joined.size());
        return static_cast<TokenId>(tokens_.size() - 1);
    }

    size_t size() const { return tokens_.size(); }

    std::string bytes(TokenId token) const {
        return pool_.substr(tokens_[token].start, tokens_[token].length);
    }

    // Python's bytes order: unsigned byte-wise, a proper prefix first.
    // Perf: heap pushes compare many tied pairs (most pairs have tiny counts), so each token keeps
    // its first 8 bytes as a big-endian integer, zero-padded; differing prefixes decide in one
    // integer compare (a zero pad only ties with a real zero byte, which the memcmp then settles).
    int compare(TokenId x, TokenId y) const {
        const Token& a = tokens_[x];
        const Token& b = tokens_[y];
        if (a.prefix != b.prefix) return a.prefix < b.prefix ? -1 : 1;
        if (x == y) return 0;
        // memcmp compares as unsigned char, as Python does.
        const int order =
            std::memcmp(pool_.data() + a.start, pool_.data() + b.start, std::min(a.length, b.length));
        if (order != 0) return order;
        return a.length < b.length ? -1 : (a.length > b.length ? 1 : 0);
    }

private:
    struct Token {
        uint64_t prefix;  // first 8 bytes, big-endian, zero-padded
        uint64_t start;   // in pool_
        uint32_t length;
    };

    void append(const char* data, size_t length) {
        uint64_t prefix = 0;
        for (size_t at = 0; at < 8; ++at) {
            prefix = (prefix << 8) | (at < length ? static_cast<unsigned char>(data[at]) : 0u);
        }
        tokens_.push_back({prefix, pool_.size(), static_cast<uint32_t>(length)});
        pool_.append(data, length);
    }

    std::string pool_;
    std::vector<Token> tokens_;
};

// The CS336 tie-break: among pairs with equal counts the merge goes to the lexicographically
// GREATEST (left_bytes, right_bytes), compared as Python compares a tuple of two bytes objects.
// True when pair x = (x_left, x_right) ranks below pair y.
inline bool pair_bytes_less(const TokenTable& tokens, TokenId x_left, TokenId x_right, TokenId y_left,
                     TokenId y_right) {
    const int left_order = tokens.compare(x_left, y_left);
    if (left_order != 0) return left_order < 0;
    return tokens.compare(x_right, y_right) < 0;
}

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

    PairId find(uint64_t key) const { return ids_.find(key, kMissing); }
    void prefetch(uint64_t key) const { ids_.prefetch(key); }

    // The id of `key`, inserting `new_id` first if the key is absent.
    PairId find_or_insert(uint64_t key, PairId new_id) { return ids_.find_or_insert(key, new_id); }

private:
    IntegerMap<PairId> ids_{size_t(1) << 15};
};

// One pair's record: its tokens, its count, and the words listed under it (the inverted index,
// which may hold words that have lost the pair since). 32 bytes, so a count change and a listing
// touch one cache line.
// Memory: most pairs are born late, occur in a word or two and are never merged, so the first two
// word ids live inline and only longer lists allocate.
struct PairRecord {
    int64_t count;
    TokenId left;
    TokenId right;
    uint32_t num_words;  // words listed: inline while at most kInlineWords, else in `spilled`
    union {
        WordId inline_words[2];
        WordId* spilled;  // capacity max(4, bit_ceil(num_words)), from malloc
    };

    static constexpr uint32_t kInlineWords = 2;

    const WordId* words() const { return num_words <= kInlineWords ? inline_words : spilled; }

    // A word gains a pair only while it is being rewritten, so if it is listed already it is last.
    void list_word(WordId word) {
        if (num_words > 0 && words()[num_words - 1] == word) return;
        if (num_words < kInlineWords) {
            inline_words[num_words++] = word;
            return;
        }
        if (num_words == kInlineWords) {
            auto* moved = static_cast<WordId*>(std::malloc(4 * sizeof(WordId)));
            if (moved == nullptr) throw std::bad_alloc();
            std::memcpy(moved, inline_words, sizeof(inline_words));
            spilled = moved;
        } else if (num_words >= 4 && (num_words & (num_words - 1)) == 0) {
            auto* grown = static_cast<WordId*>(std::realloc(spilled, 2 * size_t(num_words) * sizeof(WordId)));
            if (grown == nullptr) throw std::bad_alloc();
            spilled = grown;
        }
        spilled[num_words++] = word;
    }

    void clear_words() {
        if (num_words > kInlineWords) std::free(spilled);
        num_words = 0;
    }

    // Replaces the list by `size` words for the caller to fill in; returns where they go.
    WordId* resize_words(uint32_t size) {
        clear_words();
        if (size > kInlineWords) {
            uint32_t capacity = 4;
            while (capacity < size) capacity *= 2;
            spilled = static_cast<WordId*>(std::malloc(size_t(capacity) * sizeof(WordId)));
            if (spilled == nullptr) throw std::bad_alloc();
        }
        num_words = size;
        return size > kInlineWords ? spilled : inline_words;
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
    ~PairTable() { clear(); }

    void clear() {
        for (size_t id = 0; id < size_; ++id) (*this)[PairId(id)].clear_words();
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
        if ((size_ & kBlockMask) == 0) blocks_.emplace_back(new PairRecord[kBlockSize]);
        PairRecord& record = blocks_.back()[size_ & kBlockMask];
        record.count = 0;
        record.left = left;
        record.right = right;
        record.num_words = 0;
        return static_cast<PairId>(size_++);
    }

private:
    static constexpr size_t kBlockBits = 16;
    static constexpr size_t kBlockSize = size_t(1) << kBlockBits;
    static constexpr size_t kBlockMask = kBlockSize - 1;
    std::vector<std::unique_ptr<PairRecord[]>> blocks_;
    size_t size_ = 0;
};

// The count changes of one merge, summed per pair before any pair record is touched, and the words
// that gain a pair. A merge makes a few changes per word it rewrites but to few distinct pairs, so
// summed here, in a table that stays in cache, the big tables are touched once per distinct pair
// instead of once per change (docs/PERFORMANCE.md).
class MergeDeltas {
public:
    struct Change {
        uint64_t key;   // pair_key(left, right)
        int64_t delta;  // summed count change
        PairId pair;    // filled in when the changes are applied
        uint32_t slot;  // in slots_, to clear it
    };
    struct Listing {
        uint32_t change;  // index into changes()
        WordId word;      // a word that gained the pair
    };

    MergeDeltas() : slots_(kInitialSlots, 0), shift_(64 - kInitialBits) {}

    // Adds `delta` to the pair's change; returns the change's index.
    uint32_t add(uint64_t key, int64_t delta) {
        size_t slot = home(key);
        for (;; slot = (slot + 1) & (slots_.size() - 1)) {
            const uint32_t held = slots_[slot];
            if (held == 0) break;
            Change& change = changes_[held - 1];
            if (change.key == key) {
                change.delta += delta;
                return held - 1;
            }
        }
        const auto index = static_cast<uint32_t>(changes_.size());
        changes_.push_back({key, delta, 0, static_cast<uint32_t>(slot)});
        slots_[slot] = index + 1;
        if (2 * changes_.size() > slots_.size()) grow();
        return index;
    }

    void list(uint32_t change, WordId word) { listings_.push_back({change, word}); }

    // Adds `other`'s changes and then its listings, as if they had been recorded here after this
    // table's own; empties `other`.
    void absorb(MergeDeltas& other) {
        renumbered_.resize(other.changes_.size());
        for (size_t index = 0; index < other.changes_.size(); ++index) {
            renumbered_[index] = add(other.changes_[index].key, other.changes_[index].delta);
        }
        listings_.reserve(listings_.size() + other.listings_.size());
        for (const Listing& listing : other.listings_) listings_.push_back({renumbered_[listing.change], listing.word});
        other.clear();
    }

    std::vector<Change>& changes() { return changes_; }
    const std::vector<Listing>& listings() const { return listings_; }

    void clear() {
        for (const Change& change : changes_) slots_[change.slot] = 0;
        changes_.clear();
        listings_.clear();
    }

private:
    static constexpr unsigned kInitialBits = 12;
    static constexpr size_t kInitialSlots = size_t(1) << kInitialBits;

    size_t home(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }

    void grow() {
        slots_.assign(2 * slots_.size(), 0);
        --shift_;
        for (size_t index = 0; index < changes_.size(); ++index) {
            size_t slot = home(changes_[index].key);
            while (slots_[slot] != 0) slot = (slot + 1) & (slots_.size() - 1);
            slots_[slot] = static_cast<uint32_t>(index + 1);
            changes_[index].slot = static_cast<uint32_t>(slot);
        }
    }

    std::vector<Change> changes_;
    std::vector<Listing> listings_;
    std::vector<uint32_t> slots_;  // index + 1 into changes_, 0 when empty
    std::vector<uint32_t> renumbered_;  // absorb's scratch: another table's change index -> ours
    int shift_;
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
