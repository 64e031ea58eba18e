#include "bpe_encode.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <new>
#include <stdexcept>

#include "chunking.hpp"
#include "integer_map.hpp"
#include "mapped_file.hpp"
#include "omp_shim.hpp"
#include "pretokenize.hpp"

namespace bpe {

namespace {

constexpr uint32_t kNoRank = std::numeric_limits<uint32_t>::max();
constexpr uint32_t kNoNode = std::numeric_limits<uint32_t>::max();

// MurmurHash3's finalizer: every input bit reaches every output bit.
inline uint64_t mix(uint64_t value) {
    value ^= value >> 33;
    value *= 0xff51afd7ed558ccdULL;
    value ^= value >> 33;
    value *= 0xc4ceb9fe1a85ec53ULL;
    value ^= value >> 33;
    return value;
}

// Eight bytes at a time, for words of any length.
inline uint64_t hash_bytes(const unsigned char* data, size_t size) {
    uint64_t hash = 0x9E3779B97F4A7C15ULL * (size + 1);
    while (size >= 8) {
        hash = mix(hash ^ detail::load_little_endian64(data));
        data += 8;
        size -= 8;
    }
    uint64_t tail = 0;
    for (size_t i = 0; i < size; ++i) tail |= uint64_t(data[i]) << (8 * i);
    return mix(hash ^ tail);
}

// The first `count` (0..8) bytes of a little-endian word, the others zero.
inline uint64_t first_bytes(uint64_t word, size_t count) {
    return count >= 8 ? word : word & ((uint64_t(1) << (8 * count)) - 1);
}

inline void prefetch(const void* address) {
#if defined(__GNUC__)
    __builtin_prefetch(address);
#else
    (void)address;
#endif
}

// Zeroed memory aligned to `alignment` (a power of two), resident only once touched (calloc of a
// large block maps fresh pages). Released with std::free(*raw).
void* aligned_zeroed(size_t bytes, size_t alignment, void** raw) {
    *raw = std::calloc(1, bytes + alignment);
    if (*raw == nullptr) throw std::bad_alloc();
    const uintptr_t address = (reinterpret_cast<uintptr_t>(*raw) + alignment - 1) & ~uintptr_t(alignment - 1);
    return reinterpret_cast<void*>(address);
}

}  // namespace

// (left, right) -> rank. Most lookups fail (most adjacent pairs have no merge) and each is a likely
// cache miss, so the table is small: 8-byte slots holding a check of the pair's hash and the rank,
// the pair itself verified in the rule the rank names.
class Encoder::PairTable {
public:
    explicit PairTable(const std::vector<MergeRule>& merges) : rules_(merges) {
        size_t capacity = 16;
        while (capacity < 2 * merges.size()) capacity *= 2;
        slots_.assign(capacity, Slot{0, kNoRank});
        mask_ = capacity - 1;
        shift_ = 64;
        for (size_t c = capacity; c > 1; c >>= 1) --shift_;
        for (uint32_t rank = 0; rank < merges.size(); ++rank) {
            const MergeRule& rule = merges[rank];
            const uint64_t hash = mix(pair_key(rule.left, rule.right));
            size_t slot = size_t(hash >> shift_);
            bool present = false;  // a repeated pair keeps its first rank
            for (; slots_[slot].rank != kNoRank; slot = (slot + 1) & mask_) {
                if (same_pair(slots_[slot].rank, rule.left, rule.right)) present = true;
            }
            if (!present) slots_[slot] = Slot{uint32_t(hash), rank};
        }
    }

    uint32_t rank(uint32_t left, uint32_t right) const {
        const uint64_t hash = mix(pair_key(left, right));
        const uint32_t check = uint32_t(hash);
        for (size_t slot = size_t(hash >> shift_);; slot = (slot + 1) & mask_) {
            const Slot entry = slots_[slot];
            if (entry.rank == kNoRank) return kNoRank;
            if (entry.check == check && same_pair(entry.rank, left, right)) return entry.rank;
        }
    }

    uint32_t merged(uint32_t rank) const { return rules_[rank].merged; }

private:
    struct Slot {
        uint32_t check;  // low half of the pair's hash (the high bits chose the slot)
        uint32_t rank;   // kNoRank: empty
    };

    bool same_pair(uint32_t rank, uint32_t left, uint32_t right) const {
        return rules_[rank].left == left && rules_[rank].right == right;
    }

    std::vector<MergeRule> rules_;
    std::vector<Slot> slots_;
    size_t mask_ = 0;
    int shift_ = 64;
};

// One thread's pre-token -> ids cache. A word of up to kInlineBytes bytes giving up to kInlineIds
// ids lives in a 32-byte slot, key inline, four slots to a set (two cache lines), the most recently
// used first: nearly all lookups are answered there by one code path. Longer words, and words of
// more ids, go to an arena of records indexed by hash, emptied whole when full.
class Encoder::WordCache {
public:
    static constexpr size_t kWays = 4;

    struct Slot {
        uint64_t key[2];  // the word's bytes, zero-padded
        uint8_t size;     // 0: empty
        uint8_t count;
        uint16_t unused;
        uint32_t ids[kInlineIds];
    };
    static_assert(sizeof(Slot) == 32, "two slots fill a 64-byte cache line");
    static_assert(kInlineBytes == sizeof(Slot::key), "the inline key holds kInlineBytes bytes");

    // `slots`: a power of two, at least kWays.
    explicit WordCache(size_t slots) {
        slots_ = static_cast<Slot*>(aligned_zeroed(slots * sizeof(Slot), kWays * sizeof(Slot), &slots_memory_));
        shift_ = 64;
        for (size_t sets = slots / kWays; sets > 1; sets >>= 1) --shift_;
        // The arena side gets 16 bytes per slot: 12 of arena, 4 of index.
        index_size_ = std::max<size_t>(16, slots / 2);
        arena_words_ = slots * 3;
        index_ = static_cast<uint64_t*>(std::calloc(index_size_, sizeof(uint64_t)));
        sets_in_arena_.assign((slots / kWays + 63) / 64, 0);
        arena_ = static_cast<uint32_t*>(std::malloc(std::max<size_t>(arena_words_, 1) * sizeof(uint32_t)));
        if (index_ == nullptr || arena_ == nullptr) {
            release();
            throw std::bad_alloc();
        }
    }
    ~WordCache() { release(); }
    WordCache(const WordCache&) = delete;
    WordCache& operator=(const WordCache&) = delete;

    // Multiplicative hashing of the key: the top bits choose the set.
    Slot* set_of(uint64_t first, uint64_t second, size_t size) const {
        const uint64_t hash = ((first ^ (second * 0xC2B2AE3D27D4EB4FULL) ^ size) * 0x9E3779B97F4A7C15ULL);
        return shift_ == 64 ? slots_ : slots_ + size_t(hash >> shift_) * kWays;
    }

    // The ids of a long word (or of a short word of many ids), or nullptr.
    const uint32_t* find_long(const unsigned char* word, size_t size, uint64_t hash, size_t& count) const {
        const uint32_t tag = uint32_t(hash >> 32);
        for (size_t index = size_t(hash) & (index_size_ - 1); index_[index] != 0;
             index = (index + 1) & (index_size_ - 1)) {
            if (uint32_t(index_[index] >> 32) != tag) continue;
            const uint32_t* record = arena_ + (uint32_t(index_[index]) - 1);
            if (record[0] == size && std::memcmp(record + 2, word, size) == 0) {
                count = record[1];
                return record + 2 + (size + 3) / 4;
            }
        }
        return nullptr;
    }

    // Whether a short word of `set` may have gone to the arena: most misses then skip its lookup there.
    bool arena_may_hold(const Slot* set) const {
        const size_t index = size_t(set - slots_) / kWays;
        return (sets_in_arena_[index / 64] >> (index % 64)) & 1;
    }
    void mark_in_arena(const Slot* set) {
        const size_t index = size_t(set - slots_) / kWays;
        sets_in_arena_[index / 64] |= uint64_t(1) << (index % 64);
    }

    void insert_long(const unsigned char* word, size_t size, uint64_t hash, const uint32_t* ids, size_t count) {
        const size_t record_words = 2 + (size + 3) / 4 + count;
        if (record_words > arena_words_ / 16) return;  // one word must not flush the rest
        if (arena_used_ + record_words > arena_words_ || 2 * (index_used_ + 1) > index_size_) {
            std::memset(index_, 0, index_size_ * sizeof(uint64_t));
            std::fill(sets_in_arena_.begin(), sets_in_arena_.end(), 0);
            arena_used_ = 0;
            index_used_ = 0;
        }
        uint32_t* record = arena_ + arena_used_;
        record[0] = uint32_t(size);
        record[1] = uint32_t(count);
        std::memcpy(record + 2, word, size);
        std::memcpy(record + 2 + (size + 3) / 4, ids, count * sizeof(uint32_t));
        size_t index = size_t(hash) & (index_size_ - 1);
        while (index_[index] != 0) index = (index + 1) & (index_size_ - 1);
        index_[index] = (uint64_t(uint32_t(hash >> 32)) << 32) | (arena_used_ + 1);
        arena_used_ += record_words;
        ++index_used_;
    }

private:
    void release() {
        std::free(slots_memory_);
        std::free(index_);
        std::free(arena_);
    }

    Slot* slots_ = nullptr;
    void* slots_memory_ = nullptr;
    int shift_ = 64;
    std::vector<uint64_t> sets_in_arena_;  // a bit per set: one of its short words went to the arena
    uint64_t* index_ = nullptr;  // tag << 32 | (arena offset + 1); 0: empty
    size_t index_size_ = 0;
    size_t index_used_ = 0;
    uint32_t* arena_ = nullptr;  // records: size, count, the word's bytes (padded to 4), the ids
    size_t arena_words_ = 0;
    size_t arena_used_ = 0;
};

// A pre-token waiting in encode_ordinary's queue; `key` and `set` are set when there is a cache and
// it is short enough for an inline slot.
struct Encoder::PendingWord {
    const unsigned char* data;
    size_t size;
    uint64_t key[2];
    WordCache::Slot* set;
};

class Encoder::CacheLease {
public:
    CacheLease(Encoder& encoder, int threads) : lock_(encoder.caches_mutex_, std::try_to_lock) {
        if (!lock_.owns_lock() || encoder.cache_slots_ == 0) return;
        while (encoder.caches_.size() < size_t(std::max(threads, 1))) {
            encoder.caches_.push_back(std::make_unique<WordCache>(encoder.cache_slots_));
        }
        caches_ = &encoder.caches_;
    }

    WordCache* get(int thread) const { return caches_ != nullptr ? (*caches_)[size_t(thread)].get() : nullptr; }

private:
    std::unique_lock<std::mutex> lock_;
    const std::vector<std::unique_ptr<WordCache>>* caches_ = nullptr;
};

Encoder::Encoder(const std::vector<uint32_t>& byte_ids, const std::vector<MergeRule>& merges,
                 const std::vector<std::pair<std::string, uint32_t>>& special_tokens, size_t cache_slots)
    : specials_([&] {
          std::vector<std::string> tokens;
          for (const auto& special : special_tokens) tokens.push_back(special.first);
          return tokens;
      }()) {
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
    pairs_ = std::make_unique<PairTable>(merges);
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

    if (cache_slots > 0) {
        cache_slots_ = WordCache::kWays;
        while (cache_slots_ < cache_slots) cache_slots_ <<= 1;
        // The calling thread's cache now, so that encode never reserves memory.
        caches_.push_back(std::make_unique<WordCache>(cache_slots_));
    }
}

Encoder::~Encoder() = default;

size_t Encoder::encode(std::string_view text, uint32_t* out) {
    const CacheLease lease(*this, 1);
    return encode_with(text, out, lease.get(0));
}

void Encoder::encode(std::string_view text, std::vector<uint32_t>& out) {
    const size_t before = out.size();
    out.resize(before + text.size() + 2);
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
    const std::string_view text = file.view();
    threads = threads > 0 ? threads : omp_default_threads();
    if (chunk_bytes == 0) {
        // Enough chunks to balance the threads, small enough that the ids in flight stay modest.
        chunk_bytes = std::clamp<size_t>(text.size() / (size_t(threads) * 8) + 1, size_t(1) << 18, size_t(8) << 20);
    }
    const std::vector<size_t> cuts = chunk_boundaries(text, specials_, chunk_bytes, threads);
    const size_t chunks = cuts.size() - 1;
    threads = int(std::min<size_t>(size_t(threads), std::max<size_t>(chunks, 1)));  // no more caches than chunks
    const CacheLease lease(*this, threads);

    // Chunks go in windows of a few per thread; each window's ids are handed on in order.
    const size_t window = 4 * size_t(threads);
    std::vector<std::unique_ptr<uint32_t[]>> buffers(window);
    std::vector<size_t> capacities(window, 0);
    std::vector<size_t> counts(window, 0);
    std::vector<size_t> invalid(window, kValidUtf8);
    size_t total = 0;
    for (size_t first = 0; first < chunks; first += window) {
        const size_t count = std::min(window, chunks - first);
        for (size_t i = 0; i < count; ++i) {
            const size_t size = cuts[first + i + 1] - cuts[first + i];
            if (capacities[i] < size + 2) {
                buffers[i].reset(new uint32_t[size + 2]);
                capacities[i] = size + 2;
            }
            invalid[i] = kValidUtf8;
        }
        parallel_for(count, threads, [&](size_t i) {
            const size_t begin = cuts[first + i];
            const std::string_view chunk = text.substr(begin, cuts[first + i + 1] - begin);
            try {
                counts[i] = encode_with(chunk, buffers[i].get(), lease.get(omp_thread_id()));
            } catch (const InvalidUtf8Error& error) {
                invalid[i] = begin + error.offset();
            }
            file.release(chunk.data(), chunk.size());
        });
        for (size_t i = 0; i < count; ++i) {
            if (invalid[i] != kValidUtf8) throw InvalidUtf8Error(invalid[i]);
            total += counts[i];
            if (sink(context, buffers[i].get(), counts[i], cuts[first + i + 1])) return total;
        }
    }
    return total;
}

size_t Encoder::encode_with(std::string_view text, uint32_t* out, WordCache* cache) const {
    uint32_t* end = out;
    specials_.for_each_part(
        text,
        [&](size_t begin, size_t stop) {
            if (stop > begin) end = encode_ordinary(text.substr(begin, stop - begin), begin, end, cache);
        },
        [&](size_t token) { *end++ = special_ids_[token]; });
    return size_t(end - out);
}

// How many words ahead of the one being encoded are scanned and their cache slots prefetched:
// enough that a slot arrives from memory before it is needed.
constexpr size_t kQueue = 64;

uint32_t* Encoder::encode_ordinary(std::string_view text, size_t offset, uint32_t* out, WordCache* cache) const {
    // Cache slots are scattered over megabytes, so most lookups miss the CPU caches. Words are
    // therefore handled in batches: hash the whole batch and prefetch its slots first, so the
    // memory fetches overlap instead of each lookup waiting for its own.
    PendingWord queue[kQueue];
    size_t queued = 0;     // words seen
    size_t processed = 0;  // words encoded; the rest wait in queue[index % kQueue]
    const auto* const base = reinterpret_cast<const unsigned char*>(text.data());
    const unsigned char* const end = base + text.size();
    // A word found in its set is taken here, inline; everything else in encode_word.
    const auto take = [&](const PendingWord& word) {
        if (WordCache::Slot* const set = word.set) {
            for (size_t way = 0; way < WordCache::kWays; ++way) {
                const WordCache::Slot& slot = set[way];
                if (slot.key[0] != word.key[0] || slot.key[1] != word.key[1] || slot.size != word.size) continue;
                // All kInlineIds, whatever the count: the caller's spare room makes that safe.
                for (size_t i = 0; i < kInlineIds; ++i) out[i] = slot.ids[i];
                out += slot.count;
                if (way > 0) {  // to the front: the most recently used is found first
                    const WordCache::Slot found = slot;
                    std::memmove(set + 1, set, way * sizeof(found));
                    set[0] = found;
                }
                return;
            }
        }
        out = encode_word(word, out, cache);
    };
    const size_t invalid = for_each_pretoken(text.data(), text.size(), [&](size_t begin, size_t stop) {
        PendingWord& word = queue[queued++ % kQueue];
        const unsigned char* const data = base + begin;
        const size_t size = stop - begin;
        word.data = data;
        word.size = size;
        word.set = nullptr;
        if (cache != nullptr && size <= kInlineBytes) {
            uint64_t first, second;
            if (end - data >= 16) {
                first = detail::load_little_endian64(data);
                second = detail::load_little_endian64(data + 8);
            } else {  // near the end of the text: read no byte past it
                unsigned char padded[16] = {};
                std::memcpy(padded, data, size);
                first = detail::load_little_endian64(padded);
                second = detail::load_little_endian64(padded + 8);
            }
            word.key[0] = first_bytes(first, size);
            word.key[1] = size > 8 ? first_bytes(second, size - 8) : 0;
            word.set = cache->set_of(word.key[0], word.key[1], size);
            prefetch(word.set);
            prefetch(word.set + 2);
        }
        if (queued - processed == kQueue) take(queue[processed++ % kQueue]);
    });
    while (processed < queued) take(queue[processed++ % kQueue]);
    if (invalid != kValidUtf8) throw InvalidUtf8Error(offset + invalid);
    return out;
}

uint32_t* Encoder::encode_word(const PendingWord& word, uint32_t* out, WordCache* cache) const {
    const size_t size = word.size;
    if (size == 1 && cache == nullptr) {
        *out = byte_ids_[*word.data];
        return out + 1;
    }
    // Not in its set (take() looked): perhaps in the arena, else merged now.
    uint64_t hash = 0;
    const bool look_in_arena = cache != nullptr && (word.set == nullptr || cache->arena_may_hold(word.set));
    if (look_in_arena) {
        hash = hash_bytes(word.data, size);
        size_t count;
        if (const uint32_t* ids = cache->find_long(word.data, size, hash, count)) {
            std::memcpy(out, ids, count * sizeof(uint32_t));
            return out + count;
        }
    }
    size_t count;
    if (size > kShortWord) {
        count = size_t(merge_long(word.data, size, out) - out);
    } else {
        count = merge_short(word.data, size, out);
    }
    if (word.set != nullptr && count <= kInlineIds) {
        WordCache::Slot* const set = word.set;
        std::memmove(set + 1, set, (WordCache::kWays - 1) * sizeof(WordCache::Slot));  // the least recent goes
        WordCache::Slot& slot = set[0];
        slot.key[0] = word.key[0];
        slot.key[1] = word.key[1];
        slot.size = uint8_t(size);
        slot.count = uint8_t(count);
        std::memcpy(slot.ids, out, count * sizeof(uint32_t));
    } else if (cache != nullptr) {
        if (!look_in_arena) hash = hash_bytes(word.data, size);
        if (word.set != nullptr) cache->mark_in_arena(word.set);
        cache->insert_long(word.data, size, hash, out, count);
    }
    return out + count;
}

// GPT-2's loop on a small array: find the lowest-ranked adjacent pair, merge all its occurrences in
// one left-to-right pass, repeat. Writes the ids of `word` to `ids`, returns how many.
size_t Encoder::merge_short(const unsigned char* word, size_t size, uint32_t* ids) const {
    uint32_t ranks[kShortWord];  // ranks[i]: rank of (ids[i], ids[i + 1])
    for (size_t i = 0; i < size; ++i) ids[i] = byte_ids_[word[i]];
    for (size_t i = 0; i + 1 < size; ++i) ranks[i] = byte_pair_rank(word[i], word[i + 1]);
    size_t count = size;
    while (count > 1) {
        // The lowest rank, leftmost among equals, as a minimum of (rank, index) keys: no branch to
        // mispredict.
        uint64_t lowest = uint64_t(ranks[0]) << 32;
        for (size_t i = 1; i + 1 < count; ++i) lowest = std::min(lowest, (uint64_t(ranks[i]) << 32) | i);
        const size_t first = size_t(uint32_t(lowest));
        const uint32_t rank = uint32_t(lowest >> 32);
        if (rank == kNoRank) break;
        // `first` is the leftmost occurrence, so nothing before it changes. Compact in place; only
        // pairs that touch a merged token need a new lookup, the others keep their rank.
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
            }
            previous_merged = merging;
            read += merging ? 2 : 1;
        }
        count = write;
    }
    return count;
}

// The same loop for long words, in O(n log n): tokens form a linked list (a token keeps the index
// of its first byte), candidate pairs wait in a min-heap keyed (rank, index) and are checked when
// popped (lazy deletion). All occurrences of the lowest rank are popped, left to right, before the
// pairs they create are pushed: exactly the short loop's merge-every-occurrence step.
uint32_t* Encoder::merge_long(const unsigned char* word, size_t size, uint32_t* out) const {
    if (size >= kNoNode) throw std::length_error("a pre-token of 4 GiB or more");
    std::vector<uint32_t> ids(size);
    std::vector<uint32_t> prev(size);
    std::vector<uint32_t> next(size);
    std::vector<bool> alive(size, true);
    for (size_t i = 0; i < size; ++i) {
        ids[i] = byte_ids_[word[i]];
        prev[i] = i == 0 ? kNoNode : uint32_t(i - 1);
        next[i] = i + 1 == size ? kNoNode : uint32_t(i + 1);
    }
    using Candidate = std::pair<uint32_t, uint32_t>;  // (rank, index of the left token)
    std::vector<Candidate> heap;
    const auto push = [&](uint32_t index) {
        const uint32_t rank = pairs_->rank(ids[index], ids[next[index]]);
        if (rank == kNoRank) return;
        heap.emplace_back(rank, index);
        std::push_heap(heap.begin(), heap.end(), std::greater<>());
    };
    for (uint32_t i = 0; i + 1 < size; ++i) {
        const uint32_t rank = byte_pair_rank(word[i], word[i + 1]);
        if (rank != kNoRank) heap.emplace_back(rank, i);
    }
    std::make_heap(heap.begin(), heap.end(), std::greater<>());

    std::vector<uint32_t> merged_at;
    while (!heap.empty()) {
        const uint32_t rank = heap.front().first;
        merged_at.clear();
        while (!heap.empty() && heap.front().first == rank) {
            const uint32_t index = heap.front().second;
            std::pop_heap(heap.begin(), heap.end(), std::greater<>());
            heap.pop_back();
            // Stale when a token of the pair was merged away since the pair was pushed.
            if (!alive[index] || next[index] == kNoNode) continue;
            const uint32_t right = next[index];
            if (pairs_->rank(ids[index], ids[right]) != rank) continue;
            ids[index] = pairs_->merged(rank);
            alive[right] = false;
            next[index] = next[right];
            if (next[right] != kNoNode) prev[next[right]] = index;
            merged_at.push_back(index);
        }
        for (const uint32_t index : merged_at) {
            if (!alive[index]) continue;  // only with a merge whose result equals its right token
            if (prev[index] != kNoNode) push(prev[index]);
            if (next[index] != kNoNode) push(index);
        }
    }
    for (uint32_t index = 0; index != kNoNode; index = next[index]) *out++ = ids[index];
    return out;
}

}  // namespace bpe
