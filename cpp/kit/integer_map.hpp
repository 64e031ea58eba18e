// An open-addressing hash table for 64-bit integer keys (pairs of token ids, left << 32 | right)
// to small values, in one array of {key, value} slots with linear probing, so a lookup is usually
// one cache line, and a bit filter that rules out most absent keys without the slots: the merge
// loop's pair ids. The other tables of the native core, and why each is shaped as it is, are
// listed in cpp/README.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "kit/bits.hpp"

namespace bpe {

// The key of a pair of token ids.
inline uint64_t pair_key(uint32_t left, uint32_t right) { return (uint64_t(left) << 32) | right; }

template <typename Value>
class IntegerMap {
public:
    // The one key that cannot be stored: it marks empty slots. Pairs of token ids below 2^31 never
    // form it.
    static constexpr uint64_t kEmptyKey = ~uint64_t{0};

    // Room for `expected` keys before the first growth.
    explicit IntegerMap(size_t expected = 0) {
        size_t capacity = 16;
        while (capacity < 2 * expected) capacity *= 2;
        resize(capacity);
    }

    // The value of `key`, or `missing` when it is absent.
    Value find(uint64_t key, Value missing) const {
        for (size_t slot = home(key);; slot = (slot + 1) & mask_) {
            if (slots_[slot].key == key) return slots_[slot].value;
            if (slots_[slot].key == kEmptyKey) return missing;
        }
    }

    // The value of `key`, inserting `value` first if the key is absent (a present key keeps its own).
    Value find_or_insert(uint64_t key, Value value) {
        size_t slot = home(key);
        for (;; slot = (slot + 1) & mask_) {
            if (slots_[slot].key == key) return slots_[slot].value;
            if (slots_[slot].key == kEmptyKey) break;
        }
        slots_[slot] = {key, value};
        mark(key);
        // Load factor at most 1/2 keeps linear-probing runs short.
        if (++size_ * 2 > slots_.size()) resize(slots_.size() * 2);
        return value;
    }

    // Room for `extra` more keys without growing, so that insert_absent_concurrently can run.
    void reserve_more(size_t extra) {
        size_t capacity = slots_.size();
        while ((size_ + extra) * 2 > capacity) capacity *= 2;
        if (capacity != slots_.size()) resize(capacity);
    }

    // find() while other threads run insert_absent_concurrently.
    Value find_concurrently(uint64_t key, Value missing) const {
        for (size_t slot = home(key);; slot = (slot + 1) & mask_) {
            const uint64_t held = __atomic_load_n(&slots_[slot].key, __ATOMIC_RELAXED);
            if (held == key) return slots_[slot].value;
            if (held == kEmptyKey) return missing;
        }
    }

    // Inserts a key known to be absent while other threads insert other absent keys (after
    // reserve_more for all of them; readers use find_concurrently): a slot is claimed by a
    // compare-and-swap of its key. Call add_inserted with the number inserted once they are done.
    void insert_absent_concurrently(uint64_t key, Value value) {
        for (size_t slot = home(key);; slot = (slot + 1) & mask_) {
            uint64_t expected = kEmptyKey;
            if (__atomic_load_n(&slots_[slot].key, __ATOMIC_RELAXED) == kEmptyKey &&
                __atomic_compare_exchange_n(&slots_[slot].key, &expected, key, false, __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED)) {
                slots_[slot].value = value;
                const FilterBit bit = filter_bit(key);
                __atomic_fetch_or(&filter_[bit.byte], bit.mask, __ATOMIC_RELAXED);
                return;
            }
        }
    }
    void add_inserted(size_t count) { size_ += count; }

    // False when `key` is surely absent, read from a filter of one byte per slot instead of the
    // slots (a sixteenth of their size, so it stays in cache where they do not): every key sets one
    // bit, and with at most half the slots used at most a sixteenth of absent keys pass. True for
    // every present key, also while other threads insert.
    bool may_contain(uint64_t key) const {
        const FilterBit bit = filter_bit(key);
        return (filter_[bit.byte] & bit.mask) != 0;
    }

    // Starts loading the slot where a lookup of `key` begins, so a lookup a little later does not wait.
    void prefetch(uint64_t key) const {
        bpe::prefetch(&slots_[home(key)]);
    }

    size_t size() const { return size_; }

private:
    struct Slot {
        uint64_t key;
        Value value;
    };

    // Fibonacci hashing (bits.hpp): the multiply spreads the key's bits (both token ids) into the high
    // bits, which pick the slot; the filter's byte is the slot's, and the next three bits pick its bit.
    size_t home(uint64_t key) const { return static_cast<size_t>(fibonacci_spread(key) >> shift_); }

    struct FilterBit {
        size_t byte;
        uint8_t mask;
    };
    FilterBit filter_bit(uint64_t key) const {
        const uint64_t hash = fibonacci_spread(key);
        return {static_cast<size_t>(hash >> shift_), static_cast<uint8_t>(1u << ((hash >> (shift_ - 3)) & 7))};
    }
    void mark(uint64_t key) {
        const FilterBit bit = filter_bit(key);
        filter_[bit.byte] |= bit.mask;
    }

    void resize(size_t capacity) {
        std::vector<Slot> old = std::move(slots_);
        slots_.assign(capacity, Slot{kEmptyKey, Value{}});
        mask_ = capacity - 1;
        shift_ = 64;
        for (size_t c = capacity; c > 1; c >>= 1) --shift_;
        filter_.assign(capacity, 0);
        for (const Slot& slot : old) {
            if (slot.key == kEmptyKey) continue;
            mark(slot.key);
            size_t index = home(slot.key);
            while (slots_[index].key != kEmptyKey) index = (index + 1) & mask_;
            slots_[index] = slot;
        }
    }

    std::vector<Slot> slots_;
    std::vector<uint8_t> filter_;  // a byte per slot (see may_contain)
    size_t mask_ = 0;
    int shift_ = 64;
    size_t size_ = 0;
};

}  // namespace bpe
