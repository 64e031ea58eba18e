// Word counts: the table that counting makes, count files hold, the cluster adds up and the merge
// loop trains on. Counting (word_count), whole-table operations (count_table) and the merge loop
// (bpe_merge) all build on this header and on none of each other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace bpe {

// Words back to back: word i is bytes[offsets[i], offsets[i + 1]) and occurs counts[i] times. Named
// apart from the Python side's WordCounts (cs336_basics/word_counts.py), which may hold one of these
// through _count_cpp's NativeWordCounts.
// A word may appear more than once (its pair counts simply add up), and a word with count 0 is
// ignored; a negative count makes train_merges throw std::invalid_argument.
struct CountedWords {
    std::string bytes;
    std::vector<uint64_t> offsets{0};  // always size() + 1 entries
    std::vector<int64_t> counts;

    void add(const char* data, size_t len, int64_t count) {
        bytes.append(data, len);
        offsets.push_back(bytes.size());
        counts.push_back(count);
    }
    void reserve(size_t num_words, size_t num_bytes) {
        bytes.reserve(num_bytes);
        offsets.reserve(num_words + 1);
        counts.reserve(num_words);
    }
    size_t size() const { return counts.size(); }
};

// The hash the counter orders its words by (word_count.cpp); the same in every process of one build.
// Bytes from the word up to `readable_end` (at or past its end) may be read, which makes short words
// cheaper.
uint64_t canonical_word_hash(std::string_view word, const char* readable_end);
inline uint64_t canonical_word_hash(std::string_view word) {
    return canonical_word_hash(word, word.data() + word.size());
}

// Which of `num_slices` (below 2**32) slices a word belongs to, from the high half of its canonical
// hash: the same for every table, and slices are ranges of the counter's order.
inline size_t word_slice_of_hash(uint64_t hash, size_t num_slices) {
    return size_t(((hash >> 32) * num_slices) >> 32);
}

}  // namespace bpe
