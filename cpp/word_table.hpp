// The word counter's hash table: one per thread, open addressing over 32-byte slots that hold short
// words inline, lookups queued in batches with their slots prefetched, and huge pages for big tables.
// Only word_count.cpp includes it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#if !defined(_WIN32)
#include <sys/mman.h>
#endif

namespace bpe {
namespace word_table {


inline uint64_t load64(const char* p) {
    uint64_t value;
    std::memcpy(&value, p, 8);
    return value;
}

inline uint32_t load32(const char* p) {
    uint32_t value;
    std::memcpy(&value, p, 4);
    return value;
}

inline uint64_t mix(uint64_t h) {
    h ^= h >> 32;
    h *= 0xd6e8feb86659fd93ULL;
    h ^= h >> 29;
    h *= 0x9fb21c651e98df25ULL;
    h ^= h >> 32;
    return h;
}

// Most words fit in 16 bytes (English averages about five); those are kept inline in the table
// slot, zero-padded, so a lookup compares two integers instead of chasing a pointer.
constexpr size_t kInlineBytes = 16;

struct WordKey {
    uint64_t hash;
    uint64_t packed[2];  // the bytes of a short word, zero-padded, in memory order
    const char* data;
    size_t length;
};

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define BPE_LITTLE_ENDIAN 1
#endif

#if defined(BPE_LITTLE_ENDIAN)
// Overlapping loads instead of a byte loop; shifts place each byte at its memory position.
inline void pack_short(const char* p, size_t n, uint64_t packed[2]) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(p);
    if (n > 8) {
        packed[0] = load64(p);
        packed[1] = load64(p + n - 8) >> (8 * (16 - n));
    } else if (n >= 4) {
        packed[0] = load32(p) | (uint64_t(load32(p + n - 4)) << (8 * (n - 4)));
        packed[1] = 0;
    } else if (n > 0) {
        packed[0] = bytes[0] | (uint64_t(bytes[n / 2]) << (8 * (n / 2))) |
                    (uint64_t(bytes[n - 1]) << (8 * (n - 1)));
        packed[1] = 0;
    } else {
        packed[0] = packed[1] = 0;
    }
}
#else
inline void pack_short(const char* p, size_t n, uint64_t packed[2]) {
    char padded[kInlineBytes] = {};
    std::memcpy(padded, p, n);
    std::memcpy(packed, padded, kInlineBytes);
}
#endif

inline uint64_t hash_long(const char* p, size_t length) {
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ length;
    for (; length >= 8; p += 8, length -= 8) {
        h = (h ^ load64(p)) * 0xc4ceb9fe1a85ec53ULL + 0x2545f4914f6cdd1dULL;
    }
    uint64_t tail[2];
    pack_short(p, length, tail);
    return mix(h ^ tail[0]);
}

#if defined(BPE_LITTLE_ENDIAN)
// kKeep.masks[n]: the first n bytes of a 16-byte little-endian load.
struct KeepMasks {
    uint64_t masks[kInlineBytes + 1][2];
    constexpr KeepMasks() : masks() {
        for (size_t n = 0; n <= kInlineBytes; ++n) {
            masks[n][0] = n >= 8 ? ~uint64_t(0) : (uint64_t(1) << (8 * n)) - 1;
            masks[n][1] = n <= 8 ? 0 : n == 16 ? ~uint64_t(0) : (uint64_t(1) << (8 * (n - 8))) - 1;
        }
    }
};
inline constexpr KeepMasks kKeep{};
#endif

// `readable_end`: bytes before it may be read past the word's end, so that a short word can be
// packed with two whole loads and two masks, without branching on its length.
inline WordKey make_key(const char* data, size_t length, const char* readable_end) {
    WordKey key;
    key.data = data;
    key.length = length;
    if (length <= kInlineBytes) {
#if defined(BPE_LITTLE_ENDIAN)
        if (readable_end - data >= ptrdiff_t(kInlineBytes)) {
            key.packed[0] = load64(data) & kKeep.masks[length][0];
            key.packed[1] = load64(data + 8) & kKeep.masks[length][1];
        } else {
            pack_short(data, length, key.packed);
        }
#else
        (void)readable_end;
        pack_short(data, length, key.packed);
#endif
        key.hash = mix((key.packed[0] * 0xc4ceb9fe1a85ec53ULL) ^
                       (key.packed[1] + length) * 0xff51afd7ed558ccdULL);
    } else {
        key.packed[0] = key.packed[1] = 0;
        key.hash = hash_long(data, length);
    }
    return key;
}

inline WordKey make_key(const char* data, size_t length) { return make_key(data, length, data + length); }

// Long words' bytes live here; blocks never move, so slots can keep plain pointers into them.
class Arena {
public:
    const char* store(const char* data, size_t length) {
        if (length > remaining_) {
            const size_t size = std::max(length, kBlockBytes);
            blocks_.emplace_back(new char[size]);
            cursor_ = blocks_.back().get();
            remaining_ = size;
        }
        char* const stored = cursor_;
        std::memcpy(stored, data, length);
        cursor_ += length;
        remaining_ -= length;
        return stored;
    }

private:
    static constexpr size_t kBlockBytes = size_t(1) << 20;
    std::vector<std::unique_ptr<char[]>> blocks_;
    char* cursor_ = nullptr;
    size_t remaining_ = 0;
};

// 32 bytes, two per cache line; all zero is an empty slot.
struct WordSlot {
    uint32_t check;   // high half of the hash: picks the slot (top bits) and filters lookups
    uint32_t length;  // saturated; a long word's exact length is in `long_word`
    int64_t count;    // 0 marks an empty slot
    union {
        uint64_t packed[2];
        struct {
            const char* data;
            uint64_t length;
        } long_word;
    };

    size_t size() const { return length <= kInlineBytes ? length : size_t(long_word.length); }
    const char* bytes() const {
        return length <= kInlineBytes ? reinterpret_cast<const char*>(packed) : long_word.data;
    }
    std::string_view view() const { return {bytes(), size()}; }
};

inline uint32_t check_of(uint64_t hash) { return uint32_t(hash >> 32); }

inline uint32_t saturated_length(size_t length) {
    return length < UINT32_MAX ? uint32_t(length) : UINT32_MAX;
}

inline bool same_word(const WordSlot& slot, const WordKey& key) {
    if (slot.check != check_of(key.hash) || slot.length != saturated_length(key.length)) return false;
    if (key.length <= kInlineBytes) return slot.packed[0] == key.packed[0] && slot.packed[1] == key.packed[1];
    return slot.long_word.length == key.length && std::memcmp(slot.long_word.data, key.data, key.length) == 0;
}

inline void prefetch_for_write(const void* address) {
#if defined(__GNUC__)
    __builtin_prefetch(address, 1);
#else
    (void)address;
#endif
}

// Zero-filled slot storage. Lookups land on random slots, so a big table asks for transparent huge
// pages: with 4 KiB pages nearly every lookup would also miss the TLB.
class SlotBuffer {
public:
    SlotBuffer() = default;
    explicit SlotBuffer(size_t count) : count_(count) {
        const size_t bytes = count * sizeof(WordSlot);
#if defined(MADV_HUGEPAGE)
        if (bytes >= kHugePageBytes) {
            // Over-allocate by a huge page so that the slots can start on a huge-page boundary.
            mapped_bytes_ = bytes + kHugePageBytes;
            void* mapped =
                ::mmap(nullptr, mapped_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (mapped == MAP_FAILED) throw std::bad_alloc();
            mapped_ = mapped;
            const uintptr_t aligned =
                (uintptr_t(mapped) + kHugePageBytes - 1) & ~uintptr_t(kHugePageBytes - 1);
            ::madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);
            slots_ = reinterpret_cast<WordSlot*>(aligned);
            return;
        }
#endif
        slots_ = static_cast<WordSlot*>(std::calloc(count, sizeof(WordSlot)));
        if (slots_ == nullptr) throw std::bad_alloc();
    }
    SlotBuffer(SlotBuffer&& other) noexcept { swap(other); }
    SlotBuffer& operator=(SlotBuffer&& other) noexcept {
        swap(other);
        return *this;
    }
    SlotBuffer(const SlotBuffer&) = delete;
    SlotBuffer& operator=(const SlotBuffer&) = delete;
    ~SlotBuffer() {
#if defined(MADV_HUGEPAGE)
        if (mapped_ != nullptr) {
            ::munmap(mapped_, mapped_bytes_);
            return;
        }
#endif
        std::free(slots_);
    }

    WordSlot& operator[](size_t index) { return slots_[index]; }
    const WordSlot& operator[](size_t index) const { return slots_[index]; }
    size_t size() const { return count_; }

private:
    static constexpr size_t kHugePageBytes = size_t(2) << 20;

    void swap(SlotBuffer& other) noexcept {
        std::swap(slots_, other.slots_);
        std::swap(count_, other.count_);
        std::swap(mapped_, other.mapped_);
        std::swap(mapped_bytes_, other.mapped_bytes_);
    }

    WordSlot* slots_ = nullptr;
    size_t count_ = 0;
    void* mapped_ = nullptr;
    size_t mapped_bytes_ = 0;
};

// Tables are cut into partitions by the hash's top bits so that merging runs one partition per task.
constexpr unsigned kPartitionBits = 6;
constexpr size_t kPartitions = size_t(1) << kPartitionBits;

inline size_t partition_of(uint32_t check) { return check >> (32 - kPartitionBits); }

// Open addressing with linear probing, at most 70% full. A word's home slot is the top bits of its
// hash, so slots are in hash order up to probing displacement: a partition is a contiguous slot
// range in every table, and growing reinserts in order. Probing runs into spare slots past the
// last home slot instead of wrapping around (and grows the table in the unlikely case it runs out).
class WordTable {
public:
    WordTable() : WordTable(kInitialBits) {}

    void prefetch_slot(uint64_t hash) const { prefetch_for_write(&slots_[home(check_of(hash))]); }

    // Adds one occurrence of each of `keys` (the load check runs once for the batch); a new long
    // word's bytes are copied into `arena`.
    void add_each_once(const WordKey* keys, size_t count, Arena& arena) {
        while (10 * (size_ + count) > 7 * home_slots()) grow();
        for (size_t i = 0; i < count; ++i) {
            while (!try_add(keys[i], 1, arena)) grow();
        }
    }

    size_t size() const { return size_; }

    // Calls `visit(slot)` for each word whose hash is in `partition`.
    template <typename Visit>
    void for_each_in_partition(size_t partition, Visit&& visit) const {
        // Home slots of the partition are [first, last); words displaced past `last` sit in the
        // occupied run that starts there.
        const size_t first = (partition << bits_) >> kPartitionBits;
        const size_t last = ((partition + 1) << bits_) >> kPartitionBits;
        for (size_t index = first; index < slots_.size(); ++index) {
            const WordSlot& slot = slots_[index];
            if (slot.count == 0) {
                if (index >= last) break;
                continue;
            }
            if (partition_of(slot.check) == partition) visit(slot);
        }
    }

private:
    static constexpr unsigned kInitialBits = 4;
    static constexpr size_t kSpareSlots = 1024;

    explicit WordTable(unsigned bits) : bits_(bits), slots_((size_t(1) << bits) + kSpareSlots) {}

    size_t home_slots() const { return size_t(1) << bits_; }
    size_t home(uint32_t check) const { return size_t(check >> (32 - bits_)); }

    bool try_add(const WordKey& key, int64_t count, Arena& arena) {
        // Slot writes may alias the size (both are 64-bit integers): read it once.
        const size_t num_slots = slots_.size();
        for (size_t index = home(check_of(key.hash)); index < num_slots; ++index) {
            WordSlot& slot = slots_[index];
            if (slot.count == 0) {
                slot.check = check_of(key.hash);
                slot.length = saturated_length(key.length);
                slot.count = count;
                if (key.length <= kInlineBytes) {
                    slot.packed[0] = key.packed[0];
                    slot.packed[1] = key.packed[1];
                } else {
                    slot.long_word.data = arena.store(key.data, key.length);
                    slot.long_word.length = key.length;
                }
                ++size_;
                return true;
            }
            if (same_word(slot, key)) {
                slot.count += count;
                return true;
            }
        }
        return false;
    }

    void grow() {
        // The slot index is taken from the 32-bit check, so 2^32 home slots (128 GiB) is the limit.
        if (bits_ >= 32) throw std::length_error("word table too large");
        WordTable bigger(bits_ + 1);
        for (size_t index = 0; index < slots_.size(); ++index) {
            const WordSlot& slot = slots_[index];
            if (slot.count != 0) bigger.insert_new(slot);
        }
        bits_ = bigger.bits_;
        slots_ = std::move(bigger.slots_);
    }

    void insert_new(const WordSlot& slot) {
        for (size_t index = home(slot.check); index < slots_.size(); ++index) {
            if (slots_[index].count == 0) {
                slots_[index] = slot;
                ++size_;
                return;
            }
        }
        grow();
        insert_new(slot);
    }

    unsigned bits_;
    SlotBuffer slots_;
    size_t size_ = 0;
};

// One thread's counts. Words are queued a batch at a time and go through two stages: when a batch
// is full its keys are made and their slots prefetched, and they are looked up when the next batch
// is full, so the cache misses of a batch overlap each other and the scanning of the next batch.
// Queuing is two stores, cheap enough to inline into the scanner's visitor.
// Aligned so that two threads' hot fields never share a cache line.
struct alignas(64) ThreadCounts {
    static constexpr size_t kBatch = 32;

    Arena arena;
    WordTable table;
    const char* queued_data[kBatch];
    size_t queued_length[kBatch];
    size_t num_queued = 0;
    WordKey prefetched[kBatch];
    size_t num_prefetched = 0;
    const char* readable_end = nullptr;  // end of the chunk being counted

    void add(const char* word, size_t length) {
        queued_data[num_queued] = word;
        queued_length[num_queued] = length;
        if (++num_queued == kBatch) advance();
    }

    // Must run before the queued words' bytes go away (at the end of a chunk).
    void flush() {
        advance();
        const size_t ready = num_prefetched;
        num_prefetched = 0;
        table.add_each_once(prefetched, ready, arena);
    }

private:
    // Both stages are emptied before the lookups, so a lookup that throws (out of memory) cannot
    // leave a stage full.
    void advance() {
        const size_t ready = num_prefetched;
        const size_t queued = num_queued;
        num_prefetched = 0;
        num_queued = 0;
        table.add_each_once(prefetched, ready, arena);
        for (size_t i = 0; i < queued; ++i) {
            prefetched[i] = make_key(queued_data[i], queued_length[i], readable_end);
            table.prefetch_slot(prefetched[i].hash);
        }
        num_prefetched = queued;
    }
};

}  // namespace word_table
}  // namespace bpe
