// The v4 merge algorithm in C++: incremental pair counts, an inverted index pair -> words, and a
// max-heap with lazy deletion. See bpe_merge.hpp for the contract and cs336_basics/bpe_v4.py for
// the same algorithm in readable Python.
#include "bpe_merge.hpp"

#include "omp_shim.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>

namespace bpe {

void WordCounts::add(const char* data, size_t len, int64_t count) {
    bytes.append(data, len);
    offsets.push_back(bytes.size());
    counts.push_back(count);
}

void WordCounts::reserve(size_t num_words, size_t num_bytes) {
    bytes.reserve(num_bytes);
    offsets.reserve(num_words + 1);
    counts.reserve(num_words);
}

namespace {

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
bool pair_bytes_less(const TokenTable& tokens, TokenId x_left, TokenId x_right, TokenId y_left,
                     TokenId y_right) {
    const int left_order = tokens.compare(x_left, y_left);
    if (left_order != 0) return left_order < 0;
    return tokens.compare(x_right, y_right) < 0;
}

inline uint64_t pair_key(TokenId left, TokenId right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}
inline TokenId key_left(uint64_t key) { return static_cast<TokenId>(key >> 32); }
inline TokenId key_right(uint64_t key) { return static_cast<TokenId>(key & 0xFFFFFFFFu); }

// Pair key -> pair id. Open addressing with linear probing over one array of {key, id} slots, so a
// lookup is usually a single cache line; std::unordered_map (reserved) chases a node pointer per
// lookup and made the whole loop ~1.6x slower on 20 MB of text with a 32K vocab.
// Nothing is ever erased: a pair whose count reaches 0 can never come back (see merge_word), so
// dead keys just keep their slot until a prune builds a new map.
class PairIdMap {
public:
    static constexpr PairId kMissing = -1;

    PairIdMap() { resize(1 << 16); }

    PairId find(uint64_t key) const {
        for (size_t slot = home(key);; slot = (slot + 1) & mask_) {
            if (slots_[slot].key == key) return slots_[slot].id;
            if (slots_[slot].key == kEmpty) return kMissing;
        }
    }

    // The id of `key`, inserting `new_id` first if the key is absent.
    PairId find_or_insert(uint64_t key, PairId new_id) {
        size_t slot = home(key);
        for (;; slot = (slot + 1) & mask_) {
            if (slots_[slot].key == key) return slots_[slot].id;
            if (slots_[slot].key == kEmpty) break;
        }
        slots_[slot] = {key, new_id};
        // Load factor at most 1/2 keeps linear-probing runs short.
        if (++size_ * 2 > slots_.size()) resize(slots_.size() * 2);
        return new_id;
    }

private:
    // Token ids are non-negative int32, so no real key has its top bit set.
    static constexpr uint64_t kEmpty = ~uint64_t{0};
    struct Slot {
        uint64_t key;
        PairId id;
    };

    // Fibonacci hashing: the multiply spreads the (left << 32 | right) bits into the high bits.
    size_t home(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }

    void resize(size_t capacity) {
        std::vector<Slot> old = std::move(slots_);
        slots_.assign(capacity, Slot{kEmpty, kMissing});
        mask_ = capacity - 1;
        shift_ = 64;
        for (size_t c = capacity; c > 1; c >>= 1) --shift_;
        for (const Slot& slot : old) {
            if (slot.key == kEmpty) continue;
            size_t index = home(slot.key);
            while (slots_[index].key != kEmpty) index = (index + 1) & mask_;
            slots_[index] = slot;
        }
    }

    std::vector<Slot> slots_;
    size_t mask_ = 0;
    int shift_ = 64;
    size_t size_ = 0;
};

// One pair's record: its tokens, its count, and the words listed under it (the inverted index,
// which may hold words that have lost the pair since). 32 bytes, so a count change and a listing
// touch one cache line.
// Memory: most pairs are born late, occur in a word or two and are never merged, so the first two
// word ids live inline and only longer lists allocate (18M pairs on the 11.9 GB OWT-like corpus:
// std::vector per pair cost a 24-byte header plus a heap block for each).
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
// would hold old and new copies at once, 0.6 GB each at the end of a 32K-vocab OWT run) and a
// record's address stays valid while new pairs are added.
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
// that gain a pair. Perf: a merge makes a few changes per word it rewrites but to few distinct
// pairs (the first 8,000 merges on the 11.9 GB OWT-like corpus: 94M word visits, 308M changes,
// 3.7M distinct pairs changed). Applied one by one, every change was a lookup in the pair map and
// a pair record, each a cache miss in gigabytes of tables; summed here, in a table that stays in
// cache, the big tables are touched once per distinct pair.
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
    int shift_;
};

// Perf: the entry carries the pair's tokens (as its key) rather than reading them from the pair
// table, so comparing two entries with equal counts reads no pair record.
struct HeapEntry {
    int64_t count;  // the pair's count when pushed; stale once the pair's count differs
    uint64_t key;   // pair_key(left, right)
    PairId pair;
};

// Fewer words than this per thread are counted on fewer threads: a team costs more than it saves.
constexpr size_t kWordsPerThread = 1 << 12;

// How many words ahead of the one being merged to prefetch (its metadata twice as far ahead).
constexpr size_t kPrefetchDistance = 8;

inline void prefetch(const void* address) {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(address);
#else
    (void)address;
#endif
}

// Each time the heap runs dry it admits the pairs counting at least this fraction of the highest
// count left out (see lower_bar).
constexpr int64_t kAdmissionStep = 4;

// Pruning pairs that can never be merged. A pair's count only grows in the merge that creates one
// of its tokens (every pair that gains holds the new token), so a pair is born with the most it
// will ever count, and merge counts never rise. Once the pair table is large, the pairs are
// pruned: from then on pairs that count (or are born with) less than 1/kBirthFloorDivisor of the
// best count are not tracked at all. Exact: untracked pairs count less than this floor, so the best
// tracked pair is the best pair while it counts at least the floor; when it does not, every pair is
// counted again from the words (slow, but it takes counts falling 1024-fold after a prune).
// Perf/memory (11.9 GB OWT-like corpus, 32K vocab): the second half of training gave birth to
// 30M pairs, nearly all counting 1 or 2: building them was half the merge time and most of its
// 6.3 GB. One prune, at merge ~16,000 (best count 25,629, floor 25), kept 1.0M of 4.2M pairs.
constexpr int64_t kBirthFloorDivisor = 1024;

// Compact the heap (drop stale entries) when it has grown to this many times its size after the
// last compaction or admission, plus kCompactionSlack.
constexpr size_t kCompactionFactor = 2;
constexpr size_t kCompactionSlack = 1 << 16;

// Perf/memory findings (11.9 GB OWT-like corpus: 5.1M distinct words, 32K vocab, one core of a
// 2-core VM; the same merges throughout):
// - The loop is bound by memory latency: every word touched and every pair changed is a cache
//   miss in gigabytes of tables. The first version (a vector per pair for its words, a count
//   change applied pair by pair, every changed pair pushed on the heap) took 215 s and 8.0 GB.
// - Only contenders in the heap (the admission bar) and 32-byte pair records with inline word
//   lists: 175 s, 6.3 GB. Summing each merge's changes first (MergeDeltas): 88-103 s.
// - Pruning pairs born too small to be merged (kBirthFloorDivisor): 81 s, 2.8 GB.
// - Transparent huge pages for the tables gained 5%, not worth their code.
class Trainer {
public:
    Trainer(const WordCounts& words, int num_threads, size_t prune_limit)
        : prune_limit_(prune_limit), prune_at_(prune_limit) {
        load_words(words);
        count_initial_pairs(num_threads);
    }

    std::vector<Merge> run(size_t num_merges, MergeProgress progress, void* context) {
        std::vector<Merge> merges;
        merges.reserve(std::min<size_t>(num_merges, 1 << 16));
        while (merges.size() < num_merges) {
            const PairId best = pop_best();
            if (best == PairIdMap::kMissing) break;  // no pair left anywhere
            if (256 + merges.size() >= static_cast<size_t>(INT32_MAX)) {
                throw std::length_error("train_merges: more than 2^31 tokens");
            }
            const TokenId left = pairs_[best].left;
            const TokenId right = pairs_[best].right;
            merges.emplace_back(tokens_.bytes(left), tokens_.bytes(right));
            apply_merge(best, tokens_.add_merge(left, right));
            if (progress != nullptr) progress(context, merges.size());
        }
        return merges;
    }

private:
    // Words of one byte, or seen 0 times, hold no pair and are dropped; the rest become symbols.
    void load_words(const WordCounts& words) {
        const size_t num_words = words.counts.size();
        if (words.offsets.size() != num_words + 1 || words.offsets.front() != 0 ||
            words.offsets.back() != words.bytes.size()) {
            throw std::invalid_argument(
                "WordCounts: offsets must hold size() + 1 entries, from 0 to bytes.size()");
        }
        symbols_.reserve(words.bytes.size());
        for (size_t word = 0; word < num_words; ++word) {
            const uint64_t begin = words.offsets[word];
            const uint64_t end = words.offsets[word + 1];
            const int64_t count = words.counts[word];
            if (end < begin) throw std::invalid_argument("WordCounts: offsets must not decrease");
            if (count < 0) throw std::invalid_argument("WordCounts: counts must not be negative");
            if (end - begin < 2 || count == 0) continue;
            if (end - begin > UINT32_MAX) {
                throw std::invalid_argument("WordCounts: a word longer than 4 GiB");
            }
            words_.push_back({symbols_.size(), count, static_cast<uint32_t>(end - begin)});
            for (uint64_t at = begin; at < end; ++at) {
                symbols_.push_back(static_cast<unsigned char>(words.bytes[at]));
            }
        }
        if (words_.size() > static_cast<size_t>(INT32_MAX)) {
            throw std::invalid_argument("WordCounts: more than 2^31 distinct words");
        }
    }

    // Every pair of the unmerged words is a pair of bytes, so a table of all 65,536 replaces the
    // hash map here, and the words can be split between threads: each counts its share of the
    // words into tables of its own, then, once every list's length and each thread's offset in it
    // are known, writes its word ids into place. The pairs, their counts and lists come out the
    // same for every thread count (lists in word order).
    void count_initial_pairs(int num_threads) {
        constexpr size_t kBytePairs = 1 << 16;
        const size_t num_words = words_.size();
        const size_t threads = size_t(std::clamp<int64_t>(num_threads, 1, int64_t(num_words / kWordsPerThread) + 1));
        struct Share {
            std::vector<int64_t> counts = std::vector<int64_t>(kBytePairs, 0);
            std::vector<uint32_t> listed = std::vector<uint32_t>(kBytePairs, 0);  // then: offset in the list
        };
        std::vector<Share> shares(threads);
        const auto first_word = [&](size_t share) { return num_words * share / threads; };
        // Calls visit(byte_pair, word) once per word that holds the pair, and counts every occurrence.
        const auto scan = [&](size_t share, std::vector<int64_t>* counts, auto&& visit) {
            std::vector<WordId> last_word(kBytePairs, -1);
            const auto count_pair = [&](TokenId left, TokenId right, int64_t count, WordId word) {
                const size_t byte_pair = size_t(left) << 8 | size_t(right);
                if (counts != nullptr) (*counts)[byte_pair] += count;
                if (last_word[byte_pair] != word) {
                    last_word[byte_pair] = word;
                    visit(byte_pair, word);
                }
            };
            for_each_pair(first_word(share), first_word(share + 1), count_pair);
        };
        parallel_for(threads, num_threads, [&](size_t share) {
            std::vector<uint32_t>& listed = shares[share].listed;
            scan(share, &shares[share].counts, [&](size_t byte_pair, WordId) { ++listed[byte_pair]; });
        });
        std::vector<WordId*> lists(kBytePairs, nullptr);
        for (size_t byte_pair = 0; byte_pair < kBytePairs; ++byte_pair) {
            int64_t count = 0;
            uint32_t listed = 0;
            for (Share& share : shares) {
                count += share.counts[byte_pair];
                const uint32_t offset = listed;
                listed += share.listed[byte_pair];
                share.listed[byte_pair] = offset;
            }
            if (listed == 0) continue;
            PairRecord& record = pairs_[pair_id(TokenId(byte_pair >> 8), TokenId(byte_pair & 0xFF))];
            record.count = count;
            lists[byte_pair] = record.resize_words(listed);
        }
        parallel_for(threads, num_threads, [&](size_t share) {
            std::vector<uint32_t>& next = shares[share].listed;
            scan(share, nullptr, [&](size_t byte_pair, WordId word) { lists[byte_pair][next[byte_pair]++] = word; });
        });
    }

    // Calls visit(left, right, word count, word) for each adjacent pair of words [first, last).
    template <typename Visit>
    void for_each_pair(size_t first, size_t last, Visit&& visit) const {
        for (size_t word = first; word < last; ++word) {
            const Word& info = words_[word];
            const TokenId* symbols = symbols_.data() + info.begin;
            for (uint32_t at = 0; at + 1 < info.length; ++at) {
                visit(symbols[at], symbols[at + 1], info.count, WordId(word));
            }
        }
    }

    PairId pair_id(TokenId left, TokenId right) {
        const PairId next_id = static_cast<PairId>(pairs_.size());
        const PairId id = pair_ids_.find_or_insert(pair_key(left, right), next_id);
        if (id == next_id) pairs_.add(left, right);
        return id;
    }

    bool ranks_below(const HeapEntry& x, const HeapEntry& y) const {
        if (x.count != y.count) return x.count < y.count;
        return pair_bytes_less(tokens_, key_left(x.key), key_right(x.key), key_left(y.key),
                               key_right(y.key));
    }

    HeapEntry entry(PairId pair) const {
        const PairRecord& record = pairs_[pair];
        return {record.count, pair_key(record.left, record.right), pair};
    }

    auto heap_order() const {
        return [this](const HeapEntry& x, const HeapEntry& y) { return ranks_below(x, y); };
    }

    void push(PairId pair) {
        heap_.push_back(entry(pair));
        std::push_heap(heap_.begin(), heap_.end(), heap_order());
    }

    // Restores the heap property over all of heap_, which becomes the size compaction measures from.
    void heapify() {
        std::make_heap(heap_.begin(), heap_.end(), heap_order());
        heap_size_after_build_ = heap_.size();
    }

    // The best pair over all, tracked or not. Untracked pairs count less than the birth floor, so
    // a tracked pair at or above it is the best; below it (or with none left) recount.
    PairId pop_best() {
        for (;;) {
            const PairId best = pop_best_tracked();
            if (birth_floor_ == 1 || (best != PairIdMap::kMissing && pairs_[best].count >= birth_floor_)) {
                return best;
            }
            recount_pairs();
        }
    }

    // Lazy deletion: entries whose count no longer matches are dropped when they reach the top.
    // When no valid entry is left, no pair counts more than the admission bar, so the bar comes
    // down and the next band of pairs is admitted.
    PairId pop_best_tracked() {
        do {
            while (!heap_.empty()) {
                const HeapEntry top = heap_.front();
                std::pop_heap(heap_.begin(), heap_.end(), heap_order());
                heap_.pop_back();
                if (top.count > 0 && top.count == pairs_[top.pair].count) return top.pair;
            }
        } while (lower_bar());
        return PairIdMap::kMissing;
    }

    // The admission bar: every pair counting more than bar_ has a heap entry with its current
    // count, so the best valid entry is the best pair. Called with no valid entry left: admits
    // every pair counting at least 1/kAdmissionStep of the highest count left out. Returns false
    // when no pair with a positive count is left. One scan of the pair table per call; the bar
    // falls geometrically, so that is a few dozen scans per training.
    bool lower_bar() {
        int64_t highest_left_out = 0;
        for (size_t id = 0; id < pairs_.size(); ++id) {
            const int64_t count = pairs_[PairId(id)].count;
            if (count <= bar_ && count > highest_left_out) highest_left_out = count;
        }
        if (highest_left_out == 0) return false;
        const int64_t new_bar = std::max<int64_t>(1, highest_left_out / kAdmissionStep) - 1;
        heap_.clear();
        for (size_t id = 0; id < pairs_.size(); ++id) {
            const int64_t count = pairs_[PairId(id)].count;
            if (count > new_bar && count <= bar_) heap_.push_back(entry(PairId(id)));
        }
        bar_ = new_bar;
        heapify();
        return true;
    }

    // Drops stale entries, so a pair whose count keeps changing cannot fill the heap.
    void compact_heap() {
        heap_.erase(std::remove_if(heap_.begin(), heap_.end(),
                                   [this](const HeapEntry& entry) {
                                       return entry.count != pairs_[entry.pair].count;
                                   }),
                    heap_.end());
        heapify();
    }

    void apply_merge(PairId merged, TokenId new_token) {
        // The merged pair gains no word while its words are rewritten (only pairs that contain
        // new_token do), and records never move, so its list can be walked in place.
        PairRecord& merged_record = pairs_[merged];
        const TokenId left = merged_record.left;
        const TokenId right = merged_record.right;
        const WordId* const words = merged_record.words();
        // Perf: the words are scattered over memory, and waiting for each one's first cache line is
        // most of the merge time (20 MB of text, 32K vocab: 3.6M word visits, 24M symbols read).
        // The list is known in advance, so fetch a few words ahead: about 20% faster overall; the
        // distance hardly matters between 4 and 32.
        const size_t num_words = merged_record.num_words;
        for (size_t at = 0; at < num_words; ++at) {
            if (at + 2 * kPrefetchDistance < num_words) {
                prefetch(&words_[words[at + 2 * kPrefetchDistance]]);
            }
            if (at + kPrefetchDistance < num_words) {
                prefetch(symbols_.data() + words_[words[at + kPrefetchDistance]].begin);
            }
            merge_word(words[at], left, right, new_token);
        }
        merged_record.clear_words();  // spent: its count drops to 0 below, and a pair never comes back

        // Each changed pair's record once: count, then the words it gained (in word order), then
        // the heap. A pair that gains is new (it holds new_token), born now with the most it will
        // ever count; below the birth floor it is not tracked.
        for (MergeDeltas::Change& change : deltas_.changes()) {
            if (change.delta > 0) {
                change.pair = change.delta >= birth_floor_ ? pair_id(key_left(change.key), key_right(change.key))
                                                           : PairIdMap::kMissing;
            } else {
                change.pair = pair_ids_.find(change.key);
            }
            if (change.pair != PairIdMap::kMissing) pairs_[change.pair].count += change.delta;
        }
        for (const MergeDeltas::Listing& listing : deltas_.listings()) {
            const PairId pair = deltas_.changes()[listing.change].pair;
            if (pair != PairIdMap::kMissing) pairs_[pair].list_word(listing.word);
        }
        for (const MergeDeltas::Change& change : deltas_.changes()) {
            if (change.pair == PairIdMap::kMissing) continue;
            PairRecord& record = pairs_[change.pair];
            if (record.count > bar_) {
                push(change.pair);
            } else if (record.count == 0) {
                record.clear_words();  // dead for good: free its word list
            }
        }
        deltas_.clear();
        if (pairs_.size() > prune_at_) {
            prune_pairs();
        } else if (heap_.size() > kCompactionFactor * heap_size_after_build_ + kCompactionSlack) {
            compact_heap();
        }
    }

    // Stops tracking the pairs that count less than 1/kBirthFloorDivisor of the best, which raises
    // the birth floor to that: every untracked pair stays below the floor, as it only rises. Also
    // drops the dead pairs, which are never erased otherwise. Pair ids change, so the heap restarts.
    void prune_pairs() {
        int64_t highest = 0;
        for (size_t id = 0; id < pairs_.size(); ++id) highest = std::max(highest, pairs_[PairId(id)].count);
        birth_floor_ = std::max(birth_floor_, highest / kBirthFloorDivisor);
        PairTable kept;
        PairIdMap kept_ids;
        for (size_t id = 0; id < pairs_.size(); ++id) {
            PairRecord& record = pairs_[PairId(id)];
            if (record.count < birth_floor_) {
                record.clear_words();
                continue;
            }
            kept_ids.find_or_insert(pair_key(record.left, record.right), PairId(kept.size()));
            kept[kept.add(record.left, record.right)] = record;  // the word list moves with it
            record.num_words = 0;
        }
        pairs_.swap(kept);
        pair_ids_ = std::move(kept_ids);
        restart_heap();
        prune_at_ = std::max(prune_limit_, 2 * pairs_.size());
    }

    // Tracks every pair again, counted from the words as they are now: the birth floor back to 1.
    void recount_pairs() {
        pairs_.clear();
        pair_ids_ = PairIdMap();
        birth_floor_ = 1;
        for_each_pair(0, words_.size(), [this](TokenId left, TokenId right, int64_t count, WordId word) {
            PairRecord& record = pairs_[pair_id(left, right)];
            record.count += count;
            record.list_word(word);
        });
        restart_heap();
    }

    void restart_heap() {
        heap_.clear();
        bar_ = INT64_MAX;
        heap_size_after_build_ = 0;
    }

    // Rewrites one word in place and records the pair count changes around each occurrence only.
    // A word listed under a pair may have lost it since (or be listed twice); it then has no
    // occurrence and is skipped, which makes lazy index entries harmless.
    //
    // Why only neighbourhoods: an old pair (s[j], s[j+1]) changes iff j or j + 1 is inside a merged
    // occurrence; a new pair changes iff it contains new_token. All other pairs map one-to-one
    // between the old and new word. So a pair (x, y) of old tokens never reappears once its count
    // reaches 0, and a word only ever gains pairs that contain new_token.
    void merge_word(WordId word, TokenId left, TokenId right, TokenId new_token) {
        Word& info = words_[word];
        TokenId* symbols = symbols_.data() + info.begin;
        const uint32_t length = info.length;
        const int64_t count = info.count;

        // Pass 1, on the old word: subtract each affected pair once. Occurrences can share a
        // neighbour ("a b a b": the (b, a) between them), hence `next_unsubtracted`.
        uint32_t next_unsubtracted = 0;
        bool found = false;
        for (uint32_t at = 0; at + 1 < length; ++at) {
            if (symbols[at] != left || symbols[at + 1] != right) continue;
            found = true;
            const uint32_t first = std::max(next_unsubtracted, at == 0 ? 0u : at - 1);
            const uint32_t last = std::min(at + 1, length - 2);  // pair index j covers s[j], s[j + 1]
            for (uint32_t j = first; j <= last; ++j) deltas_.add(pair_key(symbols[j], symbols[j + 1]), -count);
            next_unsubtracted = last + 1;
            ++at;  // non-overlapping: "a a a" with (a, a) merges only the first two
        }
        if (!found) return;

        // Pass 2: rewrite in place (the write position never passes the read position) and add
        // the pairs that contain the new token.
        uint32_t written = 0;
        for (uint32_t at = 0; at < length; ++written) {
            TokenId symbol;
            if (at + 1 < length && symbols[at] == left && symbols[at + 1] == right) {
                symbol = new_token;
                at += 2;
            } else {
                symbol = symbols[at];
                at += 1;
            }
            symbols[written] = symbol;
            if (written > 0 && (symbol == new_token || symbols[written - 1] == new_token)) {
                deltas_.list(deltas_.add(pair_key(symbols[written - 1], symbol), count), word);
            }
        }
        info.length = written;
    }

    TokenTable tokens_;

    // Word w is symbols_[words_[w].begin, + words_[w].length); a merge shortens it in place and
    // leaves its tail unused.
    struct Word {
        uint64_t begin;
        int64_t count;
        uint32_t length;
    };
    std::vector<TokenId> symbols_;
    std::vector<Word> words_;

    PairIdMap pair_ids_;
    PairTable pairs_;

    std::vector<HeapEntry> heap_;
    int64_t bar_ = INT64_MAX;  // pairs counting more are in the heap; the first pop lowers it
    size_t heap_size_after_build_ = 0;
    MergeDeltas deltas_;

    // Pairs born below the birth floor are not tracked (see kBirthFloorDivisor); the pairs are
    // pruned when more than prune_at_ are tracked.
    int64_t birth_floor_ = 1;
    size_t prune_limit_;
    size_t prune_at_;
};

}  // namespace

std::vector<Merge> train_merges(const WordCounts& words, size_t num_merges, MergeProgress progress,
                                void* context, int num_threads, size_t prune_pairs) {
    if (num_merges == 0) return {};
    Trainer trainer(words, num_threads, prune_pairs);
    return trainer.run(num_merges, progress, context);
}

}  // namespace bpe
