// Operations on whole word-count tables (CountedWords), for count files and for adding the tables of
// counting tasks on a cluster: summing tables, the count file's word order, and the count file's
// arrays (word lengths, 64-bit counts, words back to back) in and out. None depends on the order
// the counter emits words in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "count/word_counts.hpp"

namespace bpe {

// The sum of `tables`: every distinct word once, with its counts added up; words in the order they
// first appear (table by table). The inputs are not changed. Throws std::invalid_argument on a
// negative count, std::overflow_error when a sum does not fit in int64.
CountedWords add_word_counts(const std::vector<const CountedWords*>& tables);

// Which of `num_slices` (at most 2**32) slices a word belongs to: the same for every table and in
// every process of one build, and the same as WordCounter::take_slices (word_slice_of_hash).
size_t word_slice(std::string_view word, size_t num_slices);

// `words` cut into `num_slices` tables by word_slice, each keeping the order of `words`: tables
// summed slice by slice share no word, so the slices' sums are simply concatenated.
std::vector<CountedWords> split_into_slices(const CountedWords& words, size_t num_slices);

// The tables one after the other (for tables that share no word, as slices do).
CountedWords concatenate_word_counts(const std::vector<const CountedWords*>& tables);

// The same words and counts, words in ascending byte order (unsigned, shorter prefix first): the
// order of the count file.
CountedWords sorted_by_bytes(const CountedWords& words);

// The index of the first word that is not strictly greater than the word before it, or size() when
// the words are strictly ascending (so no word occurs twice).
size_t first_unordered_word(const CountedWords& words);

// The table of the count file's arrays: `num_words` uint32 lengths, as many uint64 counts (native
// byte order, any alignment), and the words' bytes back to back in `blob`. Throws std::invalid_argument when the lengths do not add up to
// `blob_size` or a count is 0, std::overflow_error when a count does not fit in int64.
CountedWords word_counts_from_arrays(const char* blob, size_t blob_size, const void* lengths,
                                   const void* counts, size_t num_words);

// The same arrays appended to `words` (tables that share no word, as slices do, so appended they are
// their sum): one copy where building each table and concatenating them takes two. Throws as
// word_counts_from_arrays; `words` then holds part of them.
void append_word_counts_from_arrays(CountedWords& words, const char* blob, size_t blob_size, const void* lengths,
                                    const void* counts, size_t num_words);

// The count file's arrays of `words`: uint32 lengths into `lengths` and uint64 counts into `counts`
// (size() entries each, any alignment; the words' bytes are `words.bytes`). Throws std::invalid_argument when a word is
// 4 GiB or longer or a count is below 1.
void word_counts_to_arrays(const CountedWords& words, void* lengths, void* counts);

}  // namespace bpe
