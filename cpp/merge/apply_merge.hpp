// Applying a merge on one thread: the new token, each word holding the pair rewritten in place, and
// the pair counts and word lists changed by what the words lost and gained.
// Part of bpe_merge.cpp, its only includer: an unnamed namespace, as the loop was in one file.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kit/bits.hpp"  // BPE_SSE2

#if defined(BPE_SSE2)
#include <emmintrin.h>
#endif

#include "merge/trainer.hpp"

namespace bpe {
namespace {

using namespace merge_tables;

// A merge reserves listings for a word's every symbol up to this length, checking none as it lists.
constexpr uint32_t kListingsReserved = 1 << 16;

// How many words ahead of the one being merged to prefetch (its metadata twice as far ahead).
constexpr size_t kPrefetchDistance = 8;
// How many cache lines of a word to prefetch from its header on: three hold the header and at least
// 88 16-bit symbols wherever the word starts, more than most words have.
constexpr size_t kPrefetchLines = 3;


// The first occurrence of (left, right) in symbols[from, length) as the index of its left symbol,
// or `length` if there is none. SSE2 (x86-64's baseline) compares four 32-bit or eight 16-bit
// positions at once.
template <typename Symbol>
inline uint32_t find_pair(const Symbol* symbols, uint32_t from, uint32_t length, TokenId left, TokenId right) {
    uint32_t at = from;
#if defined(BPE_SSE2)
    constexpr uint32_t kLanes = 16 / sizeof(Symbol);
    const bool narrow = sizeof(Symbol) == 2;
    const __m128i lefts = narrow ? _mm_set1_epi16(int16_t(left)) : _mm_set1_epi32(left);
    const __m128i rights = narrow ? _mm_set1_epi16(int16_t(right)) : _mm_set1_epi32(right);
    for (; at + kLanes < length; at += kLanes) {  // reads symbols[at, at + kLanes + 1)
        const __m128i here = _mm_loadu_si128(reinterpret_cast<const __m128i*>(symbols + at));
        const __m128i next = _mm_loadu_si128(reinterpret_cast<const __m128i*>(symbols + at + 1));
        const __m128i both = narrow ? _mm_and_si128(_mm_cmpeq_epi16(here, lefts), _mm_cmpeq_epi16(next, rights))
                                    : _mm_and_si128(_mm_cmpeq_epi32(here, lefts), _mm_cmpeq_epi32(next, rights));
        const int found = _mm_movemask_epi8(both);  // sizeof(Symbol) bits per position
        if (found != 0) return at + uint32_t(count_trailing_zeros(unsigned(found))) / uint32_t(sizeof(Symbol));
    }
#endif
    // The rest (most of a short word) one position at a time, both symbols in one compare.
    using TwoSymbols = std::conditional_t<sizeof(Symbol) == 2, uint32_t, uint64_t>;
    constexpr int kBits = 8 * sizeof(Symbol);
    const auto first = TwoSymbols(Symbol(left));
    const auto second = TwoSymbols(Symbol(right));
    const TwoSymbols wanted = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? first | second << kBits : second | first << kBits;
    for (; at + 1 < length; ++at) {
        TwoSymbols here;
        std::memcpy(&here, symbols + at, sizeof(here));
        if (here == wanted) return at;
    }
    return length;
}

// The merge as its tokens' ids; its token joins the token table.
template <typename Symbol>
inline Merge Trainer<Symbol>::add_token(PairId pair) {
    if (tokens_.size() >= static_cast<size_t>(INT32_MAX)) {
        throw std::length_error("train_merges: more than 2^31 tokens");
    }
    const TokenId left = pairs_[pair].left;
    const TokenId right = pairs_[pair].right;
    tokens_.add_merge(left, right);
    if (!token_lengths_.empty()) token_lengths_.push_back(token_lengths_[left] + token_lengths_[right]);
    if (!token_shapes_.empty()) token_shapes_.push_back(TokenShape::joined(token_shapes_[left], token_shapes_[right]));
    return Merge{uint32_t(left), uint32_t(right)};
}

// Rewrites the words that hold the pair (the newest token replaces it) and updates the counts,
// the word lists and the heap, each changed pair once: on one thread, or on the threads for a
// merge of many words (apply_merge_on_threads).
template <typename Symbol>
inline void Trainer<Symbol>::apply_merge(PairId merged) {
    const TokenId new_token = TokenId(tokens_.size() - 1);
    // The merged pair gains no word while its words are rewritten (only pairs that contain
    // new_token do), and records never move, so its list can be walked in place.
    PairRecord& merged_record = pairs_[merged];
    const size_t num_words = merged_record.num_words;
    const auto started = std::chrono::steady_clock::now();
    const bool parallel = parallel_choice_.parallel(num_words, clock_.now());
    if (parallel) {
        apply_merge_on_threads(merged_record, new_token);
    } else {
        MergeDeltas& deltas = workers_[0].found;
        deltas.reserve_tokens(tokens_.size());
        rewrite_words(merged_record.words(), merged_record.words() + num_words, merged_record.left,
                      merged_record.right, new_token, deltas);
        merged_record.count = 0;  // every occurrence merged, and a pair never comes back
        merged_record.clear_words(workers_[0].pool);
        apply_changes(deltas);
        deltas.clear();
    }
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
    parallel_choice_.record(parallel, num_words, clock_.took(parallel, num_words, took.count()), clock_.now());
#ifdef BPE_MERGE_PROFILE
    profile_.add(parallel, num_words, took.count());
#endif
}

// Each changed pair's record once: its id, its count, the heap, and the words it gained (in
// word order). A pair that gains is new (it holds new_token), born now with the most it will
// ever count; below the birth floor it is not tracked. A pair that loses never gains in the same
// merge, so a count that reaches 0 stays 0.
// Perf: map slots and records are cache misses, fetched a few changes ahead.
template <typename Symbol>
inline void Trainer<Symbol>::apply_changes(MergeDeltas& deltas) {
    std::vector<MergeDeltas::Change>& changes = deltas.changes();
    for (MergeDeltas::Change& change : changes) {
        if (change.delta < 0) continue;
        change.pair = change.delta >= birth_floor_ ? pair_id(key_left(change.key), key_right(change.key))
                                                   : PairIdMap::kMissing;
        if (change.pair == PairIdMap::kMissing) continue;
        pairs_[change.pair].count = change.delta;
        if (change.delta > bar_) push(change.pair);
    }
    const size_t num_changes = changes.size();
    for (size_t at = 0; at < num_changes; ++at) {
        if (at + kPrefetchDistance < num_changes) pair_ids_.prefetch(changes[at + kPrefetchDistance].key);
        if (changes[at].delta < 0) changes[at].pair = pair_ids_.find(changes[at].key);
    }
    for (size_t at = 0; at < num_changes; ++at) {
        if (at + kPrefetchDistance < num_changes && changes[at + kPrefetchDistance].delta < 0 &&
            changes[at + kPrefetchDistance].pair != PairIdMap::kMissing) {
            prefetch(&pairs_[changes[at + kPrefetchDistance].pair]);
        }
        lose(changes[at], workers_[0].pool, nullptr);
    }
    for (const MergeDeltas::Listing& listing : deltas.listings()) {
        const PairId pair = changes[listing.change].pair;
        if (pair != PairIdMap::kMissing) pairs_[pair].list_word(listing.word, workers_[0].pool);
    }
    for (const MergeDeltas::Change& change : changes) {  // the new pairs' lists are complete
        if (change.delta >= 0 && change.pair != PairIdMap::kMissing) pairs_[change.pair].settle_words(workers_[0].pool);
    }
}

// A losing change (nothing for a gaining one or an untracked pair) applied to its record: the
// pair goes on the heap if it still counts more than the bar (onto `contenders` when threads
// apply changes side by side), and a pair dead for good frees its word list.
template <typename Symbol>
inline void Trainer<Symbol>::lose(const MergeDeltas::Change& change, WordListPool& pool, std::vector<PairId>* contenders) {
    if (change.delta > 0 || change.pair == PairIdMap::kMissing) return;
    PairRecord& record = pairs_[change.pair];
    record.count += change.delta;
    if (record.count > bar_) {
        if (contenders != nullptr) {
            contenders->push_back(change.pair);
        } else {
            push(change.pair);
        }
    } else if (record.count == 0) {
        record.clear_words(pool);
    }
}

// merge_word on the words [first, last) of a list.
// Perf: the words are scattered over memory, and waiting for them is most of the time; the list
// is known in advance, so fetch a few words ahead, each from its header on over kPrefetchLines
// cache lines without reading its length (which would wait for the header).
template <typename Symbol>
inline void Trainer<Symbol>::rewrite_words(const WordId* first, const WordId* last, TokenId left, TokenId right, TokenId new_token, MergeDeltas& deltas) {
    const size_t num_words = size_t(last - first);
    for (size_t at = 0; at < num_words; ++at) {
        if (at + kPrefetchDistance < num_words) {
            const auto* ahead = reinterpret_cast<const char*>(&header(first[at + kPrefetchDistance]));
            for (size_t line = 0; line < kPrefetchLines; ++line) prefetch(ahead + 64 * line);
        }
        merge_word(first[at], left, right, new_token, deltas);
    }
}

// Rewrites one word in place and records the pair count changes around each occurrence only,
// in `deltas`. A word listed under a pair may have lost it since; it then has no occurrence and
// is skipped, which makes lazy index entries harmless.
//
// Why only neighbourhoods: an old pair (s[j], s[j+1]) changes iff j or j + 1 is inside a merged
// occurrence; a new pair changes iff it contains new_token. All other pairs map one-to-one
// between the old and new word. So a pair (x, y) of old tokens never reappears once its count
// reaches 0, and a word only ever gains pairs that contain new_token.
// Perf: one pass from the first occurrence on (the symbols before it stay put), occurrences
// found four symbols at a time (find_pair); the words are long on average (35 symbols on the
// OWT-like corpus) and a merge usually occurs once in them.
template <typename Symbol>
inline void Trainer<Symbol>::merge_word(WordId word, TokenId left, TokenId right, TokenId new_token, MergeDeltas& deltas) {
    WordHeader& info = header(word);
    Symbol* symbols = this->symbols(word);
    const uint32_t length = info.length;
    uint32_t at = find_pair(symbols, 0, length, left, right);
    if (at == length) return;
    const int64_t count = info.count;
    const uint64_t merged = pair_key(left, right);
    // A word gains at most one pair per symbol, and is listed under a pair once (a run of one
    // symbol gains (new, new) at every occurrence): room for them all, or for a long word (one
    // pre-token of megabytes) room made as listings come, not a slot per symbol up front.
    const bool long_word = length > kListingsReserved;
    deltas.reserve_listings(long_word ? kListingsReserved : length);
    uint32_t listed_before = UINT32_MAX;  // the last change listed on each side
    uint32_t listed_after = UINT32_MAX;
    const auto list = [&](uint32_t change, uint32_t& last_listed) {
        if (change == last_listed) return;
        last_listed = change;
        if (long_word) deltas.reserve_listings(1);
        deltas.list(change, word);
    };
    uint32_t written = at;  // the write position never passes the read position
    uint32_t next_unsubtracted = 0;
    while (at < length) {
        // The old pairs around this occurrence, each once: occurrences can share a neighbour
        // ("a b a b": the (b, a) between them), hence `next_unsubtracted`. Writes so far are all
        // before at - 1, so these are still the old symbols.
        const uint32_t first = std::max(next_unsubtracted, at == 0 ? 0u : at - 1);
        const uint32_t last = std::min(at + 1, length - 2);  // pair index j covers s[j], s[j + 1]
        // The merged pair's count drops to 0 (apply_merge); every other pair here is (x, left)
        // or (right, y).
        for (uint32_t j = first; j <= last; ++j) {
            const auto x = TokenId(symbols[j]);
            const auto y = TokenId(symbols[j + 1]);
            const uint64_t key = pair_key(x, y);
            if (key == merged) continue;
            if (y == left) {
                deltas.add_loss(MergeDeltas::kBeforeLeft, x, key, -count, pair_ids_);
            } else {
                deltas.add_loss(MergeDeltas::kAfterRight, y, key, -count, pair_ids_);
            }
        }
        next_unsubtracted = last + 1;
        // A gained pair counts at most what the pair it replaces counted before: each of its
        // occurrences was one of that pair's. When that pair is not tracked (its losses above
        // were dropped), it counts less than the birth floor, and so will the gained pair: the
        // gain is dropped too, as apply_changes would not track it.
        if (written > 0) {
            const auto x = TokenId(symbols[written - 1]);
            // (x, new) replaces (x, left); (new, new) replaces the (right, left) between two occurrences.
            if (!deltas.drops(MergeDeltas::kBeforeLeft, x == new_token ? right : x)) {
                list(deltas.add(MergeDeltas::kBeforeNew, x, pair_key(x, new_token), count), listed_before);
            }
        }
        symbols[written++] = Symbol(new_token);
        // Non-overlapping: "a a a" with (a, a) merges only the first two.
        const uint32_t gap = at + 2;
        at = find_pair(symbols, gap, length, left, right);
        if (gap < at) {  // old symbols up to the next occurrence (or the end) move left
            const auto y = TokenId(symbols[gap]);  // an old token: never new_token
            // (new, y) replaces (right, y), a (x, left) pair when y is left.
            const bool replaced_dropped = y == left ? deltas.drops(MergeDeltas::kBeforeLeft, right)
                                                    : deltas.drops(MergeDeltas::kAfterRight, y);
            if (!replaced_dropped) {
                list(deltas.add(MergeDeltas::kAfterNew, y, pair_key(new_token, y), count), listed_after);
            }
            std::memmove(symbols + written, symbols + gap, size_t(at - gap) * sizeof(Symbol));
            written += at - gap;
        }
    }
    info.length = written;
    // A long word's freed tail goes back to the system: the tokens of its last merges are as
    // long as the word, and would otherwise sit in memory beside it.
    if (long_word) arena_.release(symbols + written, symbols + length);
}

}  // namespace
}  // namespace bpe
