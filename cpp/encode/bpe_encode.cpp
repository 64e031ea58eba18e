#include "encode/bpe_encode.hpp"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <new>
#include <stdexcept>

#include "kit/bits.hpp"
#include "scan/chunking.hpp"
#include "kit/huge_pages.hpp"
#include "kit/integer_map.hpp"
#include "io/mapped_file.hpp"
#include "kit/omp_shim.hpp"
#include "scan/pretokenize.hpp"
#include "count/word_table.hpp"  // kKeep

namespace bpe {

namespace {

constexpr uint32_t kNoRank = std::numeric_limits<uint32_t>::max();
constexpr uint32_t kNoNode = std::numeric_limits<uint32_t>::max();

// The cache key of a word of 1..Encoder::kInlineBytes bytes, read from `readable`, where 16 bytes
// can be read: the bytes zero-padded, the size in the top byte (so no two words share a key).
inline void short_key(const unsigned char* readable, size_t size, uint64_t key[2]) {
    key[0] = load_little_endian64(readable) & word_table::kKeep.masks[size][0];
    key[1] = (load_little_endian64(readable + 8) & word_table::kKeep.masks[size][1]) | (uint64_t(size) << 56);
}

// The key of a longer word: its hash and size, tagged so that no short word's key equals it.
constexpr uint64_t kLongKey = uint64_t(0xFF) << 56;
inline void long_key(const unsigned char* word, size_t size, uint64_t key[2]) {
    key[0] = hash_bytes(reinterpret_cast<const char*>(word), size);
    key[1] = kLongKey | size;
}

// Both halves of the key of a special token's slot (BatchedLookup), which no word has.
constexpr uint64_t kSpecialKey = ~uint64_t(0);

// A long word's tokens as a list linked through their first bytes' positions, where merge_long and
// merge_huge start: one token per byte.
struct LinkedToken {
    uint32_t id;  // kNoNode once merged into the token before it
    uint32_t prev;
    uint32_t next;
};

std::unique_ptr<LinkedToken[]> linked_bytes(const uint32_t* byte_ids, const unsigned char* word, size_t size) {
    if (size >= kNoNode) throw std::length_error("a pre-token of 4 GiB or more");
    std::unique_ptr<LinkedToken[]> tokens(new LinkedToken[size]);
    for (size_t i = 0; i < size; ++i) {
        const uint32_t prev = i == 0 ? kNoNode : uint32_t(i - 1);
        tokens[i] = LinkedToken{byte_ids[word[i]], prev, i + 1 == size ? kNoNode : uint32_t(i + 1)};
    }
    return tokens;
}

// Token `index` becomes `merged`, and the token after it leaves the list.
inline void join_right(LinkedToken* tokens, uint32_t index, uint32_t merged) {
    LinkedToken& left = tokens[index];
    LinkedToken& right = tokens[left.next];
    left.id = merged;
    right.id = kNoNode;
    left.next = right.next;
    if (right.next != kNoNode) tokens[right.next].prev = index;
}

// After a round's joins, the pairs each joined token now starts or ends are candidates for `push`.
template <class Push>
void push_new_pairs(const LinkedToken* tokens, const std::vector<uint32_t>& merged_at, const Push& push) {
    for (const uint32_t index : merged_at) {
        if (tokens[index].id == kNoNode) continue;  // only with a merge whose result equals its right token
        if (tokens[index].prev != kNoNode) push(tokens[index].prev);
        if (tokens[index].next != kNoNode) push(index);
    }
}

// The ids of the tokens left, in order, from `out` on; returns the end.
inline uint32_t* write_ids(const LinkedToken* tokens, uint32_t* out) {
    for (uint32_t index = 0; index != kNoNode; index = tokens[index].next) *out++ = tokens[index].id;
    return out;
}

}  // namespace

// (left, right) -> rank. Most lookups fail (most adjacent pairs have no merge), so the table is
// small: 8-byte slots of a check and the rank, in buckets of four (32 bytes, one cache line), a
// pair in its home bucket unless that is full (then the next, and so on). When every id and rank
// is below 2^16 - 1 (GPT-2's vocabulary, most trained ones: "narrow") the check is the pair itself,
// and a lookup compares the four checks of its bucket without a branch: the one branch left, taken
// when the bucket is full and does not hold the pair, rarely is with at most half the slots used (a
// branch per slot mispredicted about once a lookup, the pair being there or not). Otherwise the
// check is part of the pair's hash, and a match is verified in the rule the rank names.
//
// What rank() returns orders and compares like the rank, which is all the merge loops ask of it; in
// a narrow table (ids and ranks below 2^16 - 1) it is rank << 16 | merged id, so that merged()
// reads no second array on the path from one round's lowest rank to the next round's lookups.
class Encoder::PairRanks {
public:
    PairRanks(const std::vector<MergeRule>& merges, uint32_t largest_id)
        : rules_(merges), narrow_(largest_id < 65535 && merges.size() < 65535) {
        size_t buckets = 2;
        while (buckets * kBucket < kSlotsPerMerge * merges.size()) buckets *= 2;
        slots_.reset(static_cast<Slot*>(allocate_aligned(sizeof(Slot) * kBucket, buckets * kBucket * sizeof(Slot))));
        if (slots_ == nullptr) throw std::bad_alloc();
        std::fill(slots_.get(), slots_.get() + buckets * kBucket, Slot{kEmptyCheck, kNoRank});
        mask_ = buckets - 1;
        shift_ = 64;
        for (size_t b = buckets; b > 1; b >>= 1) --shift_;
        for (uint32_t rank = 0; rank < merges.size(); ++rank) {
            const MergeRule& rule = merges[rank];
            if (this->rank(rule.left, rule.right) != kNoRank) continue;  // a repeated pair keeps its first rank
            const auto [home_bucket, check] = home(rule.left, rule.right);
            Slot* slot = nullptr;
            for (size_t bucket = home_bucket; slot == nullptr; bucket = (bucket + 1) & mask_) {
                Slot* const first = slots_.get() + bucket * kBucket;
                for (size_t way = 0; way < kBucket && slot == nullptr; ++way) {
                    if (first[way].rank == kNoRank) slot = first + way;
                }
            }
            *slot = Slot{check, narrow_ ? (rank << 16) | rule.merged : rank};
        }
    }

    uint32_t rank(uint32_t left, uint32_t right) const {
        const auto [home_bucket, check] = home(left, right);
        for (size_t bucket = home_bucket;; bucket = (bucket + 1) & mask_) {
            const Slot* const slots = slots_.get() + bucket * kBucket;
            if (narrow_) {
                // At most one slot holds the pair (empty ones hold kEmptyCheck): the AND of each slot's
                // rank, all ones where the check differs, is its rank or kNoRank. Masks, not a select,
                // which the compiler would turn back into branches.
                uint32_t found = kNoRank;
                for (size_t way = 0; way < kBucket; ++way) {
                    found &= slots[way].rank | (0u - uint32_t(slots[way].check != check));
                }
                const bool full = slots[kBucket - 1].rank != kNoRank;  // slots fill in order
                if (!full || found != kNoRank) return found;
                continue;
            }
            for (size_t way = 0; way < kBucket; ++way) {
                if (slots[way].rank == kNoRank) return kNoRank;
                if (slots[way].check == check && same_pair(slots[way].rank, left, right)) return slots[way].rank;
            }
        }
    }

    // The merged id of what rank() returned.
    uint32_t merged(uint32_t rank) const { return narrow_ ? rank & 0xFFFF : rules_[rank].merged; }
    // The merge's number (its index in the list) of what rank() returned, and how many there are.
    uint32_t number(uint32_t rank) const { return narrow_ ? rank >> 16 : rank; }
    size_t merges() const { return rules_.size(); }

private:
    struct Slot {
        uint32_t check;  // narrow: left << 16 | right; else the low half of the pair's hash
        uint32_t rank;   // narrow: rank << 16 | merged id; kNoRank: empty
    };
    static constexpr size_t kBucket = 4;
    static constexpr size_t kSlotsPerMerge = 2;
    static constexpr uint32_t kEmptyCheck = 0xFFFFFFFF;  // no narrow pair: ids are below 0xFFFF

    // The pair's home bucket and its check.
    std::pair<size_t, uint32_t> home(uint32_t left, uint32_t right) const {
        if (narrow_) {
            const uint32_t pair = (left << 16) | right;
            return {size_t(fibonacci_spread(pair) >> shift_), pair};
        }
        const uint64_t hash = mix64(pair_key(left, right));
        return {size_t(hash >> shift_), uint32_t(hash)};
    }

    bool same_pair(uint32_t rank, uint32_t left, uint32_t right) const {
        return rules_[rank].left == left && rules_[rank].right == right;
    }

    struct Free {
        void operator()(Slot* slots) const { free_aligned(slots); }
    };

    std::vector<MergeRule> rules_;
    std::unique_ptr<Slot[], Free> slots_;  // buckets of kBucket slots, each bucket 32-byte aligned
    size_t mask_ = 0;  // buckets - 1
    int shift_ = 64;
    bool narrow_;
};

// One thread's pre-token -> ids cache: sets of four 32-byte slots (two cache lines), the most
// recently used first. A slot's key is the word itself when it has at most kInlineBytes bytes
// (zero-padded, its size in the top byte), else a hash of the word tagged kLongKey with its size.
// The value is up to Slot::capacity ids, or where the ids lie in the arena (with a long word's bytes,
// checked on every hit). The arena is emptied when full; its epoch then changes, which turns the
// slots that pointed into it into misses.
class Encoder::WordCache {
public:
    static constexpr size_t kWays = 4;

    struct Slot {
        uint64_t key[2];            // all zero: empty (no word has that key)
        uint32_t ids[kInlineIds];   // count == 0: arena offset, arena epoch, number of ids
        uint32_t count;             // ids held in `ids`; 0: in the arena (or empty)

        // A narrow cache (every id below 2^16) keeps up to kNarrowInlineIds 16-bit ids in the
        // bytes of `ids`, so that most words of 4 to 6 tokens need no arena.
        static size_t capacity(bool narrow) { return narrow ? kNarrowInlineIds : kInlineIds; }
        // Writes the inline ids to `out`, and more up to the capacity (the caller's spare room).
        void copy_ids(bool narrow, uint32_t* out) const {
            if (narrow) {
#if defined(BPE_SSE2)
                // The 16 bytes of `ids` and `count`, widened: ids 0-3, then 4-5 (count's bytes unused).
                const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(ids));
                const __m128i zero = _mm_setzero_si128();
                _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_unpacklo_epi16(packed, zero));
                _mm_storel_epi64(reinterpret_cast<__m128i*>(out + 4), _mm_unpackhi_epi16(packed, zero));
#else
                uint16_t narrow_ids[kNarrowInlineIds];
                std::memcpy(narrow_ids, ids, sizeof(narrow_ids));
                for (size_t k = 0; k < kNarrowInlineIds; ++k) out[k] = narrow_ids[k];
#endif
            } else {
                std::memcpy(out, ids, sizeof(ids));
            }
        }
        void store_ids(bool narrow, const uint32_t* values, size_t size) {
            if (narrow) {
                uint16_t narrow_ids[kNarrowInlineIds] = {};
                for (size_t k = 0; k < size; ++k) narrow_ids[k] = uint16_t(values[k]);
                std::memcpy(ids, narrow_ids, sizeof(narrow_ids));
            } else {
                std::memcpy(ids, values, size * sizeof(uint32_t));
            }
            count = uint32_t(size);
        }
    };
    static_assert(sizeof(Slot) == 32, "two slots fill a 64-byte cache line");
    static_assert(sizeof(uint16_t) * kNarrowInlineIds == sizeof(uint32_t) * kInlineIds, "the same bytes");

    // `slots`: a power of two, at least kWays; `narrow`: every id is below 2^16.
    WordCache(size_t slots, bool narrow) : narrow_(narrow) {
        slots_ = HugePageArray<Slot>(slots);
        const size_t sets = slots / kWays;
        set_mask_ = sets - 1;
        shift_ = 64;
        for (size_t count = sets; count > 1; count >>= 1) --shift_;
        shift_ = std::min(shift_, 63);  // one set: index (hash >> 63) & 0
        arena_words_ = std::min<size_t>(slots * 4, std::numeric_limits<uint32_t>::max());  // 16 bytes per slot
        arena_ = static_cast<uint32_t*>(std::malloc(arena_words_ * sizeof(uint32_t)));
        if (arena_ == nullptr) throw std::bad_alloc();
    }
    ~WordCache() { std::free(arena_); }
    WordCache(const WordCache&) = delete;
    WordCache& operator=(const WordCache&) = delete;

    // Where a key's set is: multiplicative hashing, the top bits choose the set.
    struct Sets {
        Slot* slots;
        int shift;
        size_t mask;
        Slot* of(const uint64_t key[2]) const {
            const uint64_t hash = spread_two(key[0], key[1]);
            return slots + ((hash >> shift) & mask) * kWays;
        }
    };
    Sets sets() { return Sets{slots_.data(), shift_, set_mask_}; }
    bool narrow() const { return narrow_; }

    // The ids an arena slot of `word` names, or nullptr when they are gone (an older epoch) or the
    // slot is another long word's with the same hash and size.
    const uint32_t* arena_ids(const Slot& slot, const unsigned char* word, size_t size) const {
        if (slot.ids[1] != epoch_) return nullptr;
        const uint32_t* record = arena_ + slot.ids[0];
        if (size <= kInlineBytes) return record;
        if (std::memcmp(record, word, size) != 0) return nullptr;
        return record + (size + 3) / 4;
    }

    // Puts the ids of `word` (its key in `key`) in `set` at the front, dropping the slot at `victim`.
    void insert(Slot* set, size_t victim, const uint64_t key[2], const unsigned char* word, size_t size,
                const uint32_t* ids, size_t count) {
        Slot slot{};
        slot.key[0] = key[0];
        slot.key[1] = key[1];
        if (size <= kInlineBytes && count <= Slot::capacity(narrow_)) {
            slot.store_ids(narrow_, ids, count);
        } else {
            const size_t byte_words = size <= kInlineBytes ? 0 : (size + 3) / 4;
            const size_t record_words = byte_words + count;
            if (record_words > arena_words_ / 16) return;  // one word must not flush the rest
            if (arena_used_ + record_words > arena_words_) new_epoch();
            uint32_t* record = arena_ + arena_used_;
            if (byte_words != 0) {
                record[byte_words - 1] = 0;
                std::memcpy(record, word, size);
            }
            std::memcpy(record + byte_words, ids, count * sizeof(uint32_t));
            slot.ids[0] = uint32_t(arena_used_);
            slot.ids[1] = epoch_;
            slot.ids[2] = uint32_t(count);
            arena_used_ += record_words;
        }
        shift_back(set, victim);
        set[0] = slot;
    }

    static void move_to_front(Slot* set, size_t way) {
        const Slot found = set[way];
        shift_back(set, way);
        set[0] = found;
    }

private:
    // Moves the slots before `way` one place back, over the slot at `way`; a loop of whole slots
    // rather than a call to memmove for a few bytes.
    static void shift_back(Slot* set, size_t way) {
        for (size_t i = way; i > 0; --i) set[i] = set[i - 1];
    }

    // Empties the arena; after 2^32 epochs the slots are cleared too, so no old epoch comes back.
    void new_epoch() {
        arena_used_ = 0;
        if (++epoch_ == 0) std::memset(slots_.data(), 0, slots_.size() * sizeof(Slot));
    }

    HugePageArray<Slot> slots_;  // huge-page aligned when large: a set is then two cache lines
    bool narrow_;
    size_t set_mask_ = 0;
    int shift_ = 63;
    uint32_t* arena_ = nullptr;  // records: a long word's bytes (padded to 4), then the ids
    size_t arena_words_ = 0;
    size_t arena_used_ = 0;
    uint32_t epoch_ = 0;
};

// A pre-token waiting in encode_ordinary's queue, its cache set prefetched.
struct Encoder::PendingWord {
    uint64_t key[2];
    WordCache::Slot* set;
    const unsigned char* data;
    size_t size;
};

class Encoder::CacheLease {
public:
    CacheLease(Encoder& encoder, int threads) : lock_(encoder.caches_mutex_, std::try_to_lock) {
        if (!lock_.owns_lock() || encoder.cache_slots_ == 0) return;
        while (encoder.caches_.size() < size_t(std::max(threads, 1))) {
            encoder.caches_.push_back(std::make_unique<WordCache>(encoder.cache_slots_, encoder.narrow_ids_));
        }
        caches_ = &encoder.caches_;
    }

    WordCache* get(int thread) const { return caches_ != nullptr ? (*caches_)[size_t(thread)].get() : nullptr; }

private:
    std::unique_lock<std::mutex> lock_;
    const std::vector<std::unique_ptr<WordCache>>* caches_ = nullptr;
};

Encoder::Encoder(const std::vector<uint32_t>& byte_ids, const std::vector<MergeRule>& merges,
                 const std::vector<std::pair<std::string, uint32_t>>& special_tokens, size_t cache_slots,
                 PretokenPattern pattern, unsigned unicode_table_index)
    : specials_([&] {
          std::vector<std::string> tokens;
          for (const auto& special : special_tokens) tokens.push_back(special.first);
          return tokens;
      }()),
      pattern_(pattern),
      unicode_(&unicode_table(unicode_table_index)) {
    if (byte_ids.size() != 256) throw std::invalid_argument("byte_ids must have 256 entries");
    const auto check_id = [](uint32_t id) {
        if (id == std::numeric_limits<uint32_t>::max()) throw std::invalid_argument("token ids must be below 2**32 - 1");
    };
    for (size_t byte = 0; byte < 256; ++byte) {
        check_id(byte_ids[byte]);
        byte_ids_[byte] = byte_ids[byte];
    }
    if (merges.size() >= kNoRank) throw std::invalid_argument("too many merges");
    for (const MergeRule& merge : merges) {
        check_id(merge.left);
        check_id(merge.right);
        check_id(merge.merged);
    }
    uint32_t largest_id = *std::max_element(byte_ids_, byte_ids_ + 256);
    for (const MergeRule& merge : merges) largest_id = std::max({largest_id, merge.left, merge.right, merge.merged});
    pairs_ = std::make_unique<PairRanks>(merges, largest_id);
    huge_word_ = std::max(kHugeWord, merges.size() / kHugeWordPerMerge);
    byte_pair_ranks_.resize(256 * 256);
    for (size_t left = 0; left < 256; ++left) {
        for (size_t right = 0; right < 256; ++right) {
            byte_pair_ranks_[left * 256 + right] = pairs_->rank(byte_ids_[left], byte_ids_[right]);
        }
    }

    // A token given twice keeps its first id.
    special_ids_.assign(specials_.tokens().size(), std::numeric_limits<uint32_t>::max());
    for (const auto& [token, id] : special_tokens) {
        if (token.empty()) throw std::invalid_argument("special tokens must not be empty");
        check_id(id);
        const auto& tokens = specials_.tokens();
        const size_t index = size_t(std::find(tokens.begin(), tokens.end(), token) - tokens.begin());
        if (special_ids_[index] == std::numeric_limits<uint32_t>::max()) special_ids_[index] = id;
    }
    uint32_t largest_special = 0;
    for (const uint32_t id : special_ids_) largest_special = std::max(largest_special, id);
    narrow_ids_ = std::max(largest_id, largest_special) <= 0xFFFF;

    if (cache_slots > 0) {
        cache_slots_ = WordCache::kWays;
        while (cache_slots_ < cache_slots) cache_slots_ <<= 1;
        // The calling thread's cache now, so that encode never reserves memory.
        caches_.push_back(std::make_unique<WordCache>(cache_slots_, narrow_ids_));
    }
}

Encoder::~Encoder() = default;

size_t Encoder::encode(std::string_view text, uint32_t* out) {
    const CacheLease lease(*this, 1);
    return encode_with(text, out, lease.get(0));
}

std::vector<size_t> Encoder::pieces(std::string_view text, size_t piece_bytes) const {
    return chunk_boundaries(text, specials_, piece_bytes, 1, nullptr, pattern_);
}

void Encoder::encode(std::string_view text, std::vector<uint32_t>& out) {
    const size_t before = out.size();
    out.resize(before + text.size() + kSpareIds);
    out.resize(before + encode(text, out.data() + before));
}

void Encoder::encode_batch(const std::vector<std::string_view>& texts, uint32_t* const* outs, size_t* counts,
                           int threads) {
    threads = threads > 0 ? threads : omp_default_threads();
    threads = int(std::min<size_t>(size_t(threads), std::max<size_t>(texts.size(), 1)));  // no more caches than texts
    const CacheLease lease(*this, threads);
    parallel_for(texts.size(), threads, [&](size_t index) {
        counts[index] = encode_with(texts[index], outs[index], lease.get(omp_thread_id()));
    });
}

size_t Encoder::encode_file(const std::string& path, int threads, size_t chunk_bytes, IdSink sink,
                            void* context) {
    const MappedFile file(path);
    // A file that changed while it was read is an error, not ids of a mix of its versions.
    return file.checked([&]() -> size_t {
        const std::string_view text = file.view();
        threads = threads > 0 ? threads : omp_default_threads();
        if (chunk_bytes == 0) {
            // Enough chunks to balance the threads, small enough that the ids in flight stay modest.
            chunk_bytes = std::clamp<size_t>(text.size() / (size_t(threads) * 8) + 1, size_t(1) << 18, size_t(8) << 20);
        }
        const std::vector<size_t> cuts = chunk_boundaries(text, specials_, chunk_bytes, threads, &file, pattern_);
        const size_t chunks = cuts.size() - 1;
        threads = int(std::min<size_t>(size_t(threads), std::max<size_t>(chunks, 1)));  // no more caches than chunks
        const CacheLease lease(*this, threads);

        // Chunks are taken in file order by whichever thread is free, each into its slot of a ring
        // of `window`; the calling thread hands finished chunks to the sink in file order between
        // chunks of its own (so a sink may run Python, signal handlers included), while the other
        // threads go on encoding: writing overlaps encoding, and no thread waits at a barrier. Chunk k
        // is taken only once chunk k - window has been handed on: memory holds `window` chunks' ids.
        const size_t window = 4 * size_t(threads);
        struct Slot {
            std::unique_ptr<uint32_t[]> ids;
            size_t capacity = 0;
            size_t count = 0;
            size_t invalid = kValidUtf8;
            bool done = false;
        };
        std::vector<Slot> slots(window);
        std::mutex mutex;
        std::condition_variable changed;
        size_t next_chunk = 0;  // the next chunk to take
        size_t handed = 0;      // chunks handed to the sink
        size_t total = 0;
        size_t invalid_at = kValidUtf8;
        bool stop = false;
        std::exception_ptr failure;

        const auto encode_chunk = [&](size_t index, WordCache* cache) {
            Slot& slot = slots[index % window];
            const size_t begin = cuts[index];
            const size_t size = cuts[index + 1] - begin;
            if (slot.capacity < size + kSpareIds) {
                slot.ids.reset();
                slot.ids.reset(new uint32_t[size + kSpareIds]);
                slot.capacity = size + kSpareIds;
            }
            slot.invalid = kValidUtf8;
            try {
                slot.count = encode_with(text.substr(begin, size), slot.ids.get(), cache);
            } catch (const InvalidUtf8Error& error) {
                slot.invalid = begin + error.offset();
            }
            file.release(text.data() + begin, size);
        };
        // Takes and encodes the next chunk, `lock` held on entry and on return.
        const auto take_chunk = [&](std::unique_lock<std::mutex>& lock, WordCache* cache) {
            const size_t index = next_chunk++;
            lock.unlock();
            try {
                encode_chunk(index, cache);
            } catch (...) {
                lock.lock();
                if (!failure) failure = std::current_exception();
                stop = true;
                changed.notify_all();
                return;
            }
            lock.lock();
            slots[index % window].done = true;
            changed.notify_all();
        };
        const auto may_take = [&] { return next_chunk < chunks && next_chunk < handed + window; };
        const auto hand_on = [&](WordCache* cache) {
            std::unique_lock<std::mutex> lock(mutex);
            while (!stop && handed < chunks) {
                Slot& slot = slots[handed % window];
                if (slot.done) {
                    lock.unlock();  // the slot is this thread's until `handed` moves past it
                    bool halt = slot.invalid != kValidUtf8;
                    if (!halt) {
                        total += slot.count;
                        halt = sink(context, slot.ids.get(), slot.count, cuts[handed + 1]);
                    }
                    lock.lock();
                    if (slot.invalid != kValidUtf8) invalid_at = slot.invalid;
                    slot.done = false;
                    ++handed;
                    stop = stop || halt;
                    changed.notify_all();
                } else if (may_take()) {
                    take_chunk(lock, cache);
                } else {
                    changed.wait(lock);
                }
            }
            stop = true;  // the helpers take no more chunks
            changed.notify_all();
        };
        const auto help = [&](WordCache* cache) {
            std::unique_lock<std::mutex> lock(mutex);
            for (;;) {
                changed.wait(lock, [&] { return stop || next_chunk >= chunks || may_take(); });
                if (stop || next_chunk >= chunks) return;
                take_chunk(lock, cache);
            }
        };
        if (threads <= 1) {
            hand_on(lease.get(0));
        } else {
            BPE_OMP_PRAGMA("omp parallel num_threads(threads)")
            {
                const int thread = omp_thread_id();
                if (thread == 0) {
                    hand_on(lease.get(0));  // the calling thread
                } else {
                    help(lease.get(thread));
                }
            }
        }
        if (failure) std::rethrow_exception(failure);
        if (invalid_at != kValidUtf8) throw InvalidUtf8Error(invalid_at);
        return total;
    });
}

// Cached encoding in batches of kBatch pre-tokens. The scanner only records where words end; each
// full batch then has its keys computed and its sets prefetched while the batch before it is
// looked up, so every lookup's memory fetch had a batch's worth of time, and the loops are short
// enough for the compiler to keep their state in registers.
constexpr size_t kBatch = 128;

// kNarrow: the cache's slots hold 16-bit ids (WordCache::Slot), decided once per text rather than
// tested per word.
template <bool kNarrow>
class Encoder::BatchedLookup {
public:
    BatchedLookup(const Encoder& encoder, WordCache& cache, std::string_view text, uint32_t* out)
        : encoder_(encoder), cache_(cache), sets_(cache.sets()),
          base_(reinterpret_cast<const unsigned char*>(text.data())), size_(text.size()), out_(out) {}

    // A word ends at `end`: appended to the batch being scanned.
    void add(size_t end) {
        ends_[scanned_++] = end;
        if (scanned_ >= kBatch) advance(kBatch);
    }
    // Words end at offset + each set bit of `boundaries` but bit 0 (as for_each_pretoken_block gives them).
    void add_block(size_t offset, uint64_t boundaries) {
        boundaries &= boundaries - 1;
        size_t scanned = scanned_;
        do {
            ends_[scanned++] = offset + detail::count_trailing_zeros(boundaries);
            boundaries &= boundaries - 1;
        } while (boundaries != 0);
        scanned_ = scanned;
        if (scanned >= kBatch) advance(kBatch);
    }
    // A special token ends at `end`, its id `id`.
    void add_special(size_t end, uint32_t id) {
        WordCache::Slot& slot = special_slots_[special_count_++ % kSpecialQueue];
        slot.key[0] = slot.key[1] = kSpecialKey;
        slot.store_ids(kNarrow, &id, 1);
        ends_[scanned_++] = end | kSpecialEnd;
        if (scanned_ >= kBatch) advance(kBatch);
    }
    // Where the last word added ends.
    size_t end() const { return scanned_ > 0 ? ends_[scanned_ - 1] & ~kSpecialEnd : begin_; }
    // Encodes what is left; returns the end of the ids.
    uint32_t* finish() {
        advance(scanned_);
        advance(0);
        return out_;
    }

private:
    // Prepares the first `count` scanned words while encoding the prepared batch, then keeps the
    // rest of the scanned ones for the next batch.
    void advance(size_t count) {
        PendingWord* const next = batches_[next_batch_];
        const PendingWord* const ready = batches_[next_batch_ ^ 1];
        // Locals, not members: stores to the batch could alias members, which would then be
        // reloaded for every word.
        const WordCache::Sets sets = sets_;
        const unsigned char* const base = base_;
        const size_t text_size = size_;
        // Prepares the word [begin, end); returns where it ends.
        const auto prepare = [&](PendingWord& word, size_t begin, size_t end) {
            if (end & kSpecialEnd) return prepare_special(word, end);
            const size_t size = end - begin;
            word.data = base + begin;
            word.size = size;
            if (size <= kInlineBytes) {
                if (text_size - begin >= 16) {
                    short_key(base + begin, size, word.key);
                } else {  // near the end of the text: read no byte past it
                    unsigned char padded[16] = {};
                    std::memcpy(padded, base + begin, size);
                    short_key(padded, size, word.key);
                }
            } else {
                long_key(base + begin, size, word.key);
            }
            word.set = sets.of(word.key);
            prefetch(word.set);  // both lines of the set: a miss or a move to the front writes them
            prefetch(word.set + 2);
            return end;
        };
        uint32_t* out = out_;
        size_t begin = begin_;
        const size_t both = std::min(count, ready_count_);
        size_t i = 0;
        for (; i < both; ++i) {
            begin = prepare(next[i], begin, ends_[i]);
            out = take(ready[i], out);
        }
        for (; i < count; ++i) begin = prepare(next[i], begin, ends_[i]);
        for (; i < ready_count_; ++i) out = take(ready[i], out);
        out_ = out;
        begin_ = begin;
        ready_count_ = count;
        next_batch_ ^= 1;
        scanned_ -= count;
        std::memmove(ends_, ends_ + count, scanned_ * sizeof(size_t));
    }

    // A special token: a hit in the first way of a set of its own (its slot here), like most words.
    size_t prepare_special(PendingWord& word, size_t end) {
        word.data = nullptr;
        word.size = 0;
        word.key[0] = word.key[1] = kSpecialKey;
        word.set = &special_slots_[special_prepared_++ % kSpecialQueue];
        return end & ~kSpecialEnd;
    }

    // A word found in the first way of its set is taken here; everything else in encode_word.
    uint32_t* take(const PendingWord& word, uint32_t* out) const {
        const WordCache::Slot& first = word.set[0];
        first.copy_ids(kNarrow, out);  // the caller's spare room makes this safe
        const bool hit = ((first.key[0] ^ word.key[0]) | (first.key[1] ^ word.key[1])) == 0;
        if (hit & (first.count != 0)) return out + first.count;
        // The second way shares the first's cache line: swapped to the front here, without a call.
        WordCache::Slot& second = word.set[1];
        const bool second_hit = ((second.key[0] ^ word.key[0]) | (second.key[1] ^ word.key[1])) == 0;
        if (second_hit & (second.count != 0)) {
            second.copy_ids(kNarrow, out);
            const size_t count = second.count;
            std::swap(word.set[0], second);
            return out + count;
        }
        return encoder_.encode_word(word, out, cache_);
    }

    const Encoder& encoder_;
    WordCache& cache_;
    const WordCache::Sets sets_;
    const unsigned char* const base_;
    const size_t size_;
    uint32_t* out_;
    size_t begin_ = 0;        // where the first scanned word begins
    size_t ends_[kBatch + detail::kBlockBytes];  // ends of the scanned words, not yet prepared
    size_t scanned_ = 0;
    PendingWord batches_[2][kBatch];  // the prepared batch and the one being prepared
    size_t next_batch_ = 0;
    size_t ready_count_ = 0;  // words in the prepared batch
    // Special tokens are words whose end has kSpecialEnd set; their slots wait here in order, from
    // the scan until the lookup of their batch.
    static constexpr size_t kSpecialEnd = size_t(1) << (8 * sizeof(size_t) - 1);
    static constexpr size_t kSpecialQueue = 4 * kBatch;
    static_assert(kSpecialQueue >= 2 * kBatch + detail::kBlockBytes,
                  "room for every special token scanned ahead or prepared and not yet looked up");
    WordCache::Slot special_slots_[kSpecialQueue];
    size_t special_count_ = 0;
    size_t special_prepared_ = 0;
};

size_t Encoder::encode_with(std::string_view text, uint32_t* out, WordCache* cache) const {
    uint32_t* end = out;
    if (cache == nullptr) {
        specials_.for_each_part(
            text,
            [&](size_t begin, size_t stop) {
                if (stop > begin) end = encode_ordinary(text.substr(begin, stop - begin), begin, end);
            },
            [&](size_t token) { *end++ = special_ids_[token]; });
        return size_t(end - out);
    }
    return cache->narrow() ? encode_cached<true>(text, out, *cache) : encode_cached<false>(text, out, *cache);
}

template <bool kNarrow>
size_t Encoder::encode_cached(std::string_view text, uint32_t* out, WordCache& cache) const {
    // One batched lookup for the whole text: documents between special tokens are often short.
    BatchedLookup<kNarrow> lookup(*this, cache, text, out);
    size_t invalid = kValidUtf8;
    specials_.for_each_part(
        text,
        [&](size_t begin, size_t stop) {
            if (stop == begin || invalid != kValidUtf8) return;
            const size_t bad = for_each_pretoken_block_of(
                pattern_, text.data() + begin, stop - begin, text.size() - begin,
                [&](size_t, size_t word_end) { lookup.add(begin + word_end); },
                [&](const unsigned char*, size_t offset, uint64_t boundaries) {
                    lookup.add_block(begin + offset, boundaries);
                },
                *unicode_);
            if (bad != kValidUtf8) invalid = begin + bad;
        },
        [&](size_t token) {
            if (invalid == kValidUtf8) lookup.add_special(lookup.end() + specials_.tokens()[token].size(), special_ids_[token]);
        });
    uint32_t* const end = lookup.finish();
    if (invalid != kValidUtf8) throw InvalidUtf8Error(invalid);
    return size_t(end - out);
}

uint32_t* Encoder::encode_ordinary(std::string_view text, size_t offset, uint32_t* out) const {
    const auto* const base = reinterpret_cast<const unsigned char*>(text.data());
    const size_t invalid = for_each_pretoken_of(
        pattern_, text.data(), text.size(),
        [&](size_t begin, size_t stop) { out = merge(base + begin, stop - begin, out); }, *unicode_);
    if (invalid != kValidUtf8) throw InvalidUtf8Error(offset + invalid);
    return out;
}

uint32_t* Encoder::encode_word(const PendingWord& word, uint32_t* out, WordCache& cache) const {
    WordCache::Slot* const set = word.set;
    size_t victim = WordCache::kWays - 1;  // the least recently used, or the word's own outdated slot
    for (size_t way = 0; way < WordCache::kWays; ++way) {
        const WordCache::Slot& slot = set[way];
        if (slot.key[0] != word.key[0] || slot.key[1] != word.key[1]) continue;
        size_t count = slot.count;
        if (count != 0) {
            slot.copy_ids(cache.narrow(), out);  // a fixed size: no call to memcpy
        } else {
            count = slot.ids[2];
            const uint32_t* const ids = cache.arena_ids(slot, word.data, word.size);
            if (ids == nullptr) {
                victim = way;
                break;
            }
            std::memcpy(out, ids, count * sizeof(uint32_t));
        }
        WordCache::move_to_front(set, way);
        return out + count;
    }
    uint32_t* const end = merge(word.data, word.size, out);
    cache.insert(set, victim, word.key, word.data, word.size, out, size_t(end - out));
    return end;
}

uint32_t* Encoder::merge(const unsigned char* word, size_t size, uint32_t* out) const {
    if (size > kShortWord) {
        if (size >= huge_word_) return merge_huge(word, size, out);
        return size <= kMediumWord ? merge_medium(word, size, out) : merge_long(word, size, out);
    }
    return out + merge_short(word, size, out);
}

// GPT-2's loop on a small array: find the lowest-ranked adjacent pair, merge all its occurrences in
// one left-to-right pass, repeat. Writes the ids of `word` to `ids`, returns how many.
size_t Encoder::merge_short(const unsigned char* word, size_t size, uint32_t* ids) const {
    uint32_t ranks[kShortWord];    // ranks[i]: rank of (ids[i], ids[i + 1])
    uint64_t lowest[kShortWord];   // lowest[i]: the least (rank << 32 | j) over the pairs j <= i
    // Keys of (rank, index): their minimum is the lowest rank, leftmost among equals, found
    // without a branch to mispredict.
    const auto extend = [&](size_t i) {
        const uint64_t key = (uint64_t(ranks[i]) << 32) | i;
        lowest[i] = i == 0 ? key : std::min(lowest[i - 1], key);
    };
    for (size_t i = 0; i < size; ++i) ids[i] = byte_ids_[word[i]];
    for (size_t i = 0; i + 1 < size; ++i) {
        ranks[i] = byte_pair_rank(word[i], word[i + 1]);
        extend(i);
    }
    size_t count = size;
    while (count > 1) {
        const size_t first = size_t(uint32_t(lowest[count - 2]));
        const uint32_t rank = uint32_t(lowest[count - 2] >> 32);
        if (rank == kNoRank) break;
        // `first` is the leftmost occurrence, so nothing before it changes. Compact in place; only
        // pairs that touch a merged token need a new lookup, the others keep their rank. The
        // running minimum is redone from the first pair that changes on, (first - 1, first).
        const uint32_t left = ids[first];
        const uint32_t right = ids[first + 1];
        const uint32_t merged = pairs_->merged(rank);
        bool previous_merged = false;
        size_t write = first;
        for (size_t read = first; read < count; ++write) {
            const bool merging = read + 1 < count && ids[read] == left && ids[read + 1] == right;
            ids[write] = merging ? merged : ids[read];
            if (write > 0) {
                // ranks[read - 1] is still the old rank of (ids[read - 1], ids[read]): write <= read.
                ranks[write - 1] = merging || previous_merged
                                       ? pairs_->rank(ids[write - 1], ids[write])
                                       : ranks[read - 1];
                extend(write - 1);
            }
            previous_merged = merging;
            read += merging ? 2 : 1;
        }
        count = write;
    }
    return count;
}

// The same loop for words of medium length (a superword pre-token is a whole line): tokens form a
// linked list (a token keeps the index of its first byte), ranks[i] is the rank of the pair that
// token i starts (kNoRank for none), and each block of 32 pairs keeps its least rank. A round takes
// the least of the blocks' and merges every pair of that rank left to right in the blocks that hold
// it, as merge_short's pass does: the pairs a merge makes rank after it (their token did not exist
// before it), so none joins the round, and a pair that a merge removes reads kNoRank before the
// pass reaches it. The blocks whose ranks changed take their least again after the round. Against
// merge_long's heap, whose pushes and pops mispredicted: superword lines of real_mix joined into
// paragraphs, 4000 tokens, 14.0 -> 21.8 MB/s (with kShortWord 128; the same ids).
uint32_t* Encoder::merge_medium(const unsigned char* word, size_t size, uint32_t* out) const {
    constexpr size_t kBlock = 32;
    const std::unique_ptr<LinkedToken[]> tokens = linked_bytes(byte_ids_, word, size);
    const size_t blocks = (size + kBlock - 1) / kBlock;
    std::vector<uint32_t> ranks(blocks * kBlock, kNoRank);
    std::vector<uint32_t> least(blocks);
    std::vector<uint8_t> changed(blocks, 0);
    std::vector<uint32_t> changed_blocks;
    for (size_t i = 0; i + 1 < size; ++i) ranks[i] = byte_pair_rank(word[i], word[i + 1]);
    const auto take_least = [&](size_t block) {
        const uint32_t* const first = ranks.data() + block * kBlock;
        uint32_t lowest = kNoRank;
        for (size_t i = 0; i < kBlock; ++i) lowest = std::min(lowest, first[i]);
        least[block] = lowest;
    };
    const auto note_change = [&](size_t block) {
        if (changed[block] != 0) return;
        changed[block] = 1;
        changed_blocks.push_back(uint32_t(block));
    };
    for (size_t block = 0; block < blocks; ++block) take_least(block);
    for (;;) {
        uint32_t rank = kNoRank;
        for (size_t block = 0; block < blocks; ++block) rank = std::min(rank, least[block]);
        if (rank == kNoRank) break;
        const uint32_t merged = pairs_->merged(rank);
        for (size_t block = 0; block < blocks; ++block) {
            if (least[block] != rank) continue;
            for (size_t i = block * kBlock; i < (block + 1) * kBlock; ++i) {
                if (ranks[i] != rank) continue;
                const auto index = uint32_t(i);
                const uint32_t right = tokens[index].next;
                join_right(tokens.get(), index, merged);
                ranks[right] = kNoRank;
                note_change(right / kBlock);
                const uint32_t after = tokens[index].next;
                ranks[index] = after == kNoNode ? kNoRank : pairs_->rank(merged, tokens[after].id);
                const uint32_t before = tokens[index].prev;
                if (before != kNoNode) {
                    ranks[before] = pairs_->rank(tokens[before].id, merged);
                    note_change(before / kBlock);
                }
            }
            note_change(block);
        }
        for (const uint32_t block : changed_blocks) {
            take_least(block);
            changed[block] = 0;
        }
        changed_blocks.clear();
    }
    return write_ids(tokens.get(), out);
}

// The same loop for long words, in O(n log n): tokens form a linked list (a token keeps the index
// of its first byte), candidate pairs wait in a min-heap keyed (rank, index) and are checked when
// popped (lazy deletion). All occurrences of the lowest rank are popped, left to right, before the
// pairs they create are pushed: exactly the short loop's merge-every-occurrence step.
uint32_t* Encoder::merge_long(const unsigned char* word, size_t size, uint32_t* out) const {
    const std::unique_ptr<LinkedToken[]> tokens = linked_bytes(byte_ids_, word, size);
    // Candidates as one integer, rank << 32 | index of the left token: the least is the lowest rank,
    // leftmost among equals (one compare per heap step instead of two).
    std::vector<uint64_t> heap;
    heap.reserve(size);
    const auto push = [&](uint32_t index) {
        const uint32_t rank = pairs_->rank(tokens[index].id, tokens[tokens[index].next].id);
        if (rank == kNoRank) return;
        heap.push_back((uint64_t(rank) << 32) | index);
        std::push_heap(heap.begin(), heap.end(), std::greater<>());
    };
    for (uint32_t i = 0; i + 1 < size; ++i) {
        const uint32_t rank = byte_pair_rank(word[i], word[i + 1]);
        if (rank != kNoRank) heap.push_back((uint64_t(rank) << 32) | i);
    }
    std::make_heap(heap.begin(), heap.end(), std::greater<>());

    std::vector<uint32_t> merged_at;
    while (!heap.empty()) {
        const uint32_t rank = uint32_t(heap.front() >> 32);
        merged_at.clear();
        while (!heap.empty() && uint32_t(heap.front() >> 32) == rank) {
            const uint32_t index = uint32_t(heap.front());
            std::pop_heap(heap.begin(), heap.end(), std::greater<>());
            heap.pop_back();
            // Stale when a token of the pair was merged away or changed since the pair was pushed.
            const LinkedToken& left = tokens[index];
            if (left.id == kNoNode || left.next == kNoNode) continue;
            const LinkedToken& right = tokens[left.next];
            if (pairs_->rank(left.id, right.id) != rank) continue;
            join_right(tokens.get(), index, pairs_->merged(rank));
            merged_at.push_back(index);
        }
        push_new_pairs(tokens.get(), merged_at, push);
    }
    return write_ids(tokens.get(), out);
}

// merge_long's loop for huge words, whose heap outgrows the caches (a pop of a megabyte's heap
// missed them some ten times): candidates wait in a bucket per merge number instead, found through
// a two-level bitmap of the non-empty buckets. The first candidates are placed by a counting sort,
// so a bucket is one run of memory; later ones are appended to its list, sorted by index when taken
// if they came out of order. Each round takes the lowest bucket whole: merge_long's round.
uint32_t* Encoder::merge_huge(const unsigned char* word, size_t size, uint32_t* out) const {
    const std::unique_ptr<LinkedToken[]> tokens = linked_bytes(byte_ids_, word, size);
    const size_t numbers = pairs_->merges();
    struct Entry {
        uint32_t index;  // of the pair's left token
        uint32_t next;   // the bucket's next entry, or kNoNode
    };
    std::vector<Entry> pool;
    std::vector<uint32_t> first(numbers, kNoNode);
    std::vector<uint32_t> last(numbers, 0);  // first a count per bucket, for the counting sort
    std::vector<bool> unsorted(numbers, false);
    std::vector<uint64_t> live((numbers + 63) / 64, 0);        // bit per non-empty bucket
    std::vector<uint64_t> summary((live.size() + 63) / 64, 0);  // bit per non-zero word of `live`
    const auto mark = [&](size_t number) {
        live[number / 64] |= uint64_t(1) << (number % 64);
        summary[number / 4096] |= uint64_t(1) << (number / 64 % 64);
    };
    // The lowest non-empty bucket at or above `from`, or `numbers`.
    const auto lowest_from = [&](size_t from) -> size_t {
        size_t word_index = from / 64;
        if (word_index >= live.size()) return numbers;
        const uint64_t bits = live[word_index] & (~uint64_t(0) << (from % 64));
        if (bits != 0) return word_index * 64 + size_t(count_trailing_zeros(bits));
        for (size_t next_word = word_index + 1; next_word < live.size();) {
            const uint64_t words = summary[next_word / 64] & (~uint64_t(0) << (next_word % 64));
            if (words != 0) {
                const size_t found = next_word / 64 * 64 + size_t(count_trailing_zeros(words));
                return found * 64 + size_t(count_trailing_zeros(live[found]));
            }
            next_word = (next_word / 64 + 1) * 64;
        }
        return numbers;
    };

    // The first candidates, pairs of two bytes, by a counting sort on their merge number.
    // Only the buckets in use are visited (`used`), not every merge number.
    std::vector<uint32_t> byte_numbers(size > 0 ? size - 1 : 0);
    std::vector<uint32_t> used;
    for (size_t i = 0; i + 1 < size; ++i) {
        const uint32_t rank = byte_pair_rank(word[i], word[i + 1]);
        byte_numbers[i] = rank == kNoRank ? kNoNode : pairs_->number(rank);
        if (rank != kNoRank && last[byte_numbers[i]]++ == 0) used.push_back(byte_numbers[i]);
    }
    size_t placed = 0;
    for (const uint32_t number : used) {
        const size_t count = last[number];
        first[number] = uint32_t(placed);
        last[number] = uint32_t(placed);  // where the next one goes, until the fill is done
        placed += count;
        mark(number);
    }
    pool.resize(placed);
    for (size_t i = 0; i + 1 < size; ++i) {
        if (byte_numbers[i] == kNoNode) continue;
        const uint32_t entry = last[byte_numbers[i]]++;
        pool[entry] = Entry{uint32_t(i), entry + 1};
    }
    for (const uint32_t number : used) {
        --last[number];  // the bucket's last entry
        pool[last[number]].next = kNoNode;
    }
    std::vector<uint32_t>().swap(byte_numbers);

    size_t cursor = 0;
    const auto push = [&](uint32_t index) {
        const uint32_t rank = pairs_->rank(tokens[index].id, tokens[tokens[index].next].id);
        if (rank == kNoRank) return;
        const uint32_t number = pairs_->number(rank);
        const uint32_t entry = uint32_t(pool.size());
        if (entry == kNoNode) throw std::length_error("too many merge candidates");
        pool.push_back(Entry{index, kNoNode});
        if (first[number] == kNoNode) {
            first[number] = entry;
            mark(number);
        } else {
            if (pool[last[number]].index >= index) unsorted[number] = true;
            pool[last[number]].next = entry;
        }
        last[number] = entry;
        cursor = std::min<size_t>(cursor, number);
    };

    std::vector<uint32_t> batch;
    std::vector<uint32_t> merged_at;
    for (size_t number = lowest_from(cursor); number < numbers; number = lowest_from(cursor)) {
        cursor = number;
        batch.clear();
        for (uint32_t entry = first[number]; entry != kNoNode; entry = pool[entry].next) batch.push_back(pool[entry].index);
        if (unsorted[number]) {
            std::sort(batch.begin(), batch.end());
            batch.erase(std::unique(batch.begin(), batch.end()), batch.end());
            unsorted[number] = false;
        }
        first[number] = kNoNode;
        live[number / 64] &= ~(uint64_t(1) << (number % 64));
        if (live[number / 64] == 0) summary[number / 4096] &= ~(uint64_t(1) << (number / 64 % 64));
        merged_at.clear();
        for (const uint32_t index : batch) {
            // Stale when a token of the pair was merged away or changed since the pair was pushed.
            const LinkedToken& left = tokens[index];
            if (left.id == kNoNode || left.next == kNoNode) continue;
            const LinkedToken& right = tokens[left.next];
            const uint32_t rank = pairs_->rank(left.id, right.id);
            if (rank == kNoRank || pairs_->number(rank) != number) continue;
            join_right(tokens.get(), index, pairs_->merged(rank));
            merged_at.push_back(index);
        }
        push_new_pairs(tokens.get(), merged_at, push);
    }
    return write_ids(tokens.get(), out);
}

}  // namespace bpe
