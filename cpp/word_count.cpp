// Counting the words of a corpus on threads: special tokens split the text (special_tokens.hpp), the
// text is cut into chunks that count independently (chunking.hpp), each thread pre-tokenizes its
// chunks (pretokenize.hpp) into its own table (word_table.hpp), and the tables are merged in a
// canonical order. About a third of the time is the pre-tokenizer and the rest the table (keys,
// lookups, cache misses, merging); the measurements are in docs/PERFORMANCE.md.
#include "word_count.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <ios>
#include <stdexcept>
#include <string>
#include <utility>

#include "chunking.hpp"
#include "count_table.hpp"  // split_into_slices
#include "mapped_file.hpp"
#include "omp_shim.hpp"
#include "pretokenize.hpp"
#include "word_table.hpp"

namespace bpe {
namespace {

using word_table::kPartitions;
using word_table::ThreadCounts;
using word_table::WordSlot;

void count_chunk(std::string_view chunk, size_t chunk_offset, const SpecialTokens& special,
                 ThreadCounts& counts, std::atomic<size_t>& first_invalid) {
    size_t invalid = kValidUtf8;
    counts.readable_end = chunk.data() + chunk.size();
    special.for_each_piece(chunk, [&](size_t begin, size_t end) {
        if (invalid != kValidUtf8) return;
        const char* const piece = chunk.data() + begin;
        const size_t bad = for_each_pretoken_block(
            piece, end - begin, chunk.size() - begin,
            [&](size_t word_begin, size_t word_end) { counts.add(piece + word_begin, word_end - word_begin); },
            [&](const unsigned char* block, size_t offset, uint64_t boundaries) {
                counts.add_block(block, piece + offset, boundaries);
            });
        if (bad != kValidUtf8) invalid = chunk_offset + begin + bad;
    });
    counts.flush();
    if (invalid == kValidUtf8) return;
    size_t current = first_invalid.load();
    while (invalid < current && !first_invalid.compare_exchange_weak(current, invalid)) {
    }
}

// Below this many words (summed over threads) a parallel merge costs more than it saves.
constexpr size_t kParallelMergeWords = size_t(1) << 16;

// The canonical word order: by hash, then by bytes (for the rare equal checks).
inline bool word_before(const WordSlot& a, const WordSlot& b) {
    if (a.check != b.check) return a.check < b.check;
    // Equal checks are nearly always the same word from two threads' tables: an inline word is then
    // the same two integers, and the byte comparison (a call) is left for the rest.
    if (a.packed[0] == b.packed[0] && a.packed[1] == b.packed[1]) return false;
    return a.view() < b.view();
}

// A table scan lists words by home slot, i.e. by the top bits of the hash, out of order only within
// runs of neighbouring slots: insertion sort puts that right in about linear time.
void sort_nearly_sorted(std::vector<WordSlot>::iterator first, std::vector<WordSlot>::iterator last) {
    for (auto current = first; current != last; ++current) {
        if (current == first || !word_before(*current, *(current - 1))) continue;
        const WordSlot moving = *current;
        auto hole = current;
        do {
            *hole = *(hole - 1);
            --hole;
        } while (hole != first && word_before(moving, *(hole - 1)));
        *hole = moving;
    }
}

WordCounts merge_counts(const std::vector<ThreadCounts>& per_thread, int threads) {
    // Per partition: each thread's words, sorted by (hash, bytes) -- an order no schedule can
    // change -- then merged run by run, adding up the counts of equal neighbours. Long words keep
    // pointing into the thread arenas, which outlive this function.
    size_t words_counted = 0;
    for (const ThreadCounts& counts : per_thread) words_counted += counts.table.size();
    if (words_counted < kParallelMergeWords) threads = 1;
    std::vector<std::vector<WordSlot>> partitions(kPartitions);
    std::vector<size_t> partition_bytes(kPartitions, 0);
    parallel_for(kPartitions, threads, [&](size_t partition) {
        std::vector<WordSlot>& words = partitions[partition];
        // Hashes spread evenly: a quarter more than a partition's share is rarely exceeded.
        words.reserve(words_counted / kPartitions + words_counted / (4 * kPartitions) + 64);
        std::vector<size_t> run_starts;
        for (const ThreadCounts& counts : per_thread) {
            run_starts.push_back(words.size());
            counts.table.append_partition(partition, words);
            sort_nearly_sorted(words.begin() + ptrdiff_t(run_starts.back()), words.end());
        }
        // Merge neighbouring runs pairwise until one is left: log2(threads) passes.
        run_starts.push_back(words.size());
        while (run_starts.size() > 2) {
            std::vector<size_t> merged{0};
            for (size_t run = 0; run + 1 < run_starts.size(); run += 2) {
                const size_t end = run_starts[std::min(run + 2, run_starts.size() - 1)];
                const auto begin = words.begin();
                std::inplace_merge(begin + ptrdiff_t(run_starts[run]), begin + ptrdiff_t(run_starts[run + 1]),
                                   begin + ptrdiff_t(end), word_before);
                merged.push_back(end);
            }
            run_starts.swap(merged);
        }
        size_t kept = 0;
        for (size_t i = 0; i < words.size(); ++i) {
            if (kept > 0 && !word_before(words[kept - 1], words[i])) {
                words[kept - 1].count += words[i].count;
            } else {
                words[kept++] = words[i];
            }
        }
        words.resize(kept);
        for (const WordSlot& word : words) partition_bytes[partition] += word.size();
    });

    // The partitions are copied out in parallel too, each to its place in the result.
    std::vector<size_t> first_word(kPartitions + 1, 0);
    std::vector<size_t> first_byte(kPartitions + 1, 0);
    for (size_t partition = 0; partition < kPartitions; ++partition) {
        first_word[partition + 1] = first_word[partition] + partitions[partition].size();
        first_byte[partition + 1] = first_byte[partition] + partition_bytes[partition];
    }
    WordCounts result;
    result.bytes.resize(first_byte[kPartitions]);
    result.offsets.resize(first_word[kPartitions] + 1);
    result.counts.resize(first_word[kPartitions]);
    parallel_for(kPartitions, threads, [&](size_t partition) {
        size_t word_index = first_word[partition];
        size_t byte_offset = first_byte[partition];
        const size_t bytes_end = first_byte[partition + 1];
        for (const WordSlot& word : partitions[partition]) {
            const size_t size = word.size();
            // An inline word is copied as its whole 16 bytes where the partition has room (the
            // next word overwrites the rest): a fixed-size copy, not a call.
            if (word_table::is_inline(word.packed[1]) && byte_offset + word_table::kPackedBytes <= bytes_end) {
                std::memcpy(&result.bytes[byte_offset], word.packed, word_table::kPackedBytes);
            } else {
                std::memcpy(&result.bytes[byte_offset], word.bytes(), size);
            }
            byte_offset += size;
            result.counts[word_index] = word.count;
            result.offsets[++word_index] = byte_offset;
        }
    });
    return result;
}

}  // namespace

namespace {

// Counts `text` into `per_thread` (one table per thread; the tables may already hold counts).
// `file`, when given, is the mapping `text` lies in, whose pages are released chunk by chunk as they
// are counted. False when the progress callback stopped it.
bool count_into(std::vector<ThreadCounts>& per_thread, std::string_view text, const SpecialTokens& special,
                const CountOptions& options, CountReport* report, const MappedFile* file) {
    const int threads = int(per_thread.size());
    const size_t chunk_bytes = options.chunk_bytes > 0 ? options.chunk_bytes
                                                       : default_chunk_bytes(text.size(), threads);
    const std::vector<size_t> boundaries = chunk_boundaries(text, special, chunk_bytes, threads);
    const size_t num_chunks = boundaries.size() - 1;

    std::vector<char> worked(per_thread.size(), 0);  // one byte per thread: no shared counter
    std::atomic<size_t> first_invalid{kValidUtf8};
    std::atomic<size_t> bytes_done{0};
    std::atomic<bool> stopped{false};
    // The calling thread is thread 0 of the team; only it reports, so the callback (Python's, behind
    // the binding) never runs on a thread of OpenMP's.
    const int reporting_thread = omp_thread_id();
    parallel_for(num_chunks, threads, [&](size_t chunk) {
        const size_t begin = boundaries[chunk];
        // A chunk past a known error cannot report a smaller offset.
        if (stopped.load(std::memory_order_relaxed) || begin >= first_invalid.load(std::memory_order_relaxed)) return;
        const size_t thread = size_t(omp_thread_id());
        worked[thread] = 1;
        const std::string_view piece = text.substr(begin, boundaries[chunk + 1] - begin);
        ThreadCounts& counts = per_thread[thread];
        count_chunk(piece, begin, special, counts, first_invalid);
        if (!counts.table_sized) counts.reserve_for(piece.size(), text.size() / size_t(threads));
        if (file != nullptr) file->release(piece.data(), piece.size());
        const size_t done = bytes_done.fetch_add(piece.size()) + piece.size();
        if (options.progress != nullptr && int(thread) == reporting_thread &&
            options.progress(options.progress_context, done)) {
            stopped.store(true, std::memory_order_relaxed);
        }
    });
    if (stopped.load()) return false;
    if (first_invalid.load() != kValidUtf8) throw InvalidUtf8Error(first_invalid.load());
    for (ThreadCounts& counts : per_thread) counts.fold_short_words();
    // The last report is the whole: the calling thread may not have counted the last chunks.
    if (options.progress != nullptr) options.progress(options.progress_context, bytes_done.load());
    if (report != nullptr) {
        report->chunks = num_chunks;
        report->threads_used = int(std::count(worked.begin(), worked.end(), char(1)));
    }
    return true;
}

int resolved_threads(const CountOptions& options) {
    return std::max(options.num_threads > 0 ? options.num_threads : omp_default_threads(), 1);
}

// Counting over `text`; `file` as for count_into.
WordCounts count_words_impl(std::string_view text, const std::vector<std::string>& special_tokens,
                            const CountOptions& options, CountReport* report, const MappedFile* file) {
    const SpecialTokens special(special_tokens);
    std::vector<ThreadCounts> per_thread(size_t(resolved_threads(options)));
    if (!count_into(per_thread, text, special, options, report, file)) return {};
    return merge_counts(per_thread, int(per_thread.size()));
}

// One table's words cut into `num_slices` by word_slice_of_hash, in table order (no sorting): two
// passes over the slots, sizes then copies.
std::vector<WordCounts> slices_in_table_order(const ThreadCounts& counts, size_t num_slices) {
    const auto for_each_word = [&](auto&& visit) {
        for (size_t partition = 0; partition < kPartitions; ++partition) {
            counts.table.for_each_in_partition(partition, visit);
        }
    };
    const auto slice_of = [num_slices](const WordSlot& slot) {
        return word_slice_of_hash(uint64_t(slot.check) << 32, num_slices);
    };
    std::vector<size_t> slice_words(num_slices, 0), slice_bytes(num_slices, 0);
    for_each_word([&](const WordSlot& slot) {
        const size_t slice = slice_of(slot);
        ++slice_words[slice];
        slice_bytes[slice] += slot.size();
    });
    // Sized exactly, then written through cursors (not appended word by word).
    struct Cursor {
        char* byte;
        uint64_t* offset;
        int64_t* count;
    };
    std::vector<WordCounts> slices(num_slices);
    std::vector<Cursor> cursors(num_slices);
    for (size_t slice = 0; slice < num_slices; ++slice) {
        WordCounts& words = slices[slice];
        words.bytes.resize(slice_bytes[slice]);
        words.offsets.resize(slice_words[slice] + 1);
        words.counts.resize(slice_words[slice]);
        cursors[slice] = {words.bytes.data(), words.offsets.data() + 1, words.counts.data()};
    }
    for_each_word([&](const WordSlot& slot) {
        const size_t slice = slice_of(slot);
        Cursor& cursor = cursors[slice];
        const size_t size = slot.size();
        std::memcpy(cursor.byte, slot.bytes(), size);
        cursor.byte += size;
        *cursor.offset = uint64_t(cursor.byte - slices[slice].bytes.data());
        ++cursor.offset;
        *cursor.count++ = slot.count;
    });
    return slices;
}

}  // namespace

WordCounts count_words_in_buffer(std::string_view text, const std::vector<std::string>& special_tokens,
                       const CountOptions& options, CountReport* report) {
    return count_words_impl(text, special_tokens, options, report, nullptr);
}

WordCounts count_words(const std::string& path, const std::vector<std::string>& special_tokens,
                               const CountOptions& options, CountReport* report) {
    const MappedFile file(path);
    return file.checked([&] { return count_words_impl(file.view(), special_tokens, options, report, &file); });
}

struct WordCounter::State {
    SpecialTokens special;
    CountOptions options;
    std::vector<ThreadCounts> per_thread;

    State(const std::vector<std::string>& special_tokens, const CountOptions& counter_options)
        : special(special_tokens), options(counter_options), per_thread(size_t(resolved_threads(counter_options))) {}
};

WordCounter::WordCounter(const std::vector<std::string>& special_tokens, const CountOptions& options)
    : state_(std::make_unique<State>(special_tokens, options)) {}

WordCounter::~WordCounter() = default;

bool WordCounter::count(std::string_view text) {
    return count_into(state_->per_thread, text, state_->special, state_->options, nullptr, nullptr);
}

bool WordCounter::count_file_range(const std::string& path, size_t begin, size_t end) {
    const MappedFile file(path);
    const std::string_view whole = file.view();
    if (begin > end || end > whole.size()) {
        throw std::ios_base::failure(path + ": bytes " + std::to_string(begin) + ".." + std::to_string(end) +
                                     " are not in the file (" + std::to_string(whole.size()) + " bytes)");
    }
    return file.checked([&] {
        return count_into(state_->per_thread, whole.substr(begin, end - begin), state_->special, state_->options,
                          nullptr, &file);
    });
}

WordCounts WordCounter::take(bool canonical_order) {
    std::vector<ThreadCounts>& per_thread = state_->per_thread;
    WordCounts result = canonical_order || per_thread.size() > 1
                            ? merge_counts(per_thread, int(per_thread.size()))
                            : std::move(slices_in_table_order(per_thread[0], 1)[0]);
    std::vector<ThreadCounts> fresh(per_thread.size());
    per_thread.swap(fresh);
    return result;
}

std::vector<WordCounts> WordCounter::take_slices(size_t num_slices) {
    if (num_slices == 0 || num_slices >= (size_t(1) << 32)) {
        throw std::invalid_argument("word counter: the number of slices must be in [1, 2**32)");
    }
    std::vector<ThreadCounts>& per_thread = state_->per_thread;
    std::vector<WordCounts> slices = per_thread.size() > 1
                                         ? split_into_slices(merge_counts(per_thread, int(per_thread.size())), num_slices)
                                         : slices_in_table_order(per_thread[0], num_slices);
    std::vector<ThreadCounts> fresh(per_thread.size());
    per_thread.swap(fresh);
    return slices;
}

uint64_t canonical_word_hash(std::string_view word, const char* readable_end) {
    return word.empty() ? 0 : word_table::make_key(word.data(), word.size(), readable_end).hash;
}

}  // namespace bpe
