// A large merge on the threads: each thread rewrites a share of the words, routes the changes it
// found to their owners, and each owner applies the changes of its pairs.
// Part of bpe_merge.cpp, its only includer: an unnamed namespace, as the loop was in one file.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kit/omp_shim.hpp"
#include "merge/trainer.hpp"

namespace bpe {
namespace {

using namespace merge_tables;

// The threads' share of a parallel merge: which thread applies a change. A change is summed at
// its side's slot for the token beside the merged pair (MergeDeltas), so each owner takes whole
// cache lines of those slots (16 tokens each, spread by a hash): an owner then touches 1/owners
// of the slot arrays instead of all of them (a tenth less time in step (2) on two threads).
template <typename Symbol>
inline size_t Trainer<Symbol>::owner_of(const MergeDeltas::Change& change, size_t owners) {
    const uint64_t line = uint64_t(MergeDeltas::other_token(change)) / 16 + 1;
    return size_t(((fibonacci_spread(line) >> 32) * owners) >> 32);
}

// After thread `share` has rewritten its words: its changes grouped by owner, each with the
// number of distinct words it lists; duplicate listings dropped (a word that gains a pair twice
// lists it once; a word's listings are consecutive).
template <typename Symbol>
inline void Trainer<Symbol>::route(size_t share) {
    const size_t owners = workers_.size();
    Worker& worker = workers_[share];
    Routed& routed = worker.routed;
    const std::vector<MergeDeltas::Change>& found = worker.found.changes();
    const size_t num_changes = found.size();
    routed.starts.assign(owners + 1, 0);
    routed.places.resize(num_changes);
    for (size_t index = 0; index < num_changes; ++index) {
        const auto owner = uint32_t(owner_of(found[index], owners));
        routed.places[index] = owner;  // for now
        ++routed.starts[owner + 1];
    }
    for (size_t owner = 0; owner < owners; ++owner) routed.starts[owner + 1] += routed.starts[owner];
    routed.changes.resize(num_changes);
    for (size_t index = 0; index < num_changes; ++index) {
        const uint32_t place = routed.starts[routed.places[index]]++;
        routed.places[index] = place;
        routed.changes[place] = found[index];
    }
    for (size_t owner = owners; owner > 0; --owner) routed.starts[owner] = routed.starts[owner - 1];
    routed.starts[0] = 0;
    routed.listed.assign(num_changes, 0);
    routed.targets.resize(num_changes);
    // The last word listed under each change, to drop repeats (targets as scratch).
    auto* last_word = reinterpret_cast<WordId*>(routed.targets.data());
    std::fill(last_word, last_word + num_changes, WordId(-1));
    worker.found.keep_listings([&](const MergeDeltas::Listing& listing) {
        if (last_word[listing.change] == listing.word) return false;
        last_word[listing.change] = listing.word;
        ++routed.listed[routed.places[listing.change]];
        return true;
    });
}

// Step (3) of apply_merge_on_threads for thread `share`: its words into the lists, where its
// changes' owners said.
template <typename Symbol>
inline void Trainer<Symbol>::list_words(size_t share) {
    Worker& worker = workers_[share];
    Routed& routed = worker.routed;
    for (size_t owner = 0; owner < workers_.size(); ++owner) {
        const Owned& owned = workers_[owner].owned;
        const uint32_t first = routed.starts[owner];
        std::copy_n(owned.targets.begin() + owned.run_starts[share], routed.starts[owner + 1] - first,
                    routed.targets.begin() + first);
    }
    WordId** const targets = routed.targets.data();
    const uint32_t* const places = routed.places.data();
    for (const MergeDeltas::Listing& listing : worker.found.listings()) {
        WordId*& target = targets[places[listing.change]];
        if (target != nullptr) *target++ = listing.word;
    }
    worker.found.clear();
}

// A merge of many words on every worker's thread in one team, in three steps with a barrier
// between: (1) each thread rewrites a consecutive share of the word list into its own
// MergeDeltas and routes its changes to the threads that own their pairs; (2) each owner sums
// its pairs' changes over the threads, updates the losing pairs, creates the new ones, each
// with a word list of its final length, and works out where each thread's words go (threads in
// share order, so every list is in word order, as on one thread); (3) each thread writes its
// listings into those lists. No step passes over all the changes or listings on one thread.
// New pairs take ids in blocks claimed by their owners as they come, so ids depend on timing;
// merges do not: counts are sums, and an id decides only a pair's place in the table.
template <typename Symbol>
void Trainer<Symbol>::apply_merge_on_threads(PairRecord& merged_record, TokenId new_token) {
    const TokenId left = merged_record.left;
    const TokenId right = merged_record.right;
    const WordId* const words = merged_record.words();
    const size_t num_words = merged_record.num_words;
    const size_t num_tokens = tokens_.size();
    // Every new pair is (x, new) or (new, y): room for that many in the table and the map, so
    // that owners create pairs side by side without growing either.
    const size_t most_new = 2 * num_tokens;
    pairs_.reserve(most_new);
    pair_ids_.reserve_more(most_new);
    const size_t first_new_id = pairs_.size();
    std::atomic<size_t> next_new_id{first_new_id};
    const size_t shares = workers_.size();
    parallel_phases(
        shares, int(shares),
        [&](size_t share) {  // (1) rewrite and route
            BPE_PROFILE_STEP(share, 0);
            MergeDeltas& found = workers_[share].found;
            found.reserve_tokens(num_tokens);
            rewrite_words(words + num_words * share / shares, words + num_words * (share + 1) / shares, left,
                          right, new_token, found);
            route(share);
        },
        [&](size_t owner) {  // (2) sum, update the losing pairs, create the new ones
            BPE_PROFILE_STEP(owner, 1);
            apply_owned_changes(owner, next_new_id);
        },
        [&](size_t share) {  // (3) each thread's words into the lists
            BPE_PROFILE_STEP(share, 2);
            list_words(share);
        });
    BPE_PROFILE_STEP(0, 3);
    const size_t born = next_new_id.load() - first_new_id;
    pairs_.grow_to(first_new_id + born);
    pair_ids_.add_inserted(born);
    merged_record.count = 0;  // every occurrence merged, and a pair never comes back
    merged_record.clear_words(workers_[0].pool);
    for (Worker& worker : workers_) {
        for (const PairId pair : worker.owned.contenders) push(pair);
        worker.owned.contenders.clear();
    }
    BPE_PROFILE_STEP(0, 4);
}

// Step (2) of apply_merge_on_threads for the pairs `owner` owns. Other owners insert new pairs
// into the map meanwhile, so lookups read its keys atomically (a losing pair is found where it
// was; inserts only fill empty slots).
template <typename Symbol>
inline void Trainer<Symbol>::apply_owned_changes(size_t owner, std::atomic<size_t>& next_new_id) {
    Owned& owned = workers_[owner].owned;
    WordListPool& pool = workers_[owner].pool;
    MergeDeltas& sums = owned.sums;
    sums.reserve_tokens(tokens_.size());
    owned.run_starts.clear();
    owned.summed.clear();
    owned.offsets.clear();
    std::vector<uint32_t>& listed = owned.listed;
    for (const Worker& worker : workers_) {
        const Routed& routed = worker.routed;
        owned.run_starts.push_back(uint32_t(owned.summed.size()));
        for (uint32_t place = routed.starts[owner]; place < routed.starts[owner + 1]; ++place) {
            const uint32_t sum = sums.add(routed.changes[place]);
            if (sum >= listed.size()) listed.resize(std::max<size_t>(2 * listed.size(), sum + 1), 0);
            owned.summed.push_back(sum);
            owned.offsets.push_back(listed[sum]);
            listed[sum] += routed.listed[place];
        }
    }
    std::vector<MergeDeltas::Change>& changes = sums.changes();
    const size_t num_changes = changes.size();
    size_t born = 0;
    for (size_t index = 0; index < num_changes; ++index) {
        if (index + kPrefetchDistance < num_changes) pair_ids_.prefetch(changes[index + kPrefetchDistance].key);
        MergeDeltas::Change& change = changes[index];
        if (change.delta < 0) {
            change.pair = pair_ids_.find_concurrently(change.key);
        } else {
            change.pair = change.delta >= birth_floor_ ? PairId(born++) : PairIdMap::kMissing;
        }
    }
    const auto first_id = PairId(next_new_id.fetch_add(born));
    std::vector<WordId*>& lists = owned.lists;
    if (lists.size() < num_changes) lists.resize(std::max(2 * lists.size(), num_changes));
    for (size_t index = 0; index < num_changes; ++index) {
        if (index + kPrefetchDistance < num_changes && changes[index + kPrefetchDistance].delta < 0 &&
            changes[index + kPrefetchDistance].pair != PairIdMap::kMissing) {
            prefetch(&pairs_[changes[index + kPrefetchDistance].pair]);
        }
        MergeDeltas::Change& change = changes[index];
        lists[index] = nullptr;
        if (change.delta < 0) {
            lose(change, pool, &owned.contenders);
            continue;
        }
        if (change.pair == PairIdMap::kMissing) continue;
        change.pair += first_id;
        PairRecord& record = pairs_[change.pair];
        record.count = change.delta;
        record.left = key_left(change.key);
        record.right = key_right(change.key);
        record.num_words = 0;
        lists[index] = record.resize_words(listed[index], pool);
        pair_ids_.insert_new_concurrently(change.key, change.pair);
        if (change.delta > bar_) owned.contenders.push_back(change.pair);
    }
    owned.targets.resize(owned.summed.size());
    for (size_t routed = 0; routed < owned.summed.size(); ++routed) {
        WordId* const list = lists[owned.summed[routed]];
        owned.targets[routed] = list == nullptr ? nullptr : list + owned.offsets[routed];
    }
    std::fill(listed.begin(), listed.begin() + std::min(listed.size(), num_changes), 0u);
    sums.clear();
}

}  // namespace
}  // namespace bpe
