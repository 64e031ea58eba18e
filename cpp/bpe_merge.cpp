// The v4 merge algorithm in C++: incremental pair counts, an inverted index pair -> words, and a
// max-heap with lazy deletion. See bpe_merge.hpp for the contract and cs336_basics/bpe_v4.py for
// the same algorithm in readable Python.
#include "bpe_merge.hpp"

#include <algorithm>
#include <cstring>
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
// dead keys just keep their slot.
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

// Perf: the entry carries the pair's tokens (as its key) rather than its id, so comparing two
// entries with equal counts reads no pair table: heap pushes compare many tied low-count pairs,
// and a lookup per comparison was a cache miss each.
struct HeapEntry {
    int64_t count;  // the pair's count when pushed; stale once the pair's count differs
    uint64_t key;   // pair_key(left, right)
};

// How many words ahead of the one being merged to prefetch (its metadata twice as far ahead).
constexpr size_t kPrefetchDistance = 8;

inline void prefetch(const void* address) {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(address);
#else
    (void)address;
#endif
}

// Rebuild the heap when it holds more than this many entries per live pair (plus kCompactionSlack).
constexpr size_t kCompactionFactor = 2;
constexpr size_t kCompactionSlack = 1024;

// Perf/memory findings (2 GB OWT-like corpus, 2.0M distinct words, 32K vocab; 42 s in all):
// - About 2 s to load the words and count the initial pairs; the first 10K merges take ~10 s and
//   the last 22K ~29 s: late merges touch few words each but every touch is a cache miss (pair id
//   lookups, pair counts, word headers). Laying words out by descending count did not help.
// - The loop ends with 18.4M pairs, 15.8M of them live, so recycling dead pairs would not save
//   memory: per-pair tables (~80 B), the heap (26M entries) and the index lists dominate, ~3.9 GB
//   at the end (8.45 GB on the 11.9 GB corpus). A smaller heap and flat index lists are the next step.
class Trainer {
public:
    explicit Trainer(const WordCounts& words) {
        load_words(words);
        count_initial_pairs();
        rebuild_heap();
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
            const TokenId left = pair_left_[best];
            const TokenId right = pair_right_[best];
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

    void count_initial_pairs() {
        for (size_t word = 0; word < words_.size(); ++word) {
            const Word& info = words_[word];
            const TokenId* symbols = symbols_.data() + info.begin;
            for (uint32_t at = 0; at + 1 < info.length; ++at) {
                add_to_pair(pair_id(symbols[at], symbols[at + 1]), info.count, static_cast<WordId>(word));
            }
        }
    }

    PairId pair_id(TokenId left, TokenId right) {
        const PairId next_id = static_cast<PairId>(pair_count_.size());
        const PairId id = pair_ids_.find_or_insert(pair_key(left, right), next_id);
        if (id == next_id) {
            pair_left_.push_back(left);
            pair_right_.push_back(right);
            pair_count_.push_back(0);
            pair_words_.emplace_back();
            pair_stamp_.push_back(0);
        }
        return id;
    }

    // Adds `delta` to a pair's count, remembers that the pair changed in this merge, and lists the
    // word under the pair when the word gains it.
    void add_to_pair(PairId pair, int64_t delta, WordId word) {
        change_count(pair, delta);
        std::vector<WordId>& listed = pair_words_[pair];
        // A word gains a pair only while it is being processed, so if it is already listed it is last.
        if (listed.empty() || listed.back() != word) listed.push_back(word);
    }

    void change_count(PairId pair, int64_t delta) {
        int64_t& count = pair_count_[pair];
        if (count == 0) ++live_pairs_;
        count += delta;
        if (count == 0) --live_pairs_;
        if (pair_stamp_[pair] != merge_stamp_) {
            pair_stamp_[pair] = merge_stamp_;
            changed_.push_back(pair);
        }
    }

    bool ranks_below(const HeapEntry& x, const HeapEntry& y) const {
        if (x.count != y.count) return x.count < y.count;
        return pair_bytes_less(tokens_, key_left(x.key), key_right(x.key), key_left(y.key),
                               key_right(y.key));
    }

    void push(PairId pair) {
        heap_.push_back({pair_count_[pair], pair_key(pair_left_[pair], pair_right_[pair])});
        std::push_heap(heap_.begin(), heap_.end(), [this](const HeapEntry& x, const HeapEntry& y) {
            return ranks_below(x, y);
        });
    }

    // Lazy deletion: entries whose count no longer matches are dropped when they reach the top.
    PairId pop_best() {
        const auto order = [this](const HeapEntry& x, const HeapEntry& y) { return ranks_below(x, y); };
        while (!heap_.empty()) {
            const HeapEntry top = heap_.front();
            std::pop_heap(heap_.begin(), heap_.end(), order);
            heap_.pop_back();
            const PairId pair = pair_ids_.find(top.key);
            if (top.count > 0 && top.count == pair_count_[pair]) return pair;
        }
        return PairIdMap::kMissing;
    }

    void rebuild_heap() {
        heap_.clear();
        for (size_t pair = 0; pair < pair_count_.size(); ++pair) {
            if (pair_count_[pair] > 0) {
                heap_.push_back({pair_count_[pair], pair_key(pair_left_[pair], pair_right_[pair])});
            }
        }
        std::make_heap(heap_.begin(), heap_.end(),
                       [this](const HeapEntry& x, const HeapEntry& y) { return ranks_below(x, y); });
    }

    void apply_merge(PairId merged, TokenId new_token) {
        ++merge_stamp_;
        changed_.clear();
        // Taken out of the index: it is spent (the pair's count drops to 0), and new pairs added
        // below may grow pair_words_, which would invalidate a reference into it.
        const std::vector<WordId> words = std::move(pair_words_[merged]);
        pair_words_[merged] = {};
        // Perf: the words are scattered over memory, and waiting for each one's first cache line is
        // most of the merge time (20 MB of text, 32K vocab: 3.6M word visits, 24M symbols read).
        // The list is known in advance, so fetch a few words ahead: about 20% faster overall; the
        // distance hardly matters between 4 and 32.
        const size_t num_words = words.size();
        for (size_t at = 0; at < num_words; ++at) {
            if (at + 2 * kPrefetchDistance < num_words) {
                prefetch(&words_[words[at + 2 * kPrefetchDistance]]);
            }
            if (at + kPrefetchDistance < num_words) {
                prefetch(symbols_.data() + words_[words[at + kPrefetchDistance]].begin);
            }
            merge_word(words[at], merged, new_token);
        }
        for (const PairId pair : changed_) {
            if (pair_count_[pair] > 0) {
                push(pair);
            } else {
                std::vector<WordId>().swap(pair_words_[pair]);  // dead for good: free its word list
            }
        }
        if (heap_.size() > kCompactionFactor * live_pairs_ + kCompactionSlack) rebuild_heap();
    }

    // Rewrites one word in place and updates the pair counts around each occurrence only.
    // A word listed under a pair may have lost it since (or be listed twice); it then has no
    // occurrence and is skipped, which makes lazy index entries harmless.
    //
    // Why only neighbourhoods: an old pair (s[j], s[j+1]) changes iff j or j + 1 is inside a merged
    // occurrence; a new pair changes iff it contains new_token. All other pairs map one-to-one
    // between the old and new word. So a pair (x, y) of old tokens never reappears once its count
    // reaches 0, and a word only ever gains pairs that contain new_token.
    void merge_word(WordId word, PairId merged, TokenId new_token) {
        const TokenId left = pair_left_[merged];
        const TokenId right = pair_right_[merged];
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
            for (uint32_t j = first; j <= last; ++j) {
                change_count(j == at ? merged : pair_ids_.find(pair_key(symbols[j], symbols[j + 1])), -count);
            }
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
                add_to_pair(pair_id(symbols[written - 1], symbol), count, word);
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

    // Pairs, indexed by PairId (struct of arrays: the heap comparisons touch only counts and tokens).
    PairIdMap pair_ids_;
    std::vector<TokenId> pair_left_;
    std::vector<TokenId> pair_right_;
    std::vector<int64_t> pair_count_;
    std::vector<std::vector<WordId>> pair_words_;  // inverted index, may hold stale words
    std::vector<uint32_t> pair_stamp_;             // last merge that put the pair in changed_
    size_t live_pairs_ = 0;                        // pairs with a count above 0

    std::vector<HeapEntry> heap_;
    std::vector<PairId> changed_;
    uint32_t merge_stamp_ = 0;
};

}  // namespace

std::vector<Merge> train_merges(const WordCounts& words, size_t num_merges, MergeProgress progress,
                                void* context) {
    if (num_merges == 0) return {};
    Trainer trainer(words);
    return trainer.run(num_merges, progress, context);
}

}  // namespace bpe
