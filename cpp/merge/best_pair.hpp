// Choosing the best pair: a max-heap with lazy deletion, filled from an admission bar that falls as
// counts do; pairs that can never win pruned, counted again from the words if ever needed.
// Part of bpe_merge.cpp, its only includer: an unnamed namespace, as the loop was in one file.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "merge/trainer.hpp"

namespace bpe {
namespace {

using namespace merge_tables;

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
// On a large corpus pruning more than halves the merge phase's memory (docs/PERFORMANCE.md).
constexpr int64_t kBirthFloorDivisor = 1024;

// Compact the heap (drop stale entries) when it has grown to this many times its size after the
// last compaction or admission, plus kCompactionSlack.
constexpr size_t kCompactionFactor = 2;
constexpr size_t kCompactionSlack = 1 << 16;

// The best pair over all, tracked or not. Untracked pairs count less than the birth floor, so
// a tracked pair at or above it is the best; below it (or with none left) recount.
template <typename Symbol>
inline PairId Trainer<Symbol>::pop_best() {
    for (;;) {
        const PairId best = pop_best_tracked();
        if (birth_floor_ == 1 || (best != PairIdMap::kMissing && pairs_[best].count >= birth_floor_)) {
            return best;
        }
        recount_pairs();
    }
}

// Prunes the pairs once too many are tracked, else compacts the heap once stale entries abound.
template <typename Symbol>
inline void Trainer<Symbol>::keep_tables_small() {
    if (pairs_.size() > prune_at_) {
        prune_pairs();
    } else if (heap_.size() > kCompactionFactor * heap_size_after_build_ + kCompactionSlack) {
        compact_heap();
    }
}

// Restores the heap property over all of heap_, which becomes the size compaction measures from.
template <typename Symbol>
inline void Trainer<Symbol>::heapify() {
    std::make_heap(heap_.begin(), heap_.end(), heap_order());
    heap_size_after_build_ = heap_.size();
}

// Lazy deletion: entries whose count no longer matches are dropped when they reach the top.
// When no valid entry is left, no pair counts more than the admission bar, so the bar comes
// down and the next band of pairs is admitted.
template <typename Symbol>
inline PairId Trainer<Symbol>::pop_best_tracked() {
    do {
        while (!heap_.empty()) {
            const HeapEntry top = heap_.front();
            std::pop_heap(heap_.begin(), heap_.end(), heap_order());
            heap_.pop_back();
            if (top.count > 0 && top.count == pairs_[top.pair].count && allowed(top.pair)) return top.pair;
        }
    } while (lower_bar());
    return PairIdMap::kMissing;
}

// The admission bar: every pair counting more than bar_ has a heap entry with its current
// count, so the best valid entry is the best pair. Called with no valid entry left: admits
// every pair counting at least 1/kAdmissionStep of the highest count left out. Returns false
// when no pair with a positive count is left. One scan of the pair table per call; the bar
// falls geometrically, so that is a few dozen scans per training.
template <typename Symbol>
inline bool Trainer<Symbol>::lower_bar() {
    int64_t highest_left_out = 0;
    for (size_t id = 0; id < pairs_.size(); ++id) {
        const int64_t count = pairs_[PairId(id)].count;
        if (count <= bar_ && count > highest_left_out && allowed(PairId(id))) highest_left_out = count;
    }
    if (highest_left_out == 0) return false;
    const int64_t new_bar = std::max<int64_t>(1, highest_left_out / kAdmissionStep) - 1;
    heap_.clear();
    for (size_t id = 0; id < pairs_.size(); ++id) {
        const int64_t count = pairs_[PairId(id)].count;
        if (count > new_bar && count <= bar_ && allowed(PairId(id))) heap_.push_back(entry(PairId(id)));
    }
    bar_ = new_bar;
    heapify();
    return true;
}

// Drops stale entries, so a pair whose count keeps changing cannot fill the heap.
template <typename Symbol>
inline void Trainer<Symbol>::compact_heap() {
    heap_.erase(std::remove_if(heap_.begin(), heap_.end(),
                               [this](const HeapEntry& entry) {
                                   return entry.count != pairs_[entry.pair].count;
                               }),
                heap_.end());
    heapify();
}

// Stops tracking the pairs that count less than 1/kBirthFloorDivisor of the best, which raises
// the birth floor to that: every untracked pair stays below the floor, as it only rises. Also
// drops the dead pairs, which are never erased otherwise. Pair ids change, so the heap restarts.
template <typename Symbol>
inline void Trainer<Symbol>::prune_pairs() {
    int64_t highest = 0;
    for (size_t id = 0; id < pairs_.size(); ++id) highest = std::max(highest, pairs_[PairId(id)].count);
    birth_floor_ = std::max(birth_floor_, highest / kBirthFloorDivisor);
    size_t num_kept = 0;
    for (size_t id = 0; id < pairs_.size(); ++id) num_kept += pairs_[PairId(id)].count >= birth_floor_;
    PairTable kept;
    PairIdMap kept_ids(num_kept);  // sized once, not rehashed two or three times as it fills
    for (size_t id = 0; id < pairs_.size(); ++id) {
        PairRecord& record = pairs_[PairId(id)];
        if (record.count < birth_floor_) {
            record.clear_words(workers_[0].pool);
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
template <typename Symbol>
inline void Trainer<Symbol>::recount_pairs() {
    pairs_.clear();
    spare_blocks_.clear();
    for (Worker& worker : workers_) worker.pool.reset();
    pair_ids_ = PairIdMap();
    birth_floor_ = 1;
    // Three steps an occurrence, kLag occurrences apart, in order: its id's slot loaded; its id
    // found (new ids in the order the pairs first occur, as one pass gives them) and its record
    // loaded; the record counted and the word listed. The table and the records are too large for
    // the caches, and one occurrence at a time waited for each (SuperBPE's lines: 40% of stage 2).
    constexpr size_t kLag = 8;
    struct Pending {
        uint64_t key;
        int64_t count;
        WordId word;
        PairId id;
    };
    Pending ring[2 * kLag];
    size_t seen = 0;
    const auto resolve = [&](Pending& pending) {
        pending.id = pair_id(key_left(pending.key), key_right(pending.key));
        prefetch(&pairs_[pending.id]);
    };
    const auto settle = [&](const Pending& pending) {
        PairRecord& record = pairs_[pending.id];
        record.count += pending.count;
        record.list_word(pending.word, workers_[0].pool);
    };
    for_each_pair(0, word_ids_.size(), [&](TokenId left, TokenId right, int64_t count, WordId word) {
        const uint64_t key = pair_key(left, right);
        pair_ids_.prefetch(key);
        Pending& slot = ring[seen % (2 * kLag)];
        if (seen >= 2 * kLag) settle(slot);  // the occurrence 2 * kLag before this one
        slot = {key, count, word, 0};
        if (seen >= kLag) resolve(ring[(seen - kLag) % (2 * kLag)]);
        ++seen;
    });
    for (size_t index = seen > kLag ? seen - kLag : 0; index < seen; ++index) resolve(ring[index % (2 * kLag)]);
    for (size_t index = seen > 2 * kLag ? seen - 2 * kLag : 0; index < seen; ++index) settle(ring[index % (2 * kLag)]);
    for (size_t id = 0; id < pairs_.size(); ++id) pairs_[PairId(id)].settle_words(workers_[0].pool);  // complete
    restart_heap();
}

template <typename Symbol>
inline void Trainer<Symbol>::restart_heap() {
    heap_.clear();
    bar_ = INT64_MAX;
    heap_size_after_build_ = 0;
}

}  // namespace
}  // namespace bpe
