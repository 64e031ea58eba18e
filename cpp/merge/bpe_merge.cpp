// The BPE merge loop (bpe_v6 on one thread, bpe_v7 on its threads): bpe_v4's algorithm -- incremental
// pair counts, an inverted index pair -> words, a max-heap with lazy deletion -- on tables laid out
// for the cache (merge_tables.hpp), with the words of a large merge rewritten on several threads.
// The whole algorithm is run_merges below; its steps are Trainer's (trainer.hpp), defined phase by
// phase in load_words.hpp, best_pair.hpp, apply_merge.hpp and parallel_merge.hpp, all in this one
// translation unit so that they inline as they did in one file (the same machine code). See
// bpe_merge.hpp for the contract and cs336_basics/bpe_v4.py for the same algorithm in Python.

#include "merge/bpe_merge.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <vector>

#include "kit/omp_shim.hpp"
#include "merge/trainer.hpp"
// The phases, each defining its steps of Trainer.
#include "merge/load_words.hpp"
#include "merge/best_pair.hpp"
#include "merge/apply_merge.hpp"
#include "merge/parallel_merge.hpp"

namespace bpe {

namespace {

std::atomic<size_t> simulated_stalls{0};  // simulate_busy_machine
thread_local MergeThreadUse last_thread_use;

// The whole algorithm (bpe_v4's, cs336_basics/bpe_v4.py, on the tables of trainer.hpp).
// `release`: the words to free once loaded (the caller's `words`), or null.
template <typename Symbol>
std::vector<Merge> run_merges(const CountedWords& words, CountedWords* release, size_t num_merges, MergeProgress progress,
                              void* context, int num_threads, size_t prune_pairs, size_t parallel_words,
                              TieBreak tie_break, const std::vector<Merge>& replay, MergeLimits limits) {
    last_thread_use = MergeThreadUse();
    Trainer<Symbol> trainer(openmp_enabled() ? num_threads : 1, parallel_words, prune_pairs, tie_break, limits,
                            simulated_stalls.load());
#ifdef BPE_MERGE_PROFILE
    const auto started = std::chrono::steady_clock::now();
#endif
    if (replay.empty()) {
        trainer.load_words(words, num_threads);  // every word as its bytes, once
        if (release != nullptr) *release = CountedWords();
    } else {  // each word as the base encodes it (the caller's words freed once encoded), then its pairs
        trainer.load_encoded_words(words, release, replay, num_threads);
    }
#ifdef BPE_MERGE_PROFILE
    const auto loaded = std::chrono::steady_clock::now();
#endif
    if (replay.empty()) trainer.count_initial_pairs(num_threads);  // pair counts and the words holding each pair
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
    last_thread_use = trainer.thread_use();
    return merges;
}

}  // namespace

namespace {

std::vector<Merge> train(const CountedWords& words, CountedWords* release, size_t num_merges, MergeProgress progress,
                         void* context, int num_threads, size_t prune_pairs, size_t parallel_words,
                         TieBreak tie_break, const std::vector<Merge>& replay, MergeLimits limits) {
    if (static_cast<int>(tie_break) < 0 || static_cast<size_t>(tie_break) >= tie_break_names().size()) {
        throw std::invalid_argument("train_merges: unknown tie_break");
    }
    if (num_merges == 0) {
        if (release != nullptr) *release = CountedWords();
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

MergeThreadUse last_merge_thread_use() { return last_thread_use; }

size_t simulate_busy_machine(size_t stalled_merges) { return simulated_stalls.exchange(stalled_merges); }

std::vector<Merge> train_merges(const CountedWords& words, size_t num_merges, MergeProgress progress,
                                void* context, int num_threads, size_t prune_pairs, size_t parallel_words,
                                TieBreak tie_break, const std::vector<Merge>& replay, MergeLimits limits) {
    return train(words, nullptr, num_merges, progress, context, num_threads, prune_pairs, parallel_words,
                 tie_break, replay, limits);
}

std::vector<Merge> train_merges_releasing_words(CountedWords& words, size_t num_merges, MergeProgress progress,
                                                void* context, int num_threads, size_t prune_pairs,
                                                size_t parallel_words, TieBreak tie_break,
                                                const std::vector<Merge>& replay, MergeLimits limits) {
    return train(words, &words, num_merges, progress, context, num_threads, prune_pairs, parallel_words,
                 tie_break, replay, limits);
}

}  // namespace bpe
