// The word counter's hash table: one per thread, open addressing over 32-byte slots that hold short
// words inline, lookups queued in batches with their slots prefetched, and huge pages for big tables.
// word_count.cpp includes it; the encoder borrows kKeep for its own cache keys.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "kit/bits.hpp"
#include "kit/huge_pages.hpp"
#include "scan/pretokenize.hpp"

namespace bpe {
namespace word_table {


// Words of up to 15 bytes (English averages about five) are kept inline in the table slot as two
// integers, zero-padded, with their length in the last byte, so a lookup compares two integers
// instead of chasing a pointer.
constexpr size_t kPackedBytes = 16;
constexpr size_t kInlineBytes = kPackedBytes - 1;

// A word as the table compares it: `packed` is the same in a key and in a table slot.
//   inline word (1-15 bytes): the bytes zero-padded, in memory order, the length in byte 15;
//   long word (16 bytes or more): packed[0] the address of its bytes, packed[1] the length
//   (byte 15 zero: the length is below 2^56).
// No word is empty, so packed[1] is never 0; an empty slot has packed[1] == 0.
struct WordKey {
    uint64_t hash;
    uint64_t packed[2];
};

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
    char padded[kPackedBytes] = {};
    std::memcpy(padded, p, n);
    std::memcpy(packed, padded, kPackedBytes);
}
#endif

// kKeep.masks[n]: the first n bytes of a 16-byte little-endian load (the encoder's cache keys use
// them too).
struct KeepMasks {
    uint64_t masks[kPackedBytes + 1][2];
    constexpr KeepMasks() : masks() {
        for (size_t n = 0; n <= kPackedBytes; ++n) {
            masks[n][0] = n >= 8 ? ~uint64_t(0) : (uint64_t(1) << (8 * n)) - 1;
            masks[n][1] = n <= 8 ? 0 : n == 16 ? ~uint64_t(0) : (uint64_t(1) << (8 * (n - 8))) - 1;
        }
    }
};
inline constexpr KeepMasks kKeep{};

// The length of an inline word, placed in byte 15 of `packed`.
inline uint64_t inline_length_tag(size_t length) {
#if defined(BPE_LITTLE_ENDIAN)
    return uint64_t(length) << 56;
#else
    return uint64_t(length);
#endif
}

inline bool is_inline(uint64_t packed_high) { return (packed_high & inline_length_tag(0xFF)) != 0; }

// A long word's length as packed[1] holds it (byte 15 zero), and back.
inline uint64_t long_length_field(size_t length) {
#if defined(BPE_LITTLE_ENDIAN)
    return uint64_t(length);
#else
    return uint64_t(length) << 8;
#endif
}

inline size_t long_length(uint64_t packed_high) {
#if defined(BPE_LITTLE_ENDIAN)
    return size_t(packed_high);
#else
    return size_t(packed_high >> 8);
#endif
}

inline size_t inline_length(uint64_t packed_high) {
#if defined(BPE_LITTLE_ENDIAN)
    return size_t(packed_high >> 56);
#else
    return size_t(packed_high & 0xFF);
#endif
}

// A long word's address as packed[0] holds it, and back.
inline uint64_t address_field(const char* address) { return uint64_t(reinterpret_cast<uintptr_t>(address)); }
inline const char* address_of(uint64_t field) { return reinterpret_cast<const char*>(uintptr_t(field)); }

// The canonical hash of an inline word (it orders count_words' output; long words: hash_bytes):
// its check (top 32 bits) depends on every bit of both integers, and it costs two multiplications.
inline uint64_t hash_inline(uint64_t low, uint64_t high) {
    return (low * 0xc4ceb9fe1a85ec53ULL) ^ (high * 0xff51afd7ed558ccdULL);
}

// `readable_end`: bytes before it may be read past the word's end, so that a short word can be
// packed with two whole loads and two masks, without branching on its length. `length` >= 1.
inline WordKey make_key(const char* data, size_t length, const char* readable_end) {
    WordKey key;
    if (length <= kInlineBytes) {
#if defined(BPE_LITTLE_ENDIAN)
        if (readable_end - data >= ptrdiff_t(kPackedBytes)) {
            key.packed[0] = load64(data) & kKeep.masks[length][0];
            key.packed[1] = load64(data + 8) & kKeep.masks[length][1];
        } else {
            pack_short(data, length, key.packed);
        }
#else
        (void)readable_end;
        pack_short(data, length, key.packed);
#endif
        key.packed[1] |= inline_length_tag(length);
        key.hash = hash_inline(key.packed[0], key.packed[1]);
    } else {
        key.hash = hash_bytes(data, length);
        key.packed[0] = address_field(data);
        key.packed[1] = long_length_field(length);
    }
    return key;
}

inline WordKey make_key(const char* data, size_t length) { return make_key(data, length, data + length); }

// Equality of two long words' bytes (`length` > 8), inline: a call to memcmp cost more than the
// comparison (most long words are under 32 bytes).
inline bool same_long_bytes(const char* a, const char* b, size_t length) {
    uint64_t differ = load64(a + length - 8) ^ load64(b + length - 8);
    for (size_t offset = 0; offset + 8 < length; offset += 8) differ |= load64(a + offset) ^ load64(b + offset);
    return differ == 0;
}

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
    uint64_t packed[2];  // as in WordKey; a long word's address points into the table's arena
    uint32_t check;      // high half of the hash: picks the slot (top bits) and orders the output
    int64_t count;

    bool empty() const { return packed[1] == 0; }
    size_t size() const { return is_inline(packed[1]) ? inline_length(packed[1]) : long_length(packed[1]); }
    const char* bytes() const {
        return is_inline(packed[1]) ? reinterpret_cast<const char*>(packed) : address_of(packed[0]);
    }
    std::string_view view() const { return {bytes(), size()}; }
};
static_assert(sizeof(WordSlot) == 32, "two slots per cache line");

inline uint32_t check_of(uint64_t hash) { return uint32_t(hash >> 32); }


// Whether a slot holding `low` (packed[0]) and `check`, whose packed[1] equals the key's, holds the
// key's word: an inline word is its two integers; a long word's address is the text's in the key and
// the arena's in the slot, so its bytes are compared.
inline bool holds_word(uint64_t low, uint32_t check, const WordKey& key) {
    return low == key.packed[0] ||
           (!is_inline(key.packed[1]) && check == check_of(key.hash) &&
            same_long_bytes(address_of(low), address_of(key.packed[0]), long_length(key.packed[1])));
}

// Where a word's slot is, to prefetch it before its lookup: in a table of kSlotBytes-byte slots
// whose home slot is the check scaled to the number of home slots (WordTable, SharedWords).
constexpr size_t kSlotBytes = 32;
static_assert(sizeof(WordSlot) == kSlotBytes, "a table's slots are as SlotAddresses says");

struct SlotAddresses {
    const char* slots;
    size_t homes;
    // A read, not a write prefetch: shared slots held for writing would be taken from every other
    // thread's cache (for a thread's own table either measured the same, docs/PERFORMANCE.md).
    void prefetch(uint64_t hash) const {
        bpe::prefetch(slots + ((uint64_t(check_of(hash)) * homes) >> 32) * kSlotBytes);
    }
};

// Lookups land on random slots, so a big table is on transparent huge pages (huge_pages.hpp).
using SlotBuffer = HugePageArray<WordSlot>;

// Tables are cut into partitions by the hash's top bits so that merging runs one partition per task.
constexpr unsigned kPartitionBits = 8;
constexpr size_t kPartitions = size_t(1) << kPartitionBits;

inline size_t partition_of(uint32_t check) { return check >> (32 - kPartitionBits); }

// Open addressing with linear probing, at most 80% full (70% kept tables of 734K-839K words twice as
// large for nothing faster: docs/PERFORMANCE.md). A word's home slot is its check scaled to the
// number of home slots, `check * homes / 2^32`, so slots are in hash order up to probing
// displacement at any table size: a partition is a contiguous slot range in every table, growing
// reinserts in order, and a table takes the size its words need rather than a power of two.
// Probing runs into spare slots past the last home slot instead of wrapping around (and grows the
// table in the unlikely case it runs out).
class WordTable {
public:
    WordTable() : WordTable(kInitialHomes) {}

    // Valid until the table grows.
    SlotAddresses slot_addresses() const { return {reinterpret_cast<const char*>(&slots_[0]), homes_}; }

    // Adds `occurrences` of each of `keys` (the load check runs once for the batch); a new long
    // word's bytes are copied into `arena`.
    void add_each(const WordKey* keys, size_t count, int64_t occurrences, Arena& arena) {
        while (!fits(size_ + count, homes_)) grow();
        // Members are copied to locals: slot writes could alias them (all are 64-bit integers), and
        // the compiler would reload them for every word.
        Probe probe{&slots_[0], slots_.size(), homes_, 0};
        // A pointer to the end, not a counter: the counter was kept in memory (registers run short).
        for (const WordKey* const end = keys + count; keys != end; ++keys) {
            while (!probe.try_add(*keys, occurrences, arena)) {
                size_ += std::exchange(probe.added, 0);
                grow();
                probe = Probe{&slots_[0], slots_.size(), homes_, 0};
            }
        }
        size_ += probe.added;
    }

    size_t size() const { return size_; }

    // Words counted exactly once so far (a pass over every slot).
    size_t count_once() const {
        size_t once = 0;
        for (size_t index = 0; index < slots_.size(); ++index) {
            once += size_t(!slots_[index].empty()) & size_t(slots_[index].count == 1);
        }
        return once;
    }

    // Empties the table and frees its slots (the words were copied out); long words stay valid, as
    // they live in the owner's arena.
    void release_slots() { *this = WordTable(); }

    // Grows the table at once to hold `words` words (growing step by step copies and clears every
    // intermediate size).
    void reserve(size_t words) {
        if (!fits(words, homes_)) rebuild(homes_for(words));
    }

    // reserve for a guess, rounded up to a power of two: a first chunk's prediction fell short by up
    // to a sixth (real_mix, whose languages come in turn), and growing a big table then cost a tenth
    // of a short count.
    void reserve_guess(size_t words) {
        size_t homes = kInitialHomes;
        while (homes < kMaxHomes && !fits(words, homes)) homes *= 2;
        if (homes > homes_) rebuild(homes);
    }

    // `added` more bytes of the `expected` this table will count are in: its next growth predicts
    // the words at the end (predicted_words) and aims at them instead of doubling.
    void count_bytes(size_t added, size_t expected) {
        counted_bytes_ += added;
        expected_bytes_ = expected;
    }

    // The words once the expected bytes are counted, by Heaps' law, words ~ bytes^b, where b is the
    // share of the words seen once (the vocabulary's local growth rate, docs/PERFORMANCE.md),
    // capped at 0.6. Past the expected bytes (a thread may count more than its share) the words
    // now; 0 when there is nothing to predict from, or the count went on past twice what was
    // expected. A pass over the slots.
    size_t predicted_words() const {
        const size_t counted = counted_bytes_;
        const size_t expected = expected_bytes_;
        if (size_ == 0 || counted == 0 || counted >= 2 * expected) return 0;
        if (counted >= expected) return size_;
        const double exponent = std::min(0.6, double(count_once()) / double(size_));
        const double predicted = double(size_) * std::pow(double(expected) / double(counted), exponent);
        return size_t(std::min(predicted, double(expected)));
    }

    // Appends the words whose hash is in `partition` to `out`, in table order, with no branch per
    // slot: about half the slots are empty, at random, and a branch on each mispredicts often.
    void append_partition(size_t partition, std::vector<WordSlot>& out) const {
        const size_t first = partition_start(partition);
        size_t stop = partition_start(partition + 1);
        while (stop < slots_.size() && !slots_[stop].empty()) ++stop;  // words displaced past the partition
        constexpr size_t kGroup = 64;
        size_t kept = out.size();
        for (size_t group = first; group < stop; group += kGroup) {
            const size_t group_end = std::min(group + kGroup, stop);
            out.resize(kept + (group_end - group));
            WordSlot* const to = out.data();
            for (size_t index = group; index < group_end; ++index) {
                const WordSlot& slot = slots_[index];
                to[kept] = slot;
                kept += size_t(!slot.empty()) & size_t(partition_of(slot.check) == partition);
            }
        }
        out.resize(kept);
    }

    // Calls `visit(slot)` for each word whose hash is in `partition`.
    template <typename Visit>
    void for_each_in_partition(size_t partition, Visit&& visit) const {
        // Home slots of the partition are [first, last); words displaced past `last` sit in the
        // occupied run that starts there.
        const size_t first = partition_start(partition);
        const size_t last = partition_start(partition + 1);
        for (size_t index = first; index < slots_.size(); ++index) {
            const WordSlot& slot = slots_[index];
            if (slot.empty()) {
                if (index >= last) break;
                continue;
            }
            if (partition_of(slot.check) == partition) visit(slot);
        }
    }

private:
    static constexpr size_t kInitialHomes = 16;
    static constexpr size_t kSpareSlots = 1024;
    // The slot index is taken from the 32-bit check: 2^32 home slots (128 GiB) at most.
    static constexpr size_t kMaxHomes = size_t(1) << 32;
    // Smaller tables (up to 4 MiB) double: their memory is small, and half full they probe less.
    static constexpr size_t kFittedHomes = size_t(1) << 17;

    explicit WordTable(size_t homes) : homes_(homes), slots_(homes + kSpareSlots) {}

    // One multiplication more than a shift per lookup: 0.3% more instructions, no slower.
    static size_t home_of(uint32_t check, size_t homes) { return size_t((uint64_t(check) * homes) >> 32); }
    size_t home(uint32_t check) const { return home_of(check, homes_); }

    // The first home slot of `partition`'s checks (or the end of the home slots); a partition's
    // last home slot may also be the next one's first, where `homes` is not a multiple of 256.
    size_t partition_start(size_t partition) const { return (partition * homes_) >> kPartitionBits; }

    // The load limit: `words` in `homes` home slots at most 80% full.
    static bool fits(size_t words, size_t homes) { return 10 * words <= 8 * homes; }

    // The fewest home slots that fit `words`, rounded up to a multiple of 256.
    static size_t homes_for(size_t words) {
        const size_t homes = (10 * words + 7) / 8;
        return std::min((homes + 255) & ~size_t(255), kMaxHomes);
    }

    // The table's slots as one lookup sees them.
    struct Probe {
        WordSlot* slots;
        size_t num_slots;
        size_t homes;
        size_t added;  // new words, not yet in size_

        bool try_add(const WordKey& key, int64_t count, Arena& arena) {
            for (size_t index = home_of(check_of(key.hash), homes); index < num_slots; ++index) {
                WordSlot& slot = slots[index];
                if (slot.packed[1] == key.packed[1]) {  // the same length
                    if (holds_word(slot.packed[0], slot.check, key)) {
                        slot.count += count;
                        return true;
                    }
                } else if (slot.empty()) {
                    slot.packed[0] = key.packed[0];
                    slot.packed[1] = key.packed[1];
                    if (!is_inline(key.packed[1])) {
                        slot.packed[0] = address_field(
                            arena.store(address_of(key.packed[0]), long_length(key.packed[1])));
                    }
                    slot.check = check_of(key.hash);
                    slot.count = count;
                    ++added;
                    return true;
                }
            }
            return false;
        }
    };

    // Twice the home slots; from kFittedHomes on, where the words expected at the end need fewer,
    // room for them, but at least a quarter more (a low guess then costs a few rebuilds, not many).
    // Out of line: inlined, the scanner's loop grew past what GCC inlines.
    BPE_NOINLINE void grow() {
        if (homes_ >= kMaxHomes) throw std::length_error("word table too large");
        size_t homes = std::min(2 * homes_, kMaxHomes);
        const size_t expected_words = homes_ >= kFittedHomes ? predicted_words() : 0;
        if (expected_words > 0) {
            homes = std::clamp(homes_for(expected_words), std::min(homes_ + homes_ / 4, homes), homes);
        }
        rebuild(homes);
    }

    void rebuild(size_t homes) {
        WordTable bigger(homes);
        for (size_t index = 0; index < slots_.size(); ++index) {
            const WordSlot& slot = slots_[index];
            if (!slot.empty()) bigger.insert_new(slot);
        }
        homes_ = bigger.homes_;
        slots_ = std::move(bigger.slots_);
    }

    void insert_new(const WordSlot& slot) {
        for (size_t index = home(slot.check); index < slots_.size(); ++index) {
            if (slots_[index].empty()) {
                slots_[index] = slot;
                ++size_;
                return;
            }
        }
        grow();
        insert_new(slot);
    }

    size_t homes_;  // home slots; slots_ has kSpareSlots more
    SlotBuffer slots_;
    size_t size_ = 0;
    size_t counted_bytes_ = 0;   // count_bytes, over every call
    size_t expected_bytes_ = 0;
};

// The words every thread looks up when eight or more count (ThreadCounts::words): one table of a
// fixed size, filled as the words arrive and read without locks, each word numbered in order of
// arrival. A thread counts a word found here in its own array, by the word's number, and keeps only
// the words that find no room here in its own table. Without it, each of sixteen threads' tables
// held the same 62.5K words of a TinyStories-like corpus, 1.8x one thread's peak memory; here they
// are held once, and each thread holds 4 bytes a word (its counts, 410 KiB).
// A slot is published by its last field: empty (0), claimed by a thread that is writing it, then
// the word's packed[1] (release), after which nothing in it changes. Probing never removes a word,
// so a thread that finds a slot empty and claims it is the only one to add that word.
class SharedWords {
public:
    static constexpr uint32_t kNone = UINT32_MAX;
    // 2^17 home slots (4 MiB) hold up to kLimit words: TinyStories' vocabulary fits, and an open
    // one's first words (the common ones) are its most looked-up.
    static constexpr size_t kHomes = size_t(1) << 17;
    static constexpr size_t kLimit = kHomes / 10 * 8;

    // The slots are on huge pages, as a thread's big table is: lookups at random over 4 MiB of 4 KiB
    // pages would each be a likely TLB miss (on two cores the two measured alike).
    SharedWords() : memory_(kSlots * sizeof(Slot) / sizeof(uint64_t)), slots_(reinterpret_cast<Slot*>(memory_.data())) {
        for (size_t index = 0; index < kSlots; ++index) new (&slots_[index]) Slot{};
    }
    SharedWords(const SharedWords&) = delete;
    SharedWords& operator=(const SharedWords&) = delete;

    SlotAddresses slot_addresses() const { return {reinterpret_cast<const char*>(&slots_[0]), kHomes}; }

    bool full() const { return size_.load(std::memory_order_relaxed) >= kLimit; }

    // The number of the word of `key`, added (a long word's bytes copied into `arena`) if absent
    // while there is room; kNone when absent and there is none.
    uint32_t find_or_add(const WordKey& key, Arena& arena) {
        const uint32_t check = check_of(key.hash);
        for (size_t index = home(check); index < kSlots; ++index) {
            Slot& slot = slots_[index];
            uint64_t high = published(slot);
            while (high == 0) {  // the word is not in: add it here, unless another thread is first
                if (full()) return kNone;
                if (slot.high.compare_exchange_strong(high, kClaimed, std::memory_order_acquire)) {
                    return publish(slot, key, check, arena);
                }
                high = published(slot);
            }
            if (high == key.packed[1] && holds_word(slot.low, slot.check, key)) return slot.id;
        }
        return kNone;
    }

    // Words numbered so far (numbers 0 to size() - 1).
    size_t size() const { return std::min(size_.load(std::memory_order_acquire), kLimit); }

    // Appends the words whose hash is in `partition` to `out` in slot order (about the checks'
    // order), each counted `totals[number]` times; words no thread counted are left out.
    void append_partition(size_t partition, const HugePageArray<int64_t>& totals, std::vector<WordSlot>& out) const {
        const size_t first = (partition * kHomes) >> kPartitionBits;
        const size_t last = ((partition + 1) * kHomes) >> kPartitionBits;
        for (size_t index = first; index < kSlots; ++index) {
            const Slot& slot = slots_[index];
            const uint64_t high = slot.high.load(std::memory_order_acquire);
            if (high == 0) {
                if (index >= last) break;
                continue;
            }
            if (partition_of(slot.check) != partition || totals[slot.id] == 0) continue;
            WordSlot word{};
            word.packed[0] = slot.low;
            word.packed[1] = high;
            word.check = slot.check;
            word.count = totals[slot.id];
            out.push_back(word);
        }
    }

private:
    static constexpr size_t kSlots = kHomes + 1024;  // probing runs past the last home slot
    static constexpr uint64_t kClaimed = ~uint64_t{0};  // no word's packed[1]: byte 15 would be its length

    struct alignas(32) Slot {
        std::atomic<uint64_t> high;  // packed[1] once published; 0 empty; kClaimed while written
        uint64_t low;                // packed[0] (a long word's bytes in the adding thread's arena)
        uint32_t check;
        uint32_t id;
    };
    static_assert(sizeof(Slot) == kSlotBytes, "a slot in half a cache line, where SlotAddresses looks");
    static_assert(std::is_trivially_destructible<Slot>::value, "slots are never destroyed");

    static size_t home(uint32_t check) { return size_t((uint64_t(check) * kHomes) >> 32); }

    // Fills a slot this thread has claimed with the word of `key` and its number, or gives the slot
    // back when another thread took the last number first. A slot is never left claimed: threads
    // probing past it would wait for ever (a long word's copy may run out of memory).
    uint32_t publish(Slot& slot, const WordKey& key, uint32_t check, Arena& arena) {
        uint64_t low = key.packed[0];
        if (!is_inline(key.packed[1])) {
            try {
                low = address_field(arena.store(address_of(key.packed[0]), long_length(key.packed[1])));
            } catch (...) {
                slot.high.store(0, std::memory_order_release);
                throw;
            }
        }
        const size_t id = size_.fetch_add(1, std::memory_order_relaxed);
        if (id >= kLimit) {
            size_.fetch_sub(1, std::memory_order_relaxed);
            slot.high.store(0, std::memory_order_release);
            return kNone;
        }
        slot.low = low;
        slot.check = check;
        slot.id = uint32_t(id);
        slot.high.store(key.packed[1], std::memory_order_release);
        return uint32_t(id);
    }

    // The slot's last field once no thread is writing it.
    static uint64_t published(const Slot& slot) {
        uint64_t high = slot.high.load(std::memory_order_acquire);
        while (high == kClaimed) {
            std::this_thread::yield();
            high = slot.high.load(std::memory_order_acquire);
        }
        return high;
    }

    HugePageArray<uint64_t> memory_;
    Slot* slots_;  // constructed in memory_ (trivially destructible)
    std::atomic<size_t> size_{0};
};

// One thread's counts. Each word's key is made and its slot prefetched as the scanner finds it;
// a full batch of keys waits while the next batch fills and is then looked up, so the cache misses
// of a batch overlap each other and the scanning of the next batch.
// Aligned so that two threads' hot fields never share a cache line (bits.hpp).
struct alignas(kThreadAlignment) ThreadCounts {
    static constexpr size_t kBatch = 64;  // measured against 16 to 256: docs/PERFORMANCE.md

    Arena arena;
    WordTable table;
    WordKey batches[2][kBatch];
    WordKey* filling = batches[0];
    WordKey* filling_end = batches[0] + kBatch;
    // The filling batch's next free key: a pointer, not an index (5 instructions fewer per word).
    WordKey* next = batches[0];
    WordKey* waiting = batches[1];
    uint32_t num_waiting = 0;
    const char* readable_end = nullptr;  // end of the chunk being counted
    bool table_sized = false;            // the first chunk has been counted (after_chunk)
    // Eight threads or more: the words they share, null on fewer (set by the owner), and this
    // thread's counts of them by number. Once `words` is full, a thread whose lookups miss it more
    // than 1/kMaxMissShare of a window of kMissWindow (an open vocabulary, whose words no longer
    // repeat across threads) stops looking there and counts every word in its table, as on one
    // thread: the words there too are summed with these when the tables are merged.
    static constexpr size_t kMissWindow = size_t(1) << 16;
    static constexpr size_t kMaxMissShare = 32;
    SharedWords* words = nullptr;
    SlotAddresses lookups = table.slot_addresses();  // where add() prefetches: `words`, else `table`
    // By number, 4 bytes each (half the cache an 8-byte count takes), plus 2^32 in `wrapped` each
    // time one wraps around: 410 KiB a thread at most, zeroed by calloc (often unmapped pages).
    HugePageArray<uint32_t> word_counts;
    std::vector<int64_t> wrapped;
    size_t window_lookups = 0;
    size_t window_misses = 0;

    // The batch pointers point into the object itself.
    ThreadCounts() = default;
    ThreadCounts(const ThreadCounts&) = delete;
    ThreadCounts& operator=(const ThreadCounts&) = delete;

    // Words of one and two bytes (two in five pre-tokens of English) are counted in arrays indexed
    // by their bytes: no key, hash or table lookup. fold_short_words moves them into the table.
    // A one-byte word of a block is ASCII; a two-byte one may be a single two-byte character.
    static constexpr size_t kAsciiBytes = 128;
    static constexpr size_t kByteValues = 256;
    std::unique_ptr<int64_t[]> one_byte_counts{new int64_t[kAsciiBytes]()};
    std::unique_ptr<int64_t[]> two_byte_counts{new int64_t[kByteValues * kByteValues]()};

    void add(const char* word, size_t length) {
        WordKey* const key = next;
        *key = make_key(word, length, readable_end);
        lookups.prefetch(key->hash);
        next = key + 1;
        if (key + 1 == filling_end) advance();
    }

    // The words of a block the scanner decided (for_each_pretoken_block): a set bit of `boundaries`
    // at each word's start and one past the last word; `block` holds the block's bytes, `text` is
    // where they are in the chunk.
    void add_block(const unsigned char* block, const char* text, uint64_t boundaries) {
        const uint64_t next_starts = boundaries >> 1;
        uint64_t one_byte = boundaries & next_starts;
        uint64_t two_bytes = boundaries & ~next_starts & (boundaries >> 2);
        const uint64_t last = uint64_t(1) << (63 - detail::count_leading_zeros(boundaries));
        uint64_t longer = boundaries & ~(one_byte | two_bytes | last);
        for (; one_byte != 0; one_byte &= one_byte - 1) {
            ++one_byte_counts[block[detail::count_trailing_zeros(one_byte)]];
        }
        for (; two_bytes != 0; two_bytes &= two_bytes - 1) {
            const unsigned at = detail::count_trailing_zeros(two_bytes);
            ++two_byte_counts[block[at] * kByteValues + block[at + 1]];
        }
        for (; longer != 0; longer &= longer - 1) {
            const unsigned at = detail::count_trailing_zeros(longer);
            // At least three bytes long, so its end is a set bit from at + 3 on.
            const unsigned end = at + 3 + detail::count_trailing_zeros(boundaries >> (at + 3));
            add(text + at, end - at);
        }
    }

    // Must run before the batches' long words' bytes go away (at the end of a chunk).
    void flush() {
        advance();
        advance();
    }

    // After each chunk (`counted` bytes) of the `expected` this thread will count: tells the table,
    // whose big growths then take the size of the words it predicts rather than double
    // (docs/PERFORMANCE.md). On one or two tables the first chunk's prediction is also reserved at
    // once (growing step by step copies every size on the way); its Heaps exponent was 0.45-0.65 on
    // open-vocabulary text and 0.02 on TinyStories-like text, for which a fixed 0.6 had reserved
    // eight times its words. With more tables nothing is reserved: each thread sees a small share,
    // whose first chunk overstates its words (16 threads' tables took twice the memory on OWT-like
    // text, three times on TinyStories-like). A shortfall means growing later, an excess memory.
    void after_chunk(size_t counted, size_t expected, size_t tables) {
        table.count_bytes(counted, expected);
        if (!table_sized) {
            table_sized = true;
            if (tables <= 2) table.reserve_guess(table.predicted_words());
            aim_prefetches();
        }
    }

    // This thread's count of the shared word numbered `id`.
    int64_t word_count(size_t id) const { return int64_t(word_counts[id]) + (wrapped.empty() ? 0 : wrapped[id]); }

    // Looks words up in `shared` from now on (eight threads or more).
    void share(SharedWords* shared) {
        words = shared;
        word_counts = HugePageArray<uint32_t>(SharedWords::kLimit);
        aim_prefetches();
    }

    // Moves the one- and two-byte counts into the table; before anything reads the table.
    void fold_short_words() {
        size_t short_words = 0;
        for (size_t byte = 0; byte < kAsciiBytes; ++byte) short_words += size_t(one_byte_counts[byte] != 0);
        for (size_t pair = 0; pair < kByteValues * kByteValues; ++pair) short_words += size_t(two_byte_counts[pair] != 0);
        table.reserve(table.size() + short_words);  // the size they need, not a doubling
        char word[2];
        for (size_t first = 0; first < kByteValues; ++first) {
            word[0] = char(first);
            if (first < kAsciiBytes && one_byte_counts[first] != 0) {
                const WordKey key = make_key(word, 1);
                table.add_each(&key, 1, std::exchange(one_byte_counts[first], 0), arena);
            }
            for (size_t second = 0; second < kByteValues; ++second) {
                int64_t& count = two_byte_counts[first * kByteValues + second];
                if (count == 0) continue;
                word[1] = char(second);
                const WordKey key = make_key(word, 2);
                table.add_each(&key, 1, std::exchange(count, 0), arena);
            }
        }
    }

private:
    // The batches are swapped before the lookups, so a lookup that throws (out of memory) cannot
    // leave the filling batch full.
    // Out of line (so is WordTable::grow): inlined into add_block, it pushed the scanner's loop past
    // what GCC inlines, 3% more instructions.
    BPE_NOINLINE void advance() {
        WordKey* const ready = waiting;
        const size_t num_ready = num_waiting;
        waiting = filling;
        num_waiting = uint32_t(next - filling);
        filling = ready;
        filling_end = ready + kBatch;
        next = ready;
        if (words != nullptr) {
            add_each_shared(ready, num_ready);
        } else {
            table.add_each(ready, num_ready, 1, arena);
        }
        aim_prefetches();
    }

    // `lookups` set again after the table grew or `words` was given up.
    void aim_prefetches() { lookups = words != nullptr ? words->slot_addresses() : table.slot_addresses(); }

    // One occurrence of each key: in word_counts when it is in `words` (or finds room there),
    // else in the table. The numbers are all looked up first, and their counts prefetched, so
    // that the counts' cache misses overlap (4 threads against their own tables: 1.21x the time
    // counting one word at a time, 1.11x so, 1.05x with 4-byte counts; 2 cores).
    BPE_NOINLINE void add_each_shared(const WordKey* keys, size_t count) {
        uint32_t ids[kBatch];
        size_t missed = 0;
        for (size_t index = 0; index < count; ++index) {
            const uint32_t id = words->find_or_add(keys[index], arena);
            ids[index] = id;
            if (id == SharedWords::kNone) {
                table.add_each(keys + index, 1, 1, arena);
                ++missed;
                continue;
            }
            prefetch_for_write(&word_counts[id]);
        }
        for (size_t index = 0; index < count; ++index) {
            const uint32_t id = ids[index];
            if (id == SharedWords::kNone || ++word_counts[id] != 0) continue;
            if (wrapped.empty()) wrapped.assign(word_counts.size(), 0);
            wrapped[id] += int64_t(1) << 32;
        }
        if (!words->full()) return;
        window_lookups += count;
        window_misses += missed;
        if (window_lookups >= kMissWindow) {
            if (window_misses * kMaxMissShare > window_lookups) words = nullptr;
            window_lookups = window_misses = 0;
        }
    }
};

}  // namespace word_table
}  // namespace bpe
