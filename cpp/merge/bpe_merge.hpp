// The BPE merge loop (bpe_v6 on one thread, bpe_v7 on its threads after its own counting): word
// counts in, merges out. Pure C++17 with no Python dependency; cs336_basics/_merge_cpp.pyx (counts
// in a dict) and _count_cpp.pyx (counts in C++) are the bindings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "count/word_counts.hpp"

namespace bpe {

// A merge as the ids of its two tokens: 0-255 are the single bytes, 256 + k the token of merge k
// (special tokens take no id here). Ids rather than bytes: one long word makes tokens of megabytes,
// and the caller spells each token once from the ids (the merges' bytes would hold it again).
struct Merge {
    uint32_t left;
    uint32_t right;
};
constexpr uint32_t kFirstMergedToken = 256;

// Which pair wins among pairs of equal count (the rows of cs336_basics/tie_break.py):
// kCs336: the greatest (left bytes, right bytes), the assignment's rule;
// kSmallestId: the smallest (left id, right id), ids as in Merge (rustbpe);
// kHf: the smallest ids in HF tokenizers' order: the 256 byte-level characters (GPT-2's
// byte-to-unicode map) by code point, then the merges in order (BpeTrainer).
enum class TieBreak : int { kCs336 = 0, kSmallestId = 1, kHf = 2 };

// Each TieBreak's name, at its value: the binding finds a row's value here by the row's name, and a
// test compares these with the rows that say the C++ has them.
inline std::vector<std::string> tie_break_names() { return {"cs336", "smallest-id", "hf"}; }

// The limits on merging (cs336_basics/merge_limits.py; zero, false: none). HF tokenizers': training
// stops at the first best pair counting fewer than min_frequency; a pair whose token would have
// max_token_length bytes or more is never merged, unless it is two bytes (HF counts those before any
// limit applies). SuperBPE's: a pair whose token would hold more than max_words words (non-empty
// pieces between space bytes) or, under no_colon_space, the bytes ": " is never merged.
struct MergeLimits {
    int64_t min_frequency = 0;
    size_t max_token_length = 0;
    size_t max_words = 0;
    bool no_colon_space = false;
};

// Called after every merge with the number of merges done so far, so it should be cheap (the Python
// binding only takes the GIL every hundred merges). Returns true to stop (an interrupt): the merges
// so far are returned. May be null.
using MergeProgress = bool (*)(void* context, size_t merges_done);

// Up to `num_merges` merges in creation order, with the exact CS336 semantics: every word starts as
// its bytes; each step merges the pair with the highest count summed over all words (ties: the
// greatest (left bytes, right bytes), or the rule `tie_break` names) at every non-overlapping
// occurrence, left to right, within `limits`. Returns fewer merges when no pair is left. Throws
// std::invalid_argument on malformed `words`.
// `num_threads` threads (when built with OpenMP) load the words, count the initial pairs, and
// rewrite the words of a merge that touches at least `parallel_words` words and apply its count
// changes, each thread those of the pairs it owns, while that proves faster than one thread (timed
// as it runs; 0: every merge on every thread, for tests); one thread is the serial loop. Once
// more than `prune_pairs` pairs are tracked, the pairs that count too little to matter are pruned
// (see bpe_merge.cpp). The result depends on none of these.
// `replay`: a base tokenizer's merges in rank order (cs336_basics/start_from.py), their tokens
// taking ids 256, 257, ... (a merge's parts must come before it): each word starts as its encoding
// by them, as the tokenizer encodes, and the merges returned continue from there. `limits` bound
// the new merges only: the base's merges are replayed whatever their count or length.
// How the last train_merges on the calling thread used its threads (diagnostics and tests): its
// merges on the threads (counted only with `parallel_words` above 0), the times it fell back to one
// thread for every merge because its threads were not getting their cores (a busy machine), and the
// times a probe found them back.
struct MergeThreadUse {
    size_t parallel_merges = 0;
    size_t starved = 0;
    size_t resumed = 0;
};
MergeThreadUse last_merge_thread_use();

// A test hook: with `stalled_merges` above 0, every later train_merges (any thread) times its merges
// on a simulated clock on which each of its first `stalled_merges` parallel merges stalls (takes a
// millisecond more than 1.5 times one thread's time), as beside a job that holds a core, and its
// team's share of the cores is not observed; 0 (the default) times them for real. The merges are the
// same either way. Returns the previous value.
size_t simulate_busy_machine(size_t stalled_merges);

constexpr size_t kDefaultPrunePairs = size_t(1) << 18;
constexpr size_t kDefaultParallelWords = 256;
std::vector<Merge> train_merges(const CountedWords& words, size_t num_merges,
                                MergeProgress progress = nullptr, void* context = nullptr,
                                int num_threads = 1, size_t prune_pairs = kDefaultPrunePairs,
                                size_t parallel_words = kDefaultParallelWords,
                                TieBreak tie_break = TieBreak::kCs336, const std::vector<Merge>& replay = {},
                                MergeLimits limits = {});

// The same, for a caller that needs the counts no more: `words` is emptied, its memory freed, once
// the loop has loaded them, so that the loop's peak holds them no longer (a count file's size).
std::vector<Merge> train_merges_releasing_words(CountedWords& words, size_t num_merges,
                                                MergeProgress progress = nullptr, void* context = nullptr,
                                                int num_threads = 1, size_t prune_pairs = kDefaultPrunePairs,
                                                size_t parallel_words = kDefaultParallelWords,
                                                TieBreak tie_break = TieBreak::kCs336,
                                                const std::vector<Merge>& replay = {},
                                                MergeLimits limits = {});

}  // namespace bpe
