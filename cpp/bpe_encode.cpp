#include "bpe_encode.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <new>
#include <stdexcept>

#include "integer_map.hpp"
#include "pretokenize.hpp"

namespace bpe {

namespace {

constexpr uint32_t kNoRank = std::numeric_limits<uint32_t>::max();
constexpr uint32_t kNoNode = std::numeric_limits<uint32_t>::max();

inline uint64_t mix(uint64_t value) {
    value ^= value >> 33;
    value *= 0xff51afd7ed558ccdULL;
    value ^= value >> 33;
    return value;
}

// Eight bytes at a time: the words we cache are at most Encoder::kCachedBytes long.
inline uint64_t hash_bytes(const unsigned char* data, size_t size) {
    uint64_t hash = 0x9E3779B97F4A7C15ULL * (size + 1);
    while (size >= 8) {
        uint64_t chunk;
        std::memcpy(&chunk, data, 8);
        hash = mix(hash ^ chunk);
        data += 8;
        size -= 8;
    }
    uint64_t tail = 0;
    std::memcpy(&tail, data, size);
    return mix(hash ^ tail);
}

inline void prefetch(const void* address) {
#if defined(__GNUC__)
    __builtin_prefetch(address);
#else
    (void)address;
#endif
}

}  // namespace

// (left, right) -> rank. Most lookups fail (most adjacent pairs have no merge), so the map's short
// probe runs matter more than its size.
class Encoder::PairTable {
public:
    explicit PairTable(const std::vector<MergeRule>& merges) : ranks_(merges.size()) {
        merged_by_rank_.reserve(merges.size());
        for (const MergeRule& merge : merges) {
            const uint32_t rank = uint32_t(merged_by_rank_.size());
            merged_by_rank_.push_back(merge.merged);
            ranks_.find_or_insert(pair_key(merge.left, merge.right), rank);  // a repeated pair keeps its first rank
        }
    }

    uint32_t rank(uint32_t left, uint32_t right) const { return ranks_.find(pair_key(left, right), kNoRank); }

    uint32_t merged(uint32_t rank) const { return merged_by_rank_[rank]; }

private:
    IntegerMap<uint32_t> ranks_;
    std::vector<uint32_t> merged_by_rank_;
};

struct Encoder::CacheSlot {
    uint32_t hash;  // high half of the word's hash (the low bits chose the slot)
    uint8_t size;   // 0: empty
    uint8_t count;
    unsigned char bytes[kCachedBytes];
    uint32_t ids[kCachedIds];
};

Encoder::Encoder(const std::vector<uint32_t>& byte_ids, const std::vector<MergeRule>& merges,
                 const std::vector<std::pair<std::string, uint32_t>>& special_tokens, size_t cache_slots)
    : specials_([&] {
          std::vector<std::string> tokens;
          for (const auto& special : special_tokens) tokens.push_back(special.first);
          return tokens;
      }()) {
    static_assert(sizeof(CacheSlot) == 64, "a cache slot is meant to fill one 64-byte cache line");
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
        size_t sets = 1;
        while (2 * sets < cache_slots) sets <<= 1;
        // calloc: zeroed (every slot empty) by the OS on first touch, so resident memory grows with
        // use, while the address space is reserved now, before any encode.
        cache_.reset(static_cast<CacheSlot*>(std::calloc(2 * sets, sizeof(CacheSlot))));
        if (!cache_) throw std::bad_alloc();
        cache_mask_ = sets - 1;
    }
}

Encoder::~Encoder() = default;

void Encoder::FreeDeleter::operator()(void* memory) const { std::free(memory); }

void Encoder::encode(std::string_view text, std::vector<uint32_t>& out) {
    std::unique_lock<std::mutex> lock(cache_mutex_, std::try_to_lock);
    CacheSlot* cache = lock.owns_lock() ? cache_.get() : nullptr;
    specials_.for_each_part(
        text,
        [&](size_t begin, size_t end) {
            if (end > begin) encode_ordinary_with(text.substr(begin, end - begin), begin, out, cache);
        },
        [&](size_t token) { out.push_back(special_ids_[token]); });
}

void Encoder::encode_ordinary_with(std::string_view text, size_t offset, std::vector<uint32_t>& out,
                                   CacheSlot* cache) {
    // Cache slots are scattered over megabytes, so most lookups miss the CPU caches. Words are
    // therefore handled in batches: hash the whole batch and prefetch its slots first, so the
    // memory fetches overlap instead of each lookup waiting for its own.
    PendingWord batch[kBatch];
    size_t pending = 0;
    const auto flush = [&] {
        for (size_t i = 0; i < pending; ++i) encode_word(batch[i], out, cache);
        pending = 0;
    };
    const auto* const base = reinterpret_cast<const unsigned char*>(text.data());
    const size_t invalid = for_each_pretoken(text.data(), text.size(), [&](size_t begin, size_t end) {
        PendingWord& word = batch[pending++];
        word.data = base + begin;
        word.size = end - begin;
        if (cache != nullptr && word.size > 1 && word.size <= kCachedBytes) {
            word.hash = hash_bytes(word.data, word.size);
            const CacheSlot* set = &cache[(word.hash & cache_mask_) * 2];
            prefetch(set);
            prefetch(set + 1);
        }
        if (pending == kBatch) flush();
    });
    flush();
    if (invalid != kValidUtf8) throw InvalidUtf8Error(offset + invalid);
}

void Encoder::encode_word(const PendingWord& word, std::vector<uint32_t>& out, CacheSlot* cache) {
    const size_t size = word.size;
    if (size == 1) {
        out.push_back(byte_ids_[*word.data]);
        return;
    }
    CacheSlot* set = nullptr;  // two slots, the most recently used first
    uint32_t tag = 0;
    if (cache != nullptr && size <= kCachedBytes) {
        set = &cache[(word.hash & cache_mask_) * 2];
        tag = uint32_t(word.hash >> 32);
        for (size_t way = 0; way < 2; ++way) {
            const CacheSlot& slot = set[way];
            if (slot.size == size && slot.hash == tag && std::memcmp(slot.bytes, word.data, size) == 0) {
                out.insert(out.end(), slot.ids, slot.ids + slot.count);
                if (way == 1) std::swap(set[0], set[1]);
                return;
            }
        }
    }
    if (size > kShortWord) {
        merge_long(word.data, size, out);
        return;
    }
    uint32_t ids[kShortWord];
    for (size_t i = 0; i < size; ++i) ids[i] = byte_ids_[word.data[i]];
    const size_t count = merge_short(ids, size);
    out.insert(out.end(), ids, ids + count);
    if (set != nullptr && count <= kCachedIds) {
        set[1] = set[0];  // the least recently used of the two goes
        CacheSlot& slot = set[0];
        slot.hash = tag;
        slot.size = uint8_t(size);
        slot.count = uint8_t(count);
        std::memcpy(slot.bytes, word.data, size);
        std::memcpy(slot.ids, ids, count * sizeof(uint32_t));
    }
}

// GPT-2's loop on a small array: find the lowest-ranked adjacent pair, merge all its occurrences in
// one left-to-right pass, repeat. Returns the new length.
size_t Encoder::merge_short(uint32_t* ids, size_t count) const {
    uint32_t ranks[kShortWord];  // ranks[i]: rank of (ids[i], ids[i + 1])
    for (size_t i = 0; i + 1 < count; ++i) ranks[i] = pairs_->rank(ids[i], ids[i + 1]);
    while (count > 1) {
        size_t first = 0;
        for (size_t i = 1; i + 1 < count; ++i) {
            if (ranks[i] < ranks[first]) first = i;
        }
        const uint32_t rank = ranks[first];
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
void Encoder::merge_long(const unsigned char* word, size_t size, std::vector<uint32_t>& out) const {
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
    for (uint32_t i = 0; i + 1 < size; ++i) push(i);

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
    for (uint32_t index = 0; index != kNoNode; index = next[index]) out.push_back(ids[index]);
}

}  // namespace bpe
