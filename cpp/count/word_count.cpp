// Counting the words of a corpus on threads: special tokens split the text (special_tokens.hpp), the
// text is cut into chunks that count independently (chunking.hpp), each thread pre-tokenizes its
// chunks (pretokenize.hpp) into its own table (word_table.hpp; on eight threads or more, into its
// counts of the words all threads share first), and the tables are merged in a canonical order.
// About a third of the time is the pre-tokenizer and the rest the table (keys, lookups, cache
// misses, merging); the measurements are in docs/PERFORMANCE.md.
#include "count/word_count.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <ios>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "scan/chunking.hpp"
#include "count/count_table.hpp"  // split_into_slices
#include "kit/huge_pages.hpp"
#include "io/mapped_file.hpp"
#include "kit/omp_shim.hpp"
#include "scan/pretokenize.hpp"
#include "count/word_table.hpp"

namespace bpe {
namespace {

using word_table::kPartitions;
using word_table::SharedWords;
using word_table::ThreadCounts;
using word_table::WordSlot;

// From this many threads on they look words up in a table they share (SharedWords). With fewer,
// their own tables take little more memory than one and their lookups were faster: sharing cost 1.16x
// the time on two threads and 1.05x on four, 0.94x on sixteen (TinyStories-like, two cores).
constexpr size_t kSharingThreads = 8;

// The threads' tables, and from kSharingThreads threads on the words they share.
struct Tables {
    std::vector<ThreadCounts> per_thread;  // never resized: the tables do not move
    std::unique_ptr<SharedWords> shared;

    explicit Tables(size_t threads) : per_thread(threads) {
        if (threads < kSharingThreads) return;
        shared = std::make_unique<SharedWords>();
        for (ThreadCounts& counts : per_thread) counts.share(shared.get());
    }
};

// Counts the words of `text` split on the special tokens, where bytes up to counts.readable_end may be
// read; kValidUtf8, or the offset of the first invalid byte in `text`. The caller flushes `counts`.
// `by_lines`: each line (up to and with its '\n') is pre-tokenized alone, as HF's train(files) reads.
size_t count_pieces(std::string_view text, const SpecialTokens& special, PretokenPattern pattern,
                    const unicode_tables::Table& unicode, ThreadCounts& counts, bool by_lines = false) {
    size_t invalid = kValidUtf8;
    const auto count_text = [&](size_t begin, size_t end) {
        if (invalid != kValidUtf8) return;
        const char* const piece = text.data() + begin;
        const size_t bad = for_each_pretoken_block_of(
            pattern, piece, end - begin, size_t(counts.readable_end - piece),
            [&](size_t word_begin, size_t word_end) { counts.add(piece + word_begin, word_end - word_begin); },
            [&](const unsigned char* block, size_t offset, uint64_t boundaries) {
                counts.add_block(block, piece + offset, boundaries);
            },
            unicode);
        if (bad != kValidUtf8) invalid = begin + bad;
    };
    special.for_each_piece(text, [&](size_t begin, size_t end) {
        if (!by_lines) return count_text(begin, end);
        while (begin < end) {
            const void* newline = std::memchr(text.data() + begin, '\n', end - begin);
            const size_t line_end = newline == nullptr ? end : size_t(static_cast<const char*>(newline) - text.data()) + 1;
            count_text(begin, line_end);
            begin = line_end;
        }
    });
    return invalid;
}

void note_invalid(size_t invalid, std::atomic<size_t>& first_invalid) {
    size_t current = first_invalid.load();
    while (invalid < current && !first_invalid.compare_exchange_weak(current, invalid)) {
    }
}

void count_chunk(std::string_view chunk, size_t chunk_offset, const SpecialTokens& special, PretokenPattern pattern,
                 const unicode_tables::Table& unicode, ThreadCounts& counts, std::atomic<size_t>& first_invalid,
                 bool by_lines = false) {
    counts.readable_end = chunk.data() + chunk.size();
    const size_t invalid = count_pieces(chunk, special, pattern, unicode, counts, by_lines);
    counts.flush();
    if (invalid != kValidUtf8) note_invalid(chunk_offset + invalid, first_invalid);
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

// The shared words' counts, summed over the threads, by number.
HugePageArray<int64_t> shared_totals(const Tables& tables, int threads) {
    HugePageArray<int64_t> totals(tables.shared->size());
    constexpr size_t kRange = size_t(1) << 12;
    parallel_for((totals.size() + kRange - 1) / kRange, threads, [&](size_t range) {
        const size_t first = range * kRange;
        const size_t last = std::min(first + kRange, totals.size());
        for (const ThreadCounts& counts : tables.per_thread) {
            for (size_t id = first; id < last; ++id) totals[id] += counts.word_count(id);
        }
    });
    return totals;
}

CountedWords merge_counts(Tables& tables, int threads) {
    // Per partition: each thread's words and the shared ones, sorted by (hash, bytes) -- an order
    // no schedule can change -- then merged run by run, adding up the counts of equal neighbours.
    // Long words keep pointing into the thread arenas, which outlive this function; the tables'
    // slots are freed once copied, before the result is built (on 16 threads they hold several
    // times its words).
    const std::vector<ThreadCounts>& per_thread = tables.per_thread;
    const HugePageArray<int64_t> totals = tables.shared != nullptr ? shared_totals(tables, threads) : HugePageArray<int64_t>();
    size_t words_counted = totals.size();
    for (const ThreadCounts& counts : per_thread) words_counted += counts.table.size();
    if (words_counted < kParallelMergeWords) threads = 1;
    std::vector<std::vector<WordSlot>> partitions(kPartitions);
    std::vector<size_t> partition_bytes(kPartitions, 0);
    parallel_for(kPartitions, threads, [&](size_t partition) {
        std::vector<WordSlot>& words = partitions[partition];
        // Hashes spread evenly: a quarter more than a partition's share is rarely exceeded.
        words.reserve(words_counted / kPartitions + words_counted / (4 * kPartitions) + 64);
        std::vector<size_t> run_starts;
        const size_t runs = per_thread.size() + (tables.shared != nullptr ? 1 : 0);
        for (size_t run = 0; run < runs; ++run) {  // the threads' tables, then the shared words
            run_starts.push_back(words.size());
            if (run < per_thread.size()) {
                per_thread[run].table.append_partition(partition, words);
            } else {
                tables.shared->append_partition(partition, totals, words);
            }
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
        words.shrink_to_fit();  // held until the result is built: every partition's threads' copies
        // Summed here, stored once: neighbouring partitions' totals share a cache line, and their
        // threads run side by side.
        size_t bytes = 0;
        for (const WordSlot& word : words) bytes += word.size();
        partition_bytes[partition] = bytes;
    });

    for (ThreadCounts& counts : tables.per_thread) counts.table.release_slots();

    // The partitions are copied out in parallel too, each to its place in the result.
    std::vector<size_t> first_word(kPartitions + 1, 0);
    std::vector<size_t> first_byte(kPartitions + 1, 0);
    for (size_t partition = 0; partition < kPartitions; ++partition) {
        first_word[partition + 1] = first_word[partition] + partitions[partition].size();
        first_byte[partition + 1] = first_byte[partition] + partition_bytes[partition];
    }
    CountedWords result;
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

// The chunk size for one piece of a stream (WordCounter): several chunks per thread from 256 KiB up, so
// that a block of a few MiB keeps every thread busy to the end of its parallel region.
size_t piece_chunk_bytes(size_t text_size, int threads) {
    const size_t per_chunk = text_size / (size_t(std::max(threads, 1)) * 8) + 1;
    return std::clamp<size_t>(per_chunk, size_t(256) << 10, size_t(64) << 20);
}

void fold_all(std::vector<ThreadCounts>& per_thread) {
    for (ThreadCounts& counts : per_thread) counts.fold_short_words();
}

// Counts `text` into `per_thread` (one table per thread; the tables may already hold counts).
// `file`, when given, is the mapping `text` lies in, whose pages are released chunk by chunk as they
// are counted. False when the progress callback stopped it.
bool count_into(Tables& tables, std::string_view text, const SpecialTokens& special, const CountOptions& options,
                CountStats* stats, const MappedFile* file, bool fold = true) {
    std::vector<ThreadCounts>& per_thread = tables.per_thread;
    const int threads = int(per_thread.size());
    const size_t chunk_bytes = options.chunk_bytes > 0 ? options.chunk_bytes
                               : fold               ? default_chunk_bytes(text.size(), threads)
                                                    : piece_chunk_bytes(text.size(), threads);
    const std::vector<size_t> boundaries = chunk_boundaries(text, special, chunk_bytes, threads, file, options.pattern);
    const unicode_tables::Table& unicode = unicode_table(options.unicode_table);  // throws here, not in a thread
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
        count_chunk(piece, begin, special, options.pattern, unicode, counts, first_invalid, options.by_lines);
        counts.after_chunk(piece.size(), std::max(text.size(), options.expected_bytes) / size_t(threads),
                           per_thread.size());
        if (file != nullptr) file->release(piece.data(), piece.size());
        const size_t done = bytes_done.fetch_add(piece.size()) + piece.size();
        if (options.progress != nullptr && int(thread) == reporting_thread &&
            options.progress(options.progress_context, done)) {
            stopped.store(true, std::memory_order_relaxed);
        }
    });
    if (stopped.load()) return false;
    if (first_invalid.load() != kValidUtf8) throw InvalidUtf8Error(first_invalid.load());
    if (fold) fold_all(per_thread);
    // The last progress call is the whole: the calling thread may not have counted the last chunks.
    if (options.progress != nullptr) options.progress(options.progress_context, bytes_done.load());
    if (stats != nullptr) {
        stats->chunks = num_chunks;
        stats->threads_used = int(std::count(worked.begin(), worked.end(), char(1)));
    }
    return true;
}

int resolved_threads(const CountOptions& options) {
    return std::max(options.num_threads > 0 ? options.num_threads : omp_default_threads(), 1);
}

// Gives what the tables freed back to the system. glibc keeps what worker threads free in heaps of
// their own (arenas), which what runs next may never reuse: OWT-like 2 GB on 16 threads left 100 MB
// in seven arenas, and the merge phase that followed peaked at 764 MB instead of 694.
void return_freed_memory() {
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
}

// Replaces the tables by empty ones and gives what they held back to the system.
void start_over(Tables& tables) {
    {
        Tables used(tables.per_thread.size());
        std::swap(tables, used);
    }
    return_freed_memory();
}

// Counting over `text`; `file` as for count_into.
CountedWords count_words_impl(std::string_view text, const std::vector<std::string>& special_tokens,
                            const CountOptions& options, CountStats* stats, const MappedFile* file) {
    const SpecialTokens special(special_tokens);
    CountedWords result;
    {
        Tables tables(size_t(resolved_threads(options)));
        if (!count_into(tables, text, special, options, stats, file)) return {};
        result = merge_counts(tables, int(tables.per_thread.size()));
    }
    return_freed_memory();
    return result;
}

// One table's words cut into `num_slices` by word_slice_of_hash, in table order (no sorting): two
// passes over the slots, sizes then copies.
std::vector<CountedWords> slices_in_table_order(const ThreadCounts& counts, size_t num_slices) {
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
    std::vector<CountedWords> slices(num_slices);
    std::vector<Cursor> cursors(num_slices);
    for (size_t slice = 0; slice < num_slices; ++slice) {
        CountedWords& words = slices[slice];
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

CountedWords count_words_in_buffer(std::string_view text, const std::vector<std::string>& special_tokens,
                       const CountOptions& options, CountStats* stats) {
    return count_words_impl(text, special_tokens, options, stats, nullptr);
}

CountedWords count_words(const std::string& path, const std::vector<std::string>& special_tokens,
                               const CountOptions& options, CountStats* stats) {
    const MappedFile file(path);
    return file.checked([&] { return count_words_impl(file.view(), special_tokens, options, stats, &file); });
}

struct WordCounter::State {
    SpecialTokens special;
    CountOptions options;
    Tables tables;

    State(const std::vector<std::string>& special_tokens, const CountOptions& counter_options)
        : special(special_tokens), options(counter_options), tables(size_t(resolved_threads(counter_options))) {}
};

WordCounter::WordCounter(const std::vector<std::string>& special_tokens, const CountOptions& options)
    : state_(std::make_unique<State>(special_tokens, options)) {}

WordCounter::~WordCounter() = default;

bool WordCounter::count(std::string_view text) {
    return count_into(state_->tables, text, state_->special, state_->options, nullptr, nullptr, false);
}

bool WordCounter::count_file_range(const std::string& path, size_t begin, size_t end) {
    const MappedFile file(path);
    const std::string_view whole = file.view();
    if (begin > end || end > whole.size()) {
        throw std::ios_base::failure(path + ": bytes " + std::to_string(begin) + ".." + std::to_string(end) +
                                     " are not in the file (" + std::to_string(whole.size()) + " bytes)");
    }
    return file.checked([&] {
        return count_into(state_->tables, whole.substr(begin, end - begin), state_->special, state_->options,
                          nullptr, &file, false);
    });
}

bool WordCounter::keeps_documents_apart(std::string_view separator) const {
    const std::vector<std::string>& tokens = state_->special.tokens();
    if (std::find(tokens.begin(), tokens.end(), separator) == tokens.end()) return false;
    const auto starts_with = [](std::string_view text, std::string_view prefix) {
        return text.substr(0, prefix.size()) == prefix;
    };
    for (const std::string_view token : tokens) {
        // A longer token that begins with the separator would be matched there instead of it.
        if (token.size() > separator.size() && starts_with(token, separator)) return false;
        // An occurrence that starts before the separator and ends inside it or after it: the token's
        // tail from some cut on begins as the separator does (or begins with the whole separator).
        for (size_t cut = 1; cut < token.size(); ++cut) {
            const std::string_view tail = token.substr(cut);
            if (tail.size() <= separator.size() ? starts_with(separator, tail) : starts_with(tail, separator)) {
                return false;
            }
        }
    }
    return true;
}

namespace {

// A task of count_apart: the whole documents [first, last), or positions [begin, end) of one document
// large enough to be cut into chunks of its own.
struct DocumentTask {
    size_t first, last;
    size_t begin, end;
};

template <typename Offset>
std::vector<size_t> checked_offsets(const void* raw, size_t count, size_t data_size) {
    const Offset* offsets = static_cast<const Offset*>(raw);
    std::vector<size_t> ends(count + 1);
    for (size_t index = 0; index <= count; ++index) {
        const Offset offset = offsets[index];
        if (offset < 0 || size_t(offset) > data_size || (index > 0 && size_t(offset) < ends[index - 1])) {
            throw std::invalid_argument("documents: offsets are not increasing within the data");
        }
        ends[index] = size_t(offset);
    }
    return ends;
}

// Documents laid out as an Arrow string array: bytes [ends[i], ends[i + 1]) of one buffer.
struct ArrowLayout {
    const char* data;
    const std::vector<size_t>& ends;
    std::string_view at(size_t index) const { return {data + ends[index], ends[index + 1] - ends[index]}; }
    // The documents of a run lie back to back: bytes up to the run's end may be read past a word.
    const char* readable_end(size_t /*index*/, size_t last) const { return data + ends[last]; }
};

// Documents each in its own buffer (Python objects): nothing past a document's end may be read.
struct ScatteredLayout {
    const std::string_view* documents;
    std::string_view at(size_t index) const { return documents[index]; }
    const char* readable_end(size_t index, size_t /*last*/) const { return documents[index].data() + documents[index].size(); }
};

// Counts documents [0, count) of `layout` each on its own, on the counter's threads. `ends`: where each
// document starts and ends in the documents placed back to back (separators left out), the positions
// that tasks and errors speak in. InvalidUtf8Error gives the offset in the text joined by `separator`.
template <typename Layout>
bool count_apart(std::vector<ThreadCounts>& per_thread, const SpecialTokens& special, const CountOptions& options,
                 const Layout& layout, const std::vector<size_t>& ends, size_t count, std::string_view separator,
                 std::string_view refused) {
    const int threads = int(per_thread.size());
    const size_t total = ends[count] - ends[0];
    const size_t chunk_bytes = options.chunk_bytes > 0 ? options.chunk_bytes : piece_chunk_bytes(total, threads);
    const size_t expected = std::max(total, options.expected_bytes) / size_t(threads);  // for after_chunk
    const unicode_tables::Table& unicode = unicode_table(options.unicode_table);  // throws here, not in a thread

    // Runs of whole documents of about chunk_bytes; a document of more than two chunks is cut into chunks
    // of its own (its ends are safe cuts: the separator keeps documents apart).
    std::vector<DocumentTask> tasks;
    size_t run_start = 0;
    for (size_t index = 0; index < count; ++index) {
        const size_t size = ends[index + 1] - ends[index];
        if (size > 2 * chunk_bytes) {
            if (run_start < index) tasks.push_back({run_start, index, 0, 0});
            const std::vector<size_t> cuts = chunk_boundaries(layout.at(index), special, chunk_bytes, threads, nullptr, options.pattern);
            for (size_t cut = 0; cut + 1 < cuts.size(); ++cut) {
                tasks.push_back({index, index + 1, ends[index] + cuts[cut], ends[index] + cuts[cut + 1]});
            }
            run_start = index + 1;
        } else if (ends[index + 1] - ends[run_start] >= chunk_bytes) {
            tasks.push_back({run_start, index + 1, 0, 0});
            run_start = index + 1;
        }
    }
    if (run_start < count) tasks.push_back({run_start, count, 0, 0});

    std::atomic<size_t> first_invalid{kValidUtf8};  // a position in `ends`' terms
    std::atomic<bool> holds_refused{false};
    parallel_for(tasks.size(), threads, [&](size_t task_index) {
        const DocumentTask& task = tasks[task_index];
        ThreadCounts& counts = per_thread[size_t(omp_thread_id())];
        if (task.end > task.begin) {  // a chunk of one large document
            const std::string_view chunk = layout.at(task.first).substr(task.begin - ends[task.first], task.end - task.begin);
            if (!refused.empty() && chunk.find(refused) != std::string_view::npos) holds_refused = true;
            count_chunk(chunk, task.begin, special, options.pattern, unicode, counts, first_invalid, options.by_lines);
            counts.after_chunk(chunk.size(), expected, per_thread.size());
            return;
        }
        for (size_t index = task.first; index < task.last; ++index) {
            const std::string_view document = layout.at(index);
            counts.readable_end = layout.readable_end(index, task.last);
            if (!refused.empty() && document.find(refused) != std::string_view::npos) holds_refused = true;
            const size_t invalid = count_pieces(document, special, options.pattern, unicode, counts, options.by_lines);
            if (invalid != kValidUtf8) {
                note_invalid(ends[index] + invalid, first_invalid);
                break;
            }
        }
        counts.flush();
        counts.after_chunk(ends[task.last] - ends[task.first], expected, per_thread.size());
    });
    if (first_invalid.load() != kValidUtf8) {
        const size_t position = first_invalid.load();
        const size_t document = size_t(std::upper_bound(ends.begin(), ends.end(), position) - ends.begin()) - 1;
        throw InvalidUtf8Error(position - ends[0] + std::min(document, count - 1) * separator.size());
    }
    return !holds_refused.load();
}

}  // namespace

bool WordCounter::count_documents(const char* data, size_t data_size, const void* offsets, int offset_bytes,
                                  size_t count, std::string_view separator, std::string_view refused) {
    if (count == 0) return true;
    if (offset_bytes != 4 && offset_bytes != 8) throw std::invalid_argument("documents: offsets are 4 or 8 bytes");
    if (!keeps_documents_apart(separator)) {
        throw std::invalid_argument("documents: the separator does not keep documents apart; join them instead");
    }
    const std::vector<size_t> ends = offset_bytes == 4 ? checked_offsets<int32_t>(offsets, count, data_size)
                                                       : checked_offsets<int64_t>(offsets, count, data_size);
    return count_apart(state_->tables.per_thread, state_->special, state_->options, ArrowLayout{data, ends}, ends,
                       count, separator, refused);
}

bool WordCounter::count_scattered_documents(const std::string_view* documents, size_t count,
                                            std::string_view separator, std::string_view refused) {
    if (count == 0) return true;
    if (!keeps_documents_apart(separator)) {
        throw std::invalid_argument("documents: the separator does not keep documents apart; join them instead");
    }
    std::vector<size_t> ends(count + 1, 0);
    for (size_t index = 0; index < count; ++index) ends[index + 1] = ends[index] + documents[index].size();
    return count_apart(state_->tables.per_thread, state_->special, state_->options, ScatteredLayout{documents}, ends,
                       count, separator, refused);
}

CountedWords WordCounter::take(bool canonical_order) {
    Tables& tables = state_->tables;
    const size_t threads = tables.per_thread.size();
    fold_all(tables.per_thread);
    CountedWords result = canonical_order || threads > 1 ? merge_counts(tables, int(threads))
                                                       : std::move(slices_in_table_order(tables.per_thread[0], 1)[0]);
    start_over(tables);
    return result;
}

std::vector<CountedWords> WordCounter::take_slices(size_t num_slices) {
    if (num_slices == 0 || num_slices >= (size_t(1) << 32)) {
        throw std::invalid_argument("word counter: the number of slices must be in [1, 2**32)");
    }
    Tables& tables = state_->tables;
    const size_t threads = tables.per_thread.size();
    fold_all(tables.per_thread);
    std::vector<CountedWords> slices = threads > 1 ? split_into_slices(merge_counts(tables, int(threads)), num_slices)
                                                 : slices_in_table_order(tables.per_thread[0], num_slices);
    start_over(tables);
    return slices;
}

uint64_t canonical_word_hash(std::string_view word, const char* readable_end) {
    return word.empty() ? 0 : word_table::make_key(word.data(), word.size(), readable_end).hash;
}

}  // namespace bpe
