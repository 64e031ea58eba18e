// The BPE merge loop (bpe_v6 on one thread, bpe_v7 on its threads): bpe_v4's algorithm -- incremental
// pair counts, an inverted index pair -> words, a max-heap with lazy deletion -- on tables laid out
// for the cache (merge_tables.hpp), with the words of a large merge rewritten on several threads.
// The whole algorithm is train_merges at the end of this file; see bpe_merge.hpp for the contract
// and cs336_basics/bpe_v4.py for the same algorithm in Python.
#include "merge/bpe_merge.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <stdexcept>
#include <type_traits>

#include "kit/bits.hpp"  // BPE_SSE2

#if defined(BPE_SSE2)
#include <emmintrin.h>
#endif

#include "kit/huge_pages.hpp"
#include "merge/merge_tables.hpp"
#include "kit/omp_shim.hpp"

namespace bpe {

namespace {

using namespace merge_tables;

// Fewer words than this per thread are counted on fewer threads: a team costs more than it saves.
constexpr size_t kWordsPerThread = 1 << 12;
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

// Decides, merge by merge, whether the threads rewrite the words and apply the changes: only
// merges that touch at least `min_words` words (0: every merge, for tests), and only while timing
// shows the threads no slower per word. On a busy machine a parallel merge waits for a descheduled
// thread at every join and was measured up to 30 times slower per word than one thread
// (docs/PERFORMANCE.md). Now and then a run of eligible merges takes the other path, to notice
// when the load changes: ever more rarely while the same path wins (the interval doubles, up to
// kExploreAtMost), as one thread on a large merge costs milliseconds where many cores are idle.
// Merges are timed in bands of size (min_words times 1, 4, 16, 64, 256 and more), as the fixed
// cost of the threads weighs more on small merges; a band takes one thread without exploring while
// the threads lose in a larger band. A parallel merge takes every thread. The merges do not depend on
// the choice.
class ParallelChoice {
public:
    ParallelChoice(size_t threads, size_t min_words)
        : threads_(threads),
          min_words_(min_words),
          clear_win_(std::min(kClearWin, kClearWinPerThread * double(threads))) {}

    bool parallel(size_t num_words) {
        if (threads_ <= 1) return false;
        if (min_words_ == 0) return true;
        if (num_words < min_words_) return false;
        const size_t index = band_index(num_words);
        ++eligible_;
        // Threads that lose on larger merges lose on these: no exploring (costly on a busy machine),
        // while that verdict is fresh. Merges shrink as training goes on, so a larger band may see
        // no merge again: a stale verdict kept the 1,024-4,095-word merges on one thread for good
        // (on 16 cores, 2.0 s where the threads take 1.07 s).
        for (size_t larger = index + 1; larger < kBands; ++larger) {
            if (bands_[larger].threads_lose() && eligible_ - bands_[larger].last_eligible < kFreshFor) {
                bands_[index].timing = Timing::kSkipped;
                return false;
            }
        }
        Band& band = bands_[index];
        band.last_eligible = eligible_;
        const bool threads = !band.threads_lose();
        if (band.explore_left == 0 && ++band.eligible >= band.next_exploration) {
            // A choice that changed since the last exploration starts the interval again.
            if (threads != band.threads_chosen) band.explore_interval = kExploreEvery;
            band.threads_chosen = threads;
            band.explore_interval = std::min(2 * band.explore_interval, kExploreAtMost);
            band.next_exploration = band.eligible + band.explore_interval;
            // Threads in use are timed at every merge, so a load that slows them shows without
            // exploring: one thread is timed again only once they are no longer clearly faster
            // (on 16 cores, runs of one thread on merges where the threads were 8-12 times faster
            // had cost a tenth of the merge phase).
            if (!threads || band.serial_cost < 0 || clear_win_ * band.parallel_cost > band.serial_cost) {
                band.explore_left = kExploreRun;
            }
        }
        if (band.explore_left > 0) {
            // The first merge of a run finds the words in the caches the other path left them in.
            band.timing = band.explore_left-- == kExploreRun ? Timing::kSkipped : Timing::kExplored;
            return !band.threads_chosen;
        }
        band.timing = Timing::kInUse;
        return threads;
    }

    // Seconds per word of an eligible merge, averaged over the last few merges of each path.
    void record(bool parallel, size_t num_words, double seconds) {
        if (min_words_ == 0 || num_words < min_words_ || threads_ <= 1) return;
        Band& band = bands_[band_index(num_words)];
        if (band.timing == Timing::kSkipped) return;
        double& cost = parallel ? band.parallel_cost : band.serial_cost;
        const double sample = seconds / double(num_words);
        // An explored path's cost is stale (its last samples may be hundreds of merges old), so its
        // new samples weigh more. A sample raises the cost by at most kMostRise times its weight: one
        // merge that waited on a descheduled thread (135 against 25 ns a word) had turned a band to
        // one thread for good, where merges took 81 ns a word against the threads' 54.
        if (cost < 0) {
            cost = sample;
        } else {
            cost += (std::min(sample, kMostRise * cost) - cost) / (band.timing == Timing::kExplored ? 3 : 8);
        }
    }

private:
    static constexpr size_t kExploreEvery = 16;
    static constexpr size_t kExploreAtMost = 1024;
    // Merges in a run of the other path, the first untimed: a lone merge on the other path was
    // timed in the caches the other path had left (a parallel merge's words in every core's cache,
    // a lone one thread's in one), and came out up to twice as slow as a run of it.
    static constexpr size_t kExploreRun = 4;
    static constexpr double kMostRise = 2;
    // Threads this many times faster than one are not timed against it again (below: exploring).
    // Two threads seldom reach 2x, so they count as a clear win at 1.5x: at 2x they kept exploring,
    // a large merge on one thread now and then, to learn what was known (docs/PERFORMANCE.md).
    static constexpr double kClearWin = 2;
    static constexpr double kClearWinPerThread = 0.75;
    static constexpr size_t kBands = 5;
    // A band's verdict holds for smaller merges until this many eligible merges have passed it.
    static constexpr size_t kFreshFor = 64;
    enum class Timing { kInUse, kExplored, kSkipped };
    struct Band {
        size_t eligible = 0;       // eligible merges outside exploring runs
        size_t last_eligible = 0;  // eligible_ at the band's last merge
        size_t next_exploration = kExploreEvery;
        size_t explore_interval = kExploreEvery / 2;
        size_t explore_left = 0;  // merges left in the exploring run
        // Unknown until measured: the threads first, then a run of one thread after kExploreEvery.
        double parallel_cost = -1;
        double serial_cost = -1;
        bool threads_chosen = true;  // at the last exploration
        Timing timing = Timing::kInUse;  // how the band's merge now running is timed

        bool threads_lose() const { return serial_cost >= 0 && parallel_cost > serial_cost; }
    };

    size_t band_index(size_t num_words) const {
        size_t band = 0;
        for (size_t bound = 4 * min_words_; band + 1 < kBands && num_words >= bound; bound *= 4) ++band;
        return band;
    }

    size_t threads_;
    size_t min_words_;
    double clear_win_;  // kClearWin, lower for two threads
    size_t eligible_ = 0;  // merges of min_words or more so far, in every band
    Band bands_[kBands];
};

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

// Encodes a word in place by ranked merges (Trainer::encode_words): a linked list of its symbols
// and a min-heap of its ranked pairs by (rank, position), so the leftmost occurrence of the pair
// ranked first merges next; an entry whose pair has changed since is skipped. O(n log n) in the
// word's length, a pre-token of megabytes included. Base merge k makes token 256 + k.
class WordEncoder {
public:
    template <typename Symbol>
    uint32_t encode(Symbol* symbols, uint32_t length, const PairIdMap& ranks) {
        if (length < 2) return length;
        next_.resize(length);
        previous_.resize(length);
        gone_.assign(length, 0);
        heap_.clear();
        const auto rank_of = [&](uint32_t at, uint32_t after) {
            return ranks.find(pair_key(TokenId(symbols[at]), TokenId(symbols[after])));
        };
        const auto push = [&](uint32_t at, uint32_t after) {
            const PairId rank = rank_of(at, after);
            if (rank == PairIdMap::kMissing) return;
            heap_.push_back({rank, at});
            std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
        };
        for (uint32_t at = 0; at < length; ++at) {
            next_[at] = at + 1;  // `length`: none
            previous_[at] = at - 1;  // UINT32_MAX: none
        }
        for (uint32_t at = 0; at + 1 < length; ++at) push(at, at + 1);
        while (!heap_.empty()) {
            std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
            const auto [rank, at] = heap_.back();
            heap_.pop_back();
            const uint32_t after = gone_[at] ? length : next_[at];
            if (after >= length || rank_of(at, after) != rank) continue;  // stale
            symbols[at] = Symbol(kFirstMergedToken + uint32_t(rank));
            gone_[after] = 1;
            next_[at] = next_[after];
            if (next_[at] < length) previous_[next_[at]] = at;
            if (previous_[at] != UINT32_MAX) push(previous_[at], at);
            if (next_[at] < length) push(at, next_[at]);
        }
        uint32_t written = 0;
        for (uint32_t at = 0; at < length; at = next_[at]) symbols[written++] = symbols[at];  // 0 never goes
        return written;
    }

private:
    std::vector<uint32_t> next_, previous_;
    std::vector<uint8_t> gone_;
    std::vector<std::pair<PairId, uint32_t>> heap_;
};

// The loop is bound by memory latency: every word touched and every pair changed is a cache miss in
// gigabytes of tables, so the tables are laid out for the cache and touched as little as possible.
// The steps are called in order by train_merges below; how each choice was measured is in
// docs/PERFORMANCE.md.
// Symbol: a token id as stored in the words, uint16_t when every token fits (half the memory to
// read per word visit), else uint32_t.
template <typename Symbol>
class Trainer {
public:
    Trainer(int num_threads, size_t parallel_words, size_t prune_limit, TieBreak tie_break, MergeLimits limits)
        : limits_(limits),
          tokens_(tie_break),
          workers_(size_t(std::max(1, num_threads))),
          parallel_choice_(workers_.size(), parallel_words),
          prune_limit_(prune_limit),
          prune_at_(prune_limit) {
        for (Worker& worker : workers_) worker.pool.share(&spare_blocks_);
        if (limits_.max_token_length != 0) token_lengths_.assign(256, 1);
    }

    int64_t count_of(PairId pair) const { return pairs_[pair].count; }

    // Words of one byte, or seen 0 times, hold no pair and are dropped; the rest become symbols.
    void load_words(const WordCounts& words, int num_threads) {
        const size_t num_words = words.counts.size();
        if (words.offsets.size() != num_words + 1 || words.offsets.front() != 0 ||
            words.offsets.back() != words.bytes.size()) {
            throw std::invalid_argument(
                "WordCounts: offsets must hold size() + 1 entries, from 0 to bytes.size()");
        }
        const auto kept = [&](size_t word) {
            const uint64_t begin = words.offsets[word];
            const uint64_t end = words.offsets[word + 1];
            const int64_t count = words.counts[word];
            if (end < begin) throw std::invalid_argument("WordCounts: offsets must not decrease");
            if (count < 0) throw std::invalid_argument("WordCounts: counts must not be negative");
            if (end - begin > UINT32_MAX) throw std::invalid_argument("WordCounts: a word longer than 4 GiB");
            return end - begin >= 2 && count != 0;
        };
        // Where each kept word goes, on one thread (cheap); then its symbols, on the threads.
        std::vector<size_t> sources;  // the kept words' indices in `words`
        size_t units = 0;
        for (size_t word = 0; word < num_words; ++word) {
            if (!kept(word)) continue;
            if (units > static_cast<size_t>(INT32_MAX)) break;  // too large: thrown below
            sources.push_back(word);
            word_ids_.push_back(WordId(units));
            units += word_units(uint32_t(words.offsets[word + 1] - words.offsets[word]));
        }
        if (units > static_cast<size_t>(INT32_MAX)) {
            throw std::invalid_argument("WordCounts: more than 16 GiB of distinct words");
        }
        arena_ = HugePageArray<uint64_t>(units);
        const size_t num_kept = sources.size();
        const size_t threads = size_t(std::clamp<int64_t>(num_threads, 1, int64_t(num_kept / kWordsPerThread) + 1));
        parallel_for(threads, int(threads), [&](size_t share) {
            for (size_t index = num_kept * share / threads; index < num_kept * (share + 1) / threads; ++index) {
                const size_t word = sources[index];
                const uint64_t begin = words.offsets[word];
                const auto length = uint32_t(words.offsets[word + 1] - begin);
                header(word_ids_[index]) = {words.counts[word], length, length};
                Symbol* symbols = this->symbols(word_ids_[index]);
                for (uint32_t at = 0; at < length; ++at) symbols[at] = static_cast<unsigned char>(words.bytes[begin + at]);
            }
        });
    }

    // Every pair of the unmerged words is a pair of bytes, so a table of all 65,536 replaces the
    // hash map here, and the words can be split between threads: each counts its share of the
    // words into a table of its own, then, once every list's length and each thread's offset in it
    // are known, writes its word ids into place. The pairs, their counts and lists come out the
    // same for every thread count (lists in word order).
    // Perf: what a visit of a pair touches is one 16-byte Tally, one cache line, where three
    // arrays (count, last word, listed) took three.
    void count_initial_pairs(int num_threads) {
        constexpr size_t kBytePairs = 1 << 16;
        const size_t num_words = word_ids_.size();
        const size_t threads = size_t(std::clamp<int64_t>(num_threads, 1, int64_t(num_words / kWordsPerThread) + 1));
        struct Tally {  // one byte pair in one thread's share of the words
            union {
                int64_t count;   // first pass: its occurrences times their words' counts
                WordId* cursor;  // second pass: where its next word goes in its list
            };
            WordId last_word;  // the last word that listed it: a word lists a pair once
            uint32_t listed;   // first pass: the words listing it; then this share's offset in its list
        };
        static_assert(sizeof(Tally) == 16, "a tally in one cache line");
        std::vector<std::vector<Tally>> tallies(threads);
        const auto first_word = [&](size_t share) { return num_words * share / threads; };
        parallel_for(threads, num_threads, [&](size_t share) {
            tallies[share].assign(kBytePairs, Tally{{0}, -1, 0});
            Tally* const tally = tallies[share].data();
            for_each_pair(first_word(share), first_word(share + 1),
                          [&](TokenId left, TokenId right, int64_t count, WordId word) {
                              Tally& pair = tally[size_t(left) << 8 | size_t(right)];
                              pair.count += count;
                              if (pair.last_word != word) {
                                  pair.last_word = word;
                                  ++pair.listed;
                              }
                          });
        });
        // The tallies summed over the threads, each thread a slice of the byte pairs; then the
        // pairs created in byte-pair order on one thread (at most 65,536).
        std::vector<int64_t> counts(kBytePairs);
        std::vector<uint32_t> lengths(kBytePairs);
        const auto slice = [&](size_t part) { return kBytePairs * part / threads; };
        parallel_for(threads, num_threads, [&](size_t part) {
            for (size_t byte_pair = slice(part); byte_pair < slice(part + 1); ++byte_pair) {
                int64_t count = 0;
                uint32_t listed = 0;
                for (std::vector<Tally>& share : tallies) {
                    Tally& pair = share[byte_pair];
                    count += pair.count;
                    const uint32_t offset = listed;
                    listed += pair.listed;
                    pair.listed = offset;
                }
                counts[byte_pair] = count;
                lengths[byte_pair] = listed;
            }
        });
        std::vector<WordId*> lists(kBytePairs, nullptr);
        for (size_t byte_pair = 0; byte_pair < kBytePairs; ++byte_pair) {
            if (lengths[byte_pair] == 0) continue;
            PairRecord& record = pairs_[pair_id(TokenId(byte_pair >> 8), TokenId(byte_pair & 0xFF))];
            record.count = counts[byte_pair];
            lists[byte_pair] = record.resize_words(lengths[byte_pair], workers_[0].pool);
        }
        parallel_for(threads, num_threads, [&](size_t share) {
            Tally* const tally = tallies[share].data();
            for (size_t byte_pair = 0; byte_pair < kBytePairs; ++byte_pair) {
                tally[byte_pair].cursor = lists[byte_pair] == nullptr ? nullptr : lists[byte_pair] + tally[byte_pair].listed;
                tally[byte_pair].last_word = -1;
            }
            for_each_pair(first_word(share), first_word(share + 1),
                          [&](TokenId left, TokenId right, int64_t, WordId word) {
                              Tally& pair = tally[size_t(left) << 8 | size_t(right)];
                              if (pair.last_word != word) {
                                  pair.last_word = word;
                                  *pair.cursor++ = word;
                              }
                          });
        });
    }

    // The best pair over all, tracked or not. Untracked pairs count less than the birth floor, so
    // a tracked pair at or above it is the best; below it (or with none left) recount.
    PairId pop_best() {
        for (;;) {
            const PairId best = pop_best_tracked();
            if (birth_floor_ == 1 || (best != PairIdMap::kMissing && pairs_[best].count >= birth_floor_)) {
                return best;
            }
            recount_pairs();
        }
    }

    // Each word as its encoding by a base's merges (bpe_merge.hpp, `replay`): the pair ranked first
    // merged at every occurrence from the left, until no ranked pair is left, as the tokenizer
    // encodes; the base's tokens join the token table first. Then every pair is counted from the
    // words (they are no longer pairs of bytes). Replaying the merges on the pair tables instead
    // took up to 1.5 times as long as training as many merges: no pair can be pruned while any may
    // be replayed.
    void encode_words(const std::vector<Merge>& base, int num_threads) {
        PairIdMap ranks(base.size());
        for (const Merge& merge : base) {
            if (merge.left >= tokens_.size() || merge.right >= tokens_.size()) {
                throw std::invalid_argument("train_merges: a replayed merge names a token made after it");
            }
            const auto rank = PairId(tokens_.size() - kFirstMergedToken);
            ranks.find_or_insert(pair_key(TokenId(merge.left), TokenId(merge.right)), rank);
            tokens_.add_merge(TokenId(merge.left), TokenId(merge.right));
            if (!token_lengths_.empty()) {
                token_lengths_.push_back(token_lengths_[merge.left] + token_lengths_[merge.right]);
            }
        }
        const size_t num_words = word_ids_.size();
        const size_t threads = size_t(std::clamp<int64_t>(num_threads, 1, int64_t(num_words / kWordsPerThread) + 1));
        parallel_for(threads, int(threads), [&](size_t share) {
            WordEncoder encoder;
            for (size_t index = num_words * share / threads; index < num_words * (share + 1) / threads; ++index) {
                WordHeader& info = header(word_ids_[index]);
                info.length = encoder.encode(symbols(word_ids_[index]), info.length, ranks);
            }
        });
        recount_pairs();
    }

    // The merge as its tokens' ids; its token joins the token table.
    Merge add_token(PairId pair) {
        if (tokens_.size() >= static_cast<size_t>(INT32_MAX)) {
            throw std::length_error("train_merges: more than 2^31 tokens");
        }
        const TokenId left = pairs_[pair].left;
        const TokenId right = pairs_[pair].right;
        tokens_.add_merge(left, right);
        if (!token_lengths_.empty()) token_lengths_.push_back(token_lengths_[left] + token_lengths_[right]);
        return Merge{uint32_t(left), uint32_t(right)};
    }

    // Rewrites the words that hold the pair (the newest token replaces it) and updates the counts,
    // the word lists and the heap, each changed pair once: on one thread, or on the threads for a
    // merge of many words (apply_merge_on_threads).
    void apply_merge(PairId merged) {
        const TokenId new_token = TokenId(tokens_.size() - 1);
        // The merged pair gains no word while its words are rewritten (only pairs that contain
        // new_token do), and records never move, so its list can be walked in place.
        PairRecord& merged_record = pairs_[merged];
        const size_t num_words = merged_record.num_words;
        const auto started = std::chrono::steady_clock::now();
        const bool parallel = parallel_choice_.parallel(num_words);
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
        parallel_choice_.record(parallel, num_words, took.count());
#ifdef BPE_MERGE_PROFILE
        profile_.add(parallel, num_words, took.count());
#endif
    }

#ifdef BPE_MERGE_PROFILE
    // Built with -DBPE_MERGE_PROFILE (scripts/bench_merge.cpp): where the merge phase's time went.
    // Merges are also summed by size: fewer than 256 words, then bands four times wider each.
    struct Profile {
        static constexpr size_t kSizes = 7;
        double merges[2] = {}, words[2] = {}, seconds[2] = {};
        double by_size[kSizes][2][3] = {};  // merges, words, seconds by size band and path
        double load_seconds = 0, initial_seconds = 0;
        void add(bool parallel, size_t num_words, double took) {
            merges[parallel] += 1;
            words[parallel] += double(num_words);
            seconds[parallel] += took;
            size_t size = 0;
            for (size_t bound = 256; size + 1 < kSizes && num_words >= bound; bound *= 4) ++size;
            double* band = by_size[size][parallel];
            band[0] += 1;
            band[1] += double(num_words);
            band[2] += took;
        }
        double steps[4] = {};  // a parallel merge's steps (1)-(3) as thread 0 saw them, then the heap pushes
        std::chrono::steady_clock::time_point last;
        void mark(size_t step) {
            const auto now = std::chrono::steady_clock::now();
            if (step > 0) steps[step - 1] += std::chrono::duration<double>(now - last).count();
            last = now;
        }
    } profile_;
    ~Trainer() {
        std::fprintf(stderr, "profile: load %.3f s, initial pairs %.3f s; one thread %.0f merges, %.0f words, %.3f s; "
                     "threads %.0f merges, %.0f words, %.3f s, steps", profile_.load_seconds,
                     profile_.initial_seconds, profile_.merges[0], profile_.words[0], profile_.seconds[0],
                     profile_.merges[1], profile_.words[1], profile_.seconds[1]);
        for (const double step : profile_.steps) std::fprintf(stderr, " %.3f", step);
        std::fprintf(stderr, "\n");
        for (size_t size = 0; size < Profile::kSizes; ++size) {
            std::fprintf(stderr, "  merges of %zu+ words:", size == 0 ? 0 : size_t(64) << (2 * size));
            for (const size_t path : {0, 1}) {
                const double* band = profile_.by_size[size][path];
                std::fprintf(stderr, " %s %.0f merges, %.2fM words, %.3f s (%.1f ns/word);",
                             path == 0 ? "one thread" : "threads", band[0], band[1] / 1e6, band[2],
                             band[1] > 0 ? 1e9 * band[2] / band[1] : 0.0);
            }
            std::fprintf(stderr, "\n");
        }
    }
#define BPE_PROFILE_STEP(index, step) if ((index) == 0) profile_.mark(step)
#else
#define BPE_PROFILE_STEP(index, step)
#endif

    // Prunes the pairs once too many are tracked, else compacts the heap once stale entries abound.
    void keep_tables_small() {
        if (pairs_.size() > prune_at_) {
            prune_pairs();
        } else if (heap_.size() > kCompactionFactor * heap_size_after_build_ + kCompactionSlack) {
            compact_heap();
        }
    }

private:
    // Calls visit(left, right, word count, word) for each adjacent pair of words [first, last) (in
    // load order).
    template <typename Visit>
    void for_each_pair(size_t first, size_t last, Visit&& visit) const {
        for (size_t index = first; index < last; ++index) {
            const WordId word = word_ids_[index];
            const WordHeader& info = header(word);
            const Symbol* symbols = this->symbols(word);
            for (uint32_t at = 0; at + 1 < info.length; ++at) {
                visit(TokenId(symbols[at]), TokenId(symbols[at + 1]), info.count, word);
            }
        }
    }

    PairId pair_id(TokenId left, TokenId right) {
        const PairId next_id = static_cast<PairId>(pairs_.size());
        const PairId id = pair_ids_.find_or_insert(pair_key(left, right), next_id);
        if (id == next_id) pairs_.add(left, right);
        return id;
    }

    bool ranks_below(const HeapEntry& x, const HeapEntry& y) const {
        if (x.count != y.count) return x.count < y.count;
        return pair_bytes_less(tokens_, key_left(x.key), key_right(x.key), key_left(y.key),
                               key_right(y.key));
    }

    HeapEntry entry(PairId pair) const {
        const PairRecord& record = pairs_[pair];
        return {record.count, pair_key(record.left, record.right), pair};
    }

    // max_token_length: a pair too long is counted like any other but never chosen, which merges what
    // HF merges (it never counts such a pair; the other pairs' counts are the same either way).
    bool allowed(PairId pair) const {
        if (token_lengths_.empty()) return true;
        const size_t length = size_t(token_lengths_[pairs_[pair].left]) + token_lengths_[pairs_[pair].right];
        return length == 2 || length < limits_.max_token_length;
    }

    auto heap_order() const {
        return [this](const HeapEntry& x, const HeapEntry& y) { return ranks_below(x, y); };
    }

    void push(PairId pair) {
        heap_.push_back(entry(pair));
        std::push_heap(heap_.begin(), heap_.end(), heap_order());
    }

    // Restores the heap property over all of heap_, which becomes the size compaction measures from.
    void heapify() {
        std::make_heap(heap_.begin(), heap_.end(), heap_order());
        heap_size_after_build_ = heap_.size();
    }

    // Lazy deletion: entries whose count no longer matches are dropped when they reach the top.
    // When no valid entry is left, no pair counts more than the admission bar, so the bar comes
    // down and the next band of pairs is admitted.
    PairId pop_best_tracked() {
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
    bool lower_bar() {
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
    void compact_heap() {
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
    void prune_pairs() {
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
    void recount_pairs() {
        pairs_.clear();
        spare_blocks_.clear();
        for (Worker& worker : workers_) worker.pool.reset();
        pair_ids_ = PairIdMap();
        birth_floor_ = 1;
        for_each_pair(0, word_ids_.size(), [this](TokenId left, TokenId right, int64_t count, WordId word) {
            PairRecord& record = pairs_[pair_id(left, right)];
            record.count += count;
            record.list_word(word, workers_[0].pool);
        });
        for (size_t id = 0; id < pairs_.size(); ++id) pairs_[PairId(id)].settle_words(workers_[0].pool);  // complete
        restart_heap();
    }

    void restart_heap() {
        heap_.clear();
        bar_ = INT64_MAX;
        heap_size_after_build_ = 0;
    }

    // Each changed pair's record once: its id, its count, the heap, and the words it gained (in
    // word order). A pair that gains is new (it holds new_token), born now with the most it will
    // ever count; below the birth floor it is not tracked. A pair that loses never gains in the same
    // merge, so a count that reaches 0 stays 0.
    // Perf: map slots and records are cache misses, fetched a few changes ahead.
    void apply_changes(MergeDeltas& deltas) {
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
    void lose(const MergeDeltas::Change& change, WordListPool& pool, std::vector<PairId>* contenders) {
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

    // The threads' share of a parallel merge: which thread applies a change. A change is summed at
    // its side's slot for the token beside the merged pair (MergeDeltas), so each owner takes whole
    // cache lines of those slots (16 tokens each, spread by a hash): an owner then touches 1/owners
    // of the slot arrays instead of all of them (a tenth less time in step (2) on two threads).
    static size_t owner_of(const MergeDeltas::Change& change, size_t owners) {
        const uint64_t line = uint64_t(MergeDeltas::other_token(change)) / 16 + 1;
        return size_t((((line * 0x9E3779B97F4A7C15ull) >> 32) * owners) >> 32);
    }

    // What a thread of a parallel merge found, grouped by owner (a counting sort), so that an owner
    // reads one run of each thread's changes.
    struct Routed {
        std::vector<MergeDeltas::Change> changes;  // by owner, in the order found within each
        std::vector<uint32_t> starts;  // per owner: where its run starts; one more at the end
        std::vector<uint32_t> places;  // per change as found: its place in `changes`
        std::vector<uint32_t> listed;  // per place: the words listed under the change's pair, each once
        std::vector<WordId*> targets;  // per place, in step (3): where its next word goes (null: untracked)
    };

    // What an owner works out for the changes routed to it: the threads' runs one after another.
    // The owners write here only, never into a thread's Routed, where owners' runs share cache lines.
    struct Owned {
        MergeDeltas sums;                  // the changes of the pairs it owns, summed over the threads
        std::vector<uint32_t> run_starts;  // per thread: where its run starts below
        std::vector<uint32_t> summed;      // per routed change: its index in `sums`
        std::vector<uint32_t> offsets;     // per routed change: where its words go in its pair's list
        std::vector<WordId*> targets;      // per routed change: where its first word goes (null: untracked)
        std::vector<uint32_t> listed;      // per summed change: the words listed under its pair
        std::vector<WordId*> lists;        // per summed change: its pair's word list
        std::vector<PairId> contenders;    // pairs to push on the heap
    };

    // All that one thread writes, on cache lines of its own (kThreadAlignment), in three groups:
    // what only it reads, what the owners read in step (2) and what the threads read in step (3).
    // In vectors of their own, one thread's vector ends, moved at each change it finds, had shared
    // a line with the next thread's slot arrays, read at each change.
    struct alignas(kThreadAlignment) Worker {
        WordListPool pool;  // the lists of the pairs it creates; the serial path uses thread 0's
        MergeDeltas found;  // (1) the changes of its words
        alignas(kThreadAlignment) Routed routed;  // (1) those changes by owner
        alignas(kThreadAlignment) Owned owned;    // (2) the changes it owns
    };

    // After thread `share` has rewritten its words: its changes grouped by owner, each with the
    // number of distinct words it lists; duplicate listings dropped (a word that gains a pair twice
    // lists it once; a word's listings are consecutive).
    void route(size_t share) {
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
    void list_words(size_t share) {
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
    BPE_NOINLINE void apply_merge_on_threads(PairRecord& merged_record, TokenId new_token) {
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
    void apply_owned_changes(size_t owner, std::atomic<size_t>& next_new_id) {
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

    // merge_word on the words [first, last) of a list.
    // Perf: the words are scattered over memory, and waiting for them is most of the time; the list
    // is known in advance, so fetch a few words ahead, each from its header on over kPrefetchLines
    // cache lines without reading its length (which would wait for the header).
    void rewrite_words(const WordId* first, const WordId* last, TokenId left, TokenId right, TokenId new_token,
                       MergeDeltas& deltas) {
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
    void merge_word(WordId word, TokenId left, TokenId right, TokenId new_token, MergeDeltas& deltas) {
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

    MergeLimits limits_;
    std::vector<uint64_t> token_lengths_;  // each token's bytes, kept only under max_token_length
    TokenTable tokens_;

    // Each word is a header and its symbols, back to back in one arena (one cache miss to start a
    // word, not two), padded to 8 bytes; its WordId is where it starts, in 8-byte units. A merge
    // shortens the word in place and leaves its tail unused.
    struct WordHeader {
        int64_t count;
        uint32_t length;    // symbols now
        uint32_t capacity;  // symbols at load, which sets the word's size in the arena
    };
    static_assert(sizeof(WordHeader) % sizeof(uint64_t) == 0, "symbols start on a unit");
    static size_t word_units(uint32_t capacity) {
        return (sizeof(WordHeader) + size_t(capacity) * sizeof(Symbol) + sizeof(uint64_t) - 1) / sizeof(uint64_t);
    }
    WordHeader& header(WordId word) { return *reinterpret_cast<WordHeader*>(arena_.data() + word); }
    const WordHeader& header(WordId word) const { return *reinterpret_cast<const WordHeader*>(arena_.data() + word); }
    Symbol* symbols(WordId word) { return reinterpret_cast<Symbol*>(&header(word) + 1); }
    const Symbol* symbols(WordId word) const { return reinterpret_cast<const Symbol*>(&header(word) + 1); }

    HugePageArray<uint64_t> arena_;
    std::vector<WordId> word_ids_;  // in load order

    PairIdMap pair_ids_;
    PairTable pairs_;
    WordListPool::Spares spare_blocks_;
    std::vector<Worker> workers_;  // one per thread

    std::vector<HeapEntry> heap_;
    int64_t bar_ = INT64_MAX;  // pairs counting more are in the heap; the first pop lowers it
    size_t heap_size_after_build_ = 0;
    ParallelChoice parallel_choice_;

    // Pairs born below the birth floor are not tracked (see kBirthFloorDivisor); the pairs are
    // pruned when more than prune_at_ are tracked.
    int64_t birth_floor_ = 1;
    size_t prune_limit_;
    size_t prune_at_;
};


// The whole algorithm (bpe_v4's, cs336_basics/bpe_v4.py, with the tables above).
// `release`: the words to free once loaded (the caller's `words`), or null.
template <typename Symbol>
std::vector<Merge> run_merges(const WordCounts& words, WordCounts* release, size_t num_merges, MergeProgress progress,
                              void* context, int num_threads, size_t prune_pairs, size_t parallel_words,
                              TieBreak tie_break, const std::vector<Merge>& replay, MergeLimits limits) {
    Trainer<Symbol> trainer(openmp_enabled() ? num_threads : 1, parallel_words, prune_pairs, tie_break, limits);
#ifdef BPE_MERGE_PROFILE
    const auto started = std::chrono::steady_clock::now();
#endif
    trainer.load_words(words, num_threads);    // every word as its bytes, once
    if (release != nullptr) *release = WordCounts();
#ifdef BPE_MERGE_PROFILE
    const auto loaded = std::chrono::steady_clock::now();
#endif
    if (replay.empty()) {
        trainer.count_initial_pairs(num_threads);  // pair counts and the words holding each pair
    } else {
        trainer.encode_words(replay, num_threads);  // each word as the base encodes it, then its pairs
    }
#ifdef BPE_MERGE_PROFILE
    const auto counted = std::chrono::steady_clock::now();
    trainer.profile_.load_seconds = std::chrono::duration<double>(loaded - started).count();
    trainer.profile_.initial_seconds = std::chrono::duration<double>(counted - loaded).count();
#endif
    std::vector<Merge> merges;
    merges.reserve(std::min<size_t>(num_merges, 1 << 16));
    while (merges.size() < num_merges) {
        const PairId best = trainer.pop_best();  // highest count, ties by the rule (TokenTable)
        if (best == PairIdMap::kMissing) break;  // no pair left anywhere
        if (trainer.count_of(best) < limits.min_frequency) break;  // as HF stops
        merges.push_back(trainer.add_token(best));
        trainer.apply_merge(best);               // only the words holding the pair change
        trainer.keep_tables_small();
        if (progress != nullptr && progress(context, merges.size())) break;  // asked to stop
    }
    return merges;
}

}  // namespace

namespace {

std::vector<Merge> train(const WordCounts& words, WordCounts* release, size_t num_merges, MergeProgress progress,
                         void* context, int num_threads, size_t prune_pairs, size_t parallel_words,
                         TieBreak tie_break, const std::vector<Merge>& replay, MergeLimits limits) {
    if (tie_break != TieBreak::kCs336 && tie_break != TieBreak::kSmallestId && tie_break != TieBreak::kHf) {
        throw std::invalid_argument("train_merges: unknown tie_break");
    }
    if (num_merges == 0) {
        if (release != nullptr) *release = WordCounts();
        return {};
    }
    // 256 byte tokens plus one per merge: 16-bit symbols hold them all up to 65,280 merges.
    if (replay.size() + num_merges <= (size_t(1) << 16) - 256) {
        return run_merges<uint16_t>(words, release, num_merges, progress, context, num_threads, prune_pairs,
                                    parallel_words, tie_break, replay, limits);
    }
    return run_merges<uint32_t>(words, release, num_merges, progress, context, num_threads, prune_pairs,
                                parallel_words, tie_break, replay, limits);
}

}  // namespace

std::vector<Merge> train_merges(const WordCounts& words, size_t num_merges, MergeProgress progress,
                                void* context, int num_threads, size_t prune_pairs, size_t parallel_words,
                                TieBreak tie_break, const std::vector<Merge>& replay, MergeLimits limits) {
    return train(words, nullptr, num_merges, progress, context, num_threads, prune_pairs, parallel_words,
                 tie_break, replay, limits);
}

std::vector<Merge> train_merges_releasing_words(WordCounts& words, size_t num_merges, MergeProgress progress,
                                                void* context, int num_threads, size_t prune_pairs,
                                                size_t parallel_words, TieBreak tie_break,
                                                const std::vector<Merge>& replay, MergeLimits limits) {
    return train(words, &words, num_merges, progress, context, num_threads, prune_pairs, parallel_words,
                 tie_break, replay, limits);
}

}  // namespace bpe
