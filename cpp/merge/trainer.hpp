// The merge loop's state, and its steps in the order train_merges (bpe_merge.cpp) calls them; each
// phase's steps are defined in the file its comment names.
// Part of bpe_merge.cpp, its only includer: an unnamed namespace, as the loop was in one file.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <vector>

#include "kit/bits.hpp"
#include "kit/huge_pages.hpp"
#include "kit/omp_shim.hpp"
#include "merge/bpe_merge.hpp"
#include "merge/merge_tables.hpp"
#include "merge/parallel_choice.hpp"

namespace bpe {
namespace {

using namespace merge_tables;

// The loop is bound by memory latency: every word touched and every pair changed is a cache miss in
// gigabytes of tables, so the tables are laid out for the cache and touched as little as possible.
// The steps are called in order by run_merges (bpe_merge.cpp); how each choice was measured is in
// docs/PERFORMANCE.md.
// Symbol: a token id as stored in the words, uint16_t when every token fits (half the memory to
// read per word visit), else uint32_t.
template <typename Symbol>
class Trainer {
public:
    // simulated_stalls: 0, or the choice's clock simulated (MergeClock) for tests.
    Trainer(int num_threads, size_t parallel_words, size_t prune_limit, TieBreak tie_break, MergeLimits limits,
            size_t simulated_stalls)
        : limits_(limits),
          tokens_(tie_break),
          workers_(size_t(std::max(1, num_threads))),
          parallel_choice_(workers_.size(), parallel_words, /*glance=*/simulated_stalls == 0),
          clock_(simulated_stalls),
          prune_limit_(prune_limit),
          prune_at_(prune_limit) {
        for (Worker& worker : workers_) worker.pool.share(&spare_blocks_);
        if (limits_.max_token_length != 0) token_lengths_.assign(256, 1);
        if (limits_.max_words != 0 || limits_.no_colon_space) {
            for (int byte = 0; byte < 256; ++byte) token_shapes_.push_back(TokenShape::of_byte(uint8_t(byte)));
        }
        limited_ = !token_lengths_.empty() || !token_shapes_.empty();
    }

    int64_t count_of(PairId pair) const { return pairs_[pair].count; }
    MergeThreadUse thread_use() const {
        const ParallelChoice::Use& use = parallel_choice_.use();
        return {use.parallel_merges, use.starved, use.resumed};
    }

    // Runs `phase`, a parallel_for that keeps `team` threads busy on equal shares, and tells the
    // choice of threads what share of the cores they got (ParallelChoice::observe_team).
    template <typename Phase>
    void observed(size_t team, Phase&& phase) {
        const double cpu_before = clock_.simulated() ? -1 : process_cpu_seconds();
        const auto wall_before = std::chrono::steady_clock::now();
        phase();
        if (cpu_before < 0) return;
        const std::chrono::duration<double> wall = std::chrono::steady_clock::now() - wall_before;
        parallel_choice_.observe_team(process_cpu_seconds() - cpu_before, wall.count(), team, clock_.now());
    }

    // Building the words and their pairs (merge/load_words.hpp).
    void load_words(const CountedWords& words, int num_threads);
    void count_initial_pairs(int num_threads);
    void load_encoded_words(const CountedWords& words, CountedWords* release, const std::vector<Merge>& base,
                            int num_threads);

    // Choosing the best pair: the heap, its admission bar, pruning (merge/best_pair.hpp).
    PairId pop_best();
    void keep_tables_small();

    // Applying a merge: the new token, the words rewritten, the pair counts changed (merge/apply_merge.hpp).
    Merge add_token(PairId pair);
    void apply_merge(PairId merged);

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

    // The limits on a merged token: a pair refused is counted like any other but never chosen. Under
    // max_token_length that merges what HF merges (it never counts such a pair; the other pairs' counts
    // are the same either way); under max_words and no_colon_space it is what SuperBPE's fork does.
    bool allowed(PairId pair) const {
        if (!limited_) return true;
        const TokenId left = pairs_[pair].left;
        const TokenId right = pairs_[pair].right;
        if (!token_lengths_.empty()) {
            const size_t length = size_t(token_lengths_[left]) + token_lengths_[right];
            if (length != 2 && length >= limits_.max_token_length) return false;
        }
        if (token_shapes_.empty()) return true;
        const TokenShape token = TokenShape::joined(token_shapes_[left], token_shapes_[right]);
        if (limits_.no_colon_space && token.colon_space) return false;
        return limits_.max_words == 0 || token.words <= limits_.max_words;
    }

    auto heap_order() const {
        return [this](const HeapEntry& x, const HeapEntry& y) { return ranks_below(x, y); };
    }

    void push(PairId pair) {
        heap_.push_back(entry(pair));
        std::push_heap(heap_.begin(), heap_.end(), heap_order());
    }

    // The heap (merge/best_pair.hpp).
    void heapify();
    PairId pop_best_tracked();
    bool lower_bar();
    void compact_heap();
    void prune_pairs();
    void recount_pairs();
    void restart_heap();

    // A merge on one thread (merge/apply_merge.hpp).
    void apply_changes(MergeDeltas& deltas);
    void lose(const MergeDeltas::Change& change, WordListPool& pool, std::vector<PairId>* contenders);
    void rewrite_words(const WordId* first, const WordId* last, TokenId left, TokenId right, TokenId new_token,
                       MergeDeltas& deltas);
    void merge_word(WordId word, TokenId left, TokenId right, TokenId new_token, MergeDeltas& deltas);

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

    // A large merge on the threads (merge/parallel_merge.hpp).
    static size_t owner_of(const MergeDeltas::Change& change, size_t owners);
    void route(size_t share);
    void list_words(size_t share);
    BPE_NOINLINE void apply_merge_on_threads(PairRecord& merged_record, TokenId new_token);
    void apply_owned_changes(size_t owner, std::atomic<size_t>& next_new_id);

    MergeLimits limits_;
    std::vector<uint64_t> token_lengths_;  // each token's bytes, kept only under max_token_length
    std::vector<TokenShape> token_shapes_;  // each token's shape, kept only under max_words or no_colon_space
    bool limited_ = false;  // whether a limit on the merged token is set (else allowed reads nothing)
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
    MergeClock clock_;

    // Pairs born below the birth floor are not tracked (see kBirthFloorDivisor); the pairs are
    // pruned when more than prune_at_ are tracked.
    int64_t birth_floor_ = 1;
    size_t prune_limit_;
    size_t prune_at_;
};

}  // namespace
}  // namespace bpe
