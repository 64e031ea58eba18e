// Issue 24: does radix-partitioned aggregation count words faster than the per-thread hash table?
//
// Build (from the repository root; setup.py's flags, -std=c++17 -O3 -fopenmp):
//   c++ -std=c++17 -O3 -fopenmp -Icpp scripts/bench_partitioned_count.cpp cpp/*/*.cpp -o bench_partitioned_count
// Run:
//   ./bench_partitioned_count FILE [repeats=5] [partition_bits=7] [batch_mib=1] [threads=1,2]
//   ./bench_partitioned_count FILE 1 BITS MIB THREADS mem-today|mem-part   (peak RSS of one count)
// Prints MB/s (10^6 bytes/s), best of `repeats` by wall clock and by process CPU time, for the
// pre-tokenizer alone, today's counter (count_words_in_buffer) and the partitioned one, the two
// counters alternating so that load on the shared machine hits both alike; and whether their
// outputs are the same words with the same counts (and in the same canonical order).
//
// The partitioned counter: each thread scans a batch of its text with the library's block scanner;
// one- and two-byte words go to arrays as in ThreadCounts; every longer word's key (word_table's
// make_key: hash, inline bytes or the text's address) is appended to one of 2^bits buffers chosen by
// the hash's top bits. After each batch round every thread aggregates the partitions it owns (from
// all threads' buffers) into one small table per partition, so no per-thread tables and no merge.
// Long words point into the text until aggregated, so a batch's text must live until then.
#include <omp.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "scan/chunking.hpp"
#include "scan/pretokenize.hpp"
#include "scan/special_tokens.hpp"
#include "count/word_count.hpp"
#include "count/word_table.hpp"

namespace {

using namespace bpe::word_table;

double cpu_seconds() {
    timespec now{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
    return double(now.tv_sec) + 1e-9 * double(now.tv_nsec);
}

long peak_rss_kib() {  // VmHWM: ru_maxrss would include a parent's peak
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("VmHWM:", 0) == 0) return std::atol(line.c_str() + 6);
    }
    return -1;
}

// A buffered word: WordKey without its hash (16 bytes, not 24: a third less buffer memory and
// traffic). An inline word's hash is two multiplications to make again; a long word (about 1% of
// keys) keeps its 32-bit check in bits 24-55 of packed[1] (its length below 2^24), because hashing
// it again reads text that has left the caches since the scan (a quarter of aggregation time).
struct Entry {
    uint64_t packed[2];
};
constexpr size_t kLongEntryBytes = size_t(1) << 24;  // longer words go to ScanBuffers::oversize

inline Entry entry_of(const WordKey& key) {
    if (is_inline(key.packed[1])) return {{key.packed[0], key.packed[1]}};
    return {{key.packed[0], key.packed[1] | (uint64_t(check_of(key.hash)) << 24)}};
}

inline WordKey key_of(const Entry& entry) {
    WordKey key;
    key.packed[0] = entry.packed[0];
    if (is_inline(entry.packed[1])) {
        key.packed[1] = entry.packed[1];
        key.hash = hash_inline(entry.packed[0], entry.packed[1]);
    } else {
        key.packed[1] = entry.packed[1] & (kLongEntryBytes - 1);
        key.hash = (entry.packed[1] >> 24) << 32;  // the table reads only the check
    }
    return key;
}

// One partition's words. The home slot is taken from the check's bits *below* the partition bits
// (all words of a partition share the top ones), so a scan in slot order is still in check order up
// to probing displacement, and the partitions in order give count_words' canonical order.
class PartitionTable {
public:
    explicit PartitionTable(unsigned partition_bits) : partition_bits_(partition_bits) { resize(kInitialBits); }

    // Adds one occurrence of each; the load check once per group, whose home slots are prefetched
    // first: a batch of 1 MiB brings a partition fewer keys than its table has lines, so the table
    // is not in cache (real_mix, 2^7 partitions: 286 MB/s with, 246 without).
    void add_all(const Entry* entries, size_t count, Arena& arena) {
        WordKey keys[kGroup];
        for (size_t done = 0; done < count; done += kGroup) {
            const size_t group = std::min(kGroup, count - done);
            while (10 * (size_ + group) > 7 * (size_t(1) << bits_)) resize(bits_ + 1);
            for (size_t i = 0; i < group; ++i) {
                keys[i] = key_of(entries[done + i]);
                __builtin_prefetch(&slots_[home(check_of(keys[i].hash))], 1);
            }
            for (size_t i = 0; i < group; ++i) add(keys[i], 1, arena);
        }
    }

    void add_one(const WordKey& key, int64_t count, Arena& arena) {
        if (10 * (size_ + 1) > 7 * (size_t(1) << bits_)) resize(bits_ + 1);
        add(key, count, arena);
    }

    // The words in canonical order (check, then bytes), appended to `out`.
    void append_sorted(std::vector<WordSlot>& out) const {
        const size_t first = out.size();
        for (const WordSlot& slot : slots_) {
            if (!slot.empty()) out.push_back(slot);
        }
        // Nearly sorted already: insertion sort is about linear.
        for (size_t i = first + 1; i < out.size(); ++i) {
            const WordSlot moving = out[i];
            size_t hole = i;
            while (hole > first && before(moving, out[hole - 1])) {
                out[hole] = out[hole - 1];
                --hole;
            }
            out[hole] = moving;
        }
    }

    size_t size() const { return size_; }

private:
    static constexpr unsigned kInitialBits = 8;
    static constexpr size_t kGroup = 64;
    static constexpr size_t kSpare = 256;  // probing runs past the last home slot, never wraps

    static bool before(const WordSlot& a, const WordSlot& b) {
        if (a.check != b.check) return a.check < b.check;
        return a.view() < b.view();
    }

    size_t home(uint32_t check) const { return size_t(uint32_t(check << partition_bits_) >> shift_); }

    void add(const WordKey& key, int64_t count, Arena& arena) {
        for (;;) {
            WordSlot* const slots = slots_.data();
            const size_t num_slots = slots_.size();
            for (size_t index = home(check_of(key.hash)); index < num_slots; ++index) {
                WordSlot& slot = slots[index];
                if (slot.packed[1] == key.packed[1]) {
                    if (slot.packed[0] == key.packed[0] ||
                        (!is_inline(key.packed[1]) && slot.check == check_of(key.hash) &&
                         same_long_bytes(address_of(slot.packed[0]), address_of(key.packed[0]),
                                         long_length(key.packed[1])))) {
                        slot.count += count;
                        return;
                    }
                } else if (slot.empty()) {
                    slot.packed[0] = is_inline(key.packed[1])
                                         ? key.packed[0]
                                         : address_field(arena.store(address_of(key.packed[0]),
                                                                     long_length(key.packed[1])));
                    slot.packed[1] = key.packed[1];
                    slot.check = check_of(key.hash);
                    slot.count = count;
                    ++size_;
                    return;
                }
            }
            resize(bits_ + 1);  // ran off the spare slots
        }
    }

    void resize(unsigned bits) {
        if (bits + partition_bits_ > 32) std::abort();
        std::vector<WordSlot> old(size_t(1) << bits);
        old.resize(old.size() + kSpare);
        old.swap(slots_);
        bits_ = bits;
        shift_ = 32 - bits;
        for (const WordSlot& slot : old) {
            if (slot.empty()) continue;
            size_t index = home(slot.check);
            while (index < slots_.size() && !slots_[index].empty()) ++index;
            if (index >= slots_.size()) std::abort();  // a run of 256 displaced words: never seen
            slots_[index] = slot;
        }
    }

    unsigned partition_bits_;
    unsigned bits_ = 0;
    unsigned shift_ = 32;
    size_t size_ = 0;
    std::vector<WordSlot> slots_;
};

// One thread's scan state: short-word arrays and one append buffer per partition.
struct ScanBuffers {
    static constexpr size_t kMaxPartitions = 1024;
    struct Tail {  // where a partition's next key goes; both in one line
        Entry* cursor;
        Entry* end;
    };
    unsigned shift;  // partition = check >> shift
    Tail tails[kMaxPartitions];
    std::vector<std::unique_ptr<Entry[]>> storage;
    std::vector<size_t> capacity;
    std::unique_ptr<int64_t[]> one_byte{new int64_t[128]()};
    std::unique_ptr<int64_t[]> two_bytes{new int64_t[256 * 256]()};
    const char* readable_end = nullptr;
    std::vector<WordKey> oversize;  // words of 16 MiB and more (never, in prose)

    ScanBuffers(size_t partitions, unsigned partition_bits, size_t expected_keys)
        : shift(32 - partition_bits), storage(partitions), capacity(partitions) {
        // Hashes spread evenly; the slack makes growing rare (and it is only address space).
        const size_t each = expected_keys / partitions + expected_keys / (4 * partitions) + 64;
        for (size_t p = 0; p < partitions; ++p) {
            storage[p].reset(new Entry[each]);
            capacity[p] = each;
            tails[p] = {storage[p].get(), storage[p].get() + each};
        }
    }
    ScanBuffers(const ScanBuffers&) = delete;

    size_t used(size_t p) const { return size_t(tails[p].cursor - storage[p].get()); }
    void clear(size_t p) { tails[p].cursor = storage[p].get(); }

    __attribute__((noinline)) Entry* grow(size_t p) {
        const size_t kept = used(p);
        std::unique_ptr<Entry[]> bigger(new Entry[2 * capacity[p]]);
        std::memcpy(bigger.get(), storage[p].get(), kept * sizeof(Entry));
        storage[p] = std::move(bigger);
        capacity[p] *= 2;
        tails[p] = {storage[p].get() + kept, storage[p].get() + capacity[p]};
        return tails[p].cursor;
    }

    void add(const char* word, size_t length) {
        const WordKey key = make_key(word, length, readable_end);
        if (__builtin_expect(length >= kLongEntryBytes, 0)) return oversize.push_back(key);
        const Entry entry = entry_of(key);
        Tail& tail = tails[check_of(key.hash) >> shift];
        Entry* to = tail.cursor;
        if (__builtin_expect(to == tail.end, 0)) to = grow(size_t(&tail - tails));
        // Field by field: a struct copy was spilled and reloaded as 16 bytes (a failed store forward).
        to->packed[0] = entry.packed[0];
        to->packed[1] = entry.packed[1];
        tail.cursor = to + 1;
    }

    // As ThreadCounts::add_block.
    void add_block(const unsigned char* block, const char* text, uint64_t boundaries) {
        const uint64_t next_starts = boundaries >> 1;
        uint64_t one = boundaries & next_starts;
        uint64_t two = boundaries & ~next_starts & (boundaries >> 2);
        const uint64_t last = uint64_t(1) << (63 - bpe::count_leading_zeros(boundaries));
        uint64_t longer = boundaries & ~(one | two | last);
        for (; one != 0; one &= one - 1) ++one_byte[block[bpe::count_trailing_zeros(one)]];
        for (; two != 0; two &= two - 1) {
            const unsigned at = bpe::count_trailing_zeros(two);
            ++two_bytes[block[at] * 256 + block[at + 1]];
        }
        for (; longer != 0; longer &= longer - 1) {
            const unsigned at = bpe::count_trailing_zeros(longer);
            const unsigned stop = at + 3 + bpe::count_trailing_zeros(boundaries >> (at + 3));
            add(text + at, stop - at);
        }
    }

    void scan(std::string_view chunk, const bpe::SpecialTokens& special) {
        readable_end = chunk.data() + chunk.size();
        special.for_each_piece(chunk, [&](size_t begin, size_t stop) {
            const char* const piece = chunk.data() + begin;
            const size_t bad = bpe::for_each_pretoken_block(
                piece, stop - begin, size_t(readable_end - piece),
                [&](size_t b, size_t e) { add(piece + b, e - b); },
                [&](const unsigned char* block, size_t offset, uint64_t bounds) { add_block(block, piece + offset, bounds); });
            if (bad != bpe::kValidUtf8) std::abort();
        });
    }
};

struct PartitionedOptions {
    unsigned partition_bits = 7;
    size_t batch_bytes = size_t(1) << 20;  // text per thread per round
    int threads = 1;
};

bpe::CountedWords count_partitioned(std::string_view text, const bpe::SpecialTokens& special,
                                  const PartitionedOptions& options) {
    const int threads = options.threads;
    const size_t partitions = size_t(1) << options.partition_bits;
    const std::vector<size_t> cuts = bpe::chunk_boundaries(text, special, options.batch_bytes, threads);
    const size_t num_chunks = cuts.size() - 1;
    const size_t rounds = (num_chunks + size_t(threads) - 1) / size_t(threads);

    // About one longer word per 6 bytes of English (a quarter more room than that).
    std::vector<std::unique_ptr<ScanBuffers>> owned;
    std::vector<ScanBuffers*> buffers;
    for (int t = 0; t < threads; ++t) {
        owned.emplace_back(new ScanBuffers(partitions, options.partition_bits, options.batch_bytes / 5));
        buffers.push_back(owned.back().get());
    }
    std::vector<PartitionTable> tables(partitions, PartitionTable(options.partition_bits));
    std::vector<Arena> arenas{size_t(threads)};  // long words of the partitions a thread owns
    std::vector<std::vector<WordSlot>> sorted(partitions);
    std::vector<size_t> first_word(partitions + 1, 0), first_byte(partitions + 1, 0);
    bpe::CountedWords result;

#pragma omp parallel num_threads(threads)
    {
        const size_t me = size_t(omp_get_thread_num());
        for (size_t round = 0; round < rounds; ++round) {
            const size_t chunk = round * size_t(threads) + me;
            if (chunk < num_chunks) buffers[me]->scan(text.substr(cuts[chunk], cuts[chunk + 1] - cuts[chunk]), special);
#pragma omp barrier
            for (size_t p = me; p < partitions; p += size_t(threads)) {
                for (ScanBuffers* from : buffers) {
                    tables[p].add_all(from->storage[p].get(), from->used(p), arenas[me]);
                    from->clear(p);
                }
            }
            for (ScanBuffers* from : buffers) {
                for (const WordKey& key : from->oversize) {
                    const size_t p = check_of(key.hash) >> (32 - options.partition_bits);
                    if (p % size_t(threads) == me) tables[p].add_one(key, 1, arenas[me]);
                }
            }
#pragma omp barrier
            buffers[me]->oversize.clear();
#pragma omp barrier
        }
        // One- and two-byte words, summed over the threads, into the partitions this thread owns.
        const auto add_short = [&](const char* word, size_t length, int64_t count) {
            if (count == 0) return;
            const WordKey key = make_key(word, length);
            const size_t p = check_of(key.hash) >> (32 - options.partition_bits);
            if (p % size_t(threads) == me) tables[p].add_one(key, count, arenas[me]);
        };
        char word[2];
        for (size_t first = 0; first < 256; ++first) {
            word[0] = char(first);
            int64_t count = 0;
            if (first < 128) {
                for (const ScanBuffers* b : buffers) count += b->one_byte[first];
                add_short(word, 1, count);
            }
            for (size_t second = 0; second < 256; ++second) {
                word[1] = char(second);
                count = 0;
                for (const ScanBuffers* b : buffers) count += b->two_bytes[first * 256 + second];
                add_short(word, 2, count);
            }
        }
        // Out in canonical order: partitions in order, each sorted; no merge between threads.
        for (size_t p = me; p < partitions; p += size_t(threads)) {
            sorted[p].reserve(tables[p].size());
            tables[p].append_sorted(sorted[p]);
        }
#pragma omp barrier
#pragma omp single
        {
            for (size_t p = 0; p < partitions; ++p) {
                size_t bytes = 0;
                for (const WordSlot& w : sorted[p]) bytes += w.size();
                first_word[p + 1] = first_word[p] + sorted[p].size();
                first_byte[p + 1] = first_byte[p] + bytes;
            }
            result.bytes.resize(first_byte[partitions]);
            result.offsets.resize(first_word[partitions] + 1);
            result.counts.resize(first_word[partitions]);
        }  // implicit barrier
        for (size_t p = me; p < partitions; p += size_t(threads)) {
            size_t index = first_word[p], offset = first_byte[p];
            for (const WordSlot& w : sorted[p]) {
                std::memcpy(&result.bytes[offset], w.bytes(), w.size());
                offset += w.size();
                result.counts[index] = w.count;
                result.offsets[++index] = offset;
            }
        }
    }
    return result;
}

// Same words with the same counts, whatever the order.
bool same_multiset(const bpe::CountedWords& a, const bpe::CountedWords& b) {
    const auto pairs = [](const bpe::CountedWords& w) {
        std::vector<std::pair<std::string_view, int64_t>> out;
        for (size_t i = 0; i < w.size(); ++i) {
            out.emplace_back(std::string_view(w.bytes).substr(w.offsets[i], w.offsets[i + 1] - w.offsets[i]), w.counts[i]);
        }
        std::sort(out.begin(), out.end());
        return out;
    };
    return pairs(a) == pairs(b);
}

struct Best {
    double wall = 0, cpu = 0;
    void note(size_t bytes, double wall_s, double cpu_s) {
        wall = std::max(wall, double(bytes) / wall_s / 1e6);
        cpu = std::max(cpu, double(bytes) / cpu_s / 1e6);
    }
};

template <typename Work>
void timed(size_t bytes, Best& best, Work&& work) {
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = cpu_seconds();
    work();
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    best.note(bytes, took.count(), cpu_seconds() - cpu_start);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s FILE [repeats] [partition_bits] [batch_mib] [threads] [mem-today|mem-part]\n", argv[0]);
        return 2;
    }
    std::ifstream in(argv[1], std::ios::binary | std::ios::ate);
    std::string text(size_t(in.tellg()), '\0');  // sized once: a growing string doubles the peak
    in.seekg(0).read(text.data(), std::streamsize(text.size()));
    const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
    PartitionedOptions part;
    if (argc > 3) part.partition_bits = unsigned(std::atoi(argv[3]));
    if (argc > 4) part.batch_bytes = size_t(std::atof(argv[4]) * 1048576.0);
    std::vector<int> thread_counts{1, 2};
    if (argc > 5 && std::atoi(argv[5]) > 0) thread_counts = {std::atoi(argv[5])};
    const std::string mode = argc > 6 ? argv[6] : "";
    const std::vector<std::string> tokens{"<|endoftext|>"};
    const bpe::SpecialTokens special(tokens);

    if (mode == "mem-today" || mode == "mem-part") {
        const long before = peak_rss_kib();
        std::ofstream("/proc/self/clear_refs") << "5";  // resets VmHWM to the current RSS
        bpe::CountOptions options;
        options.num_threads = thread_counts[0];
        part.threads = thread_counts[0];
        const size_t words = mode == "mem-today" ? bpe::count_words_in_buffer(text, tokens, options).size()
                                                 : count_partitioned(text, special, part).size();
        std::printf("%s threads %d: %zu words, peak RSS while counting %ld MiB (text read: %ld MiB)\n", mode.c_str(),
                    thread_counts[0], words, peak_rss_kib() / 1024, before / 1024);
        return 0;
    }

    std::printf("%s: %zu bytes, best of %d, partitions 2^%u, batch %.1f MiB per thread\n", argv[1], text.size(),
                repeats, part.partition_bits, double(part.batch_bytes) / 1048576.0);
    Best scan;
    size_t pretokens = 0;
    for (int r = 0; r < repeats; ++r) {
        timed(text.size(), scan, [&] {
            pretokens = 0;
            bpe::for_each_pretoken(text.data(), text.size(), [&](size_t, size_t) { ++pretokens; });
        });
    }
    std::printf("pre-tokenize only, 1 thread:  %7.1f MB/s (CPU %7.1f)  %zu pre-tokens\n", scan.wall, scan.cpu, pretokens);

    for (const int threads : thread_counts) {
        bpe::CountOptions options;
        options.num_threads = threads;
        part.threads = threads;
        Best today, mine;
        bpe::CountedWords a, b;
        for (int r = 0; r < repeats; ++r) {  // alternating, so that load on the machine hits both
            timed(text.size(), today, [&] { a = bpe::count_words_in_buffer(text, tokens, options); });
            timed(text.size(), mine, [&] { b = count_partitioned(text, special, part); });
        }
        const bool same_order = a.bytes == b.bytes && a.offsets == b.offsets && a.counts == b.counts;
        const bool same = same_order || same_multiset(a, b);
        std::printf("%d thread(s): today %7.1f MB/s (CPU %7.1f)  partitioned %7.1f MB/s (CPU %7.1f)"
                    "  ratio to pre-tokenize (CPU) %.2f / %.2f  words %zu / %zu  same counts: %s, same order: %s\n",
                    threads, today.wall, today.cpu, mine.wall, mine.cpu,
                    today.cpu / scan.cpu, mine.cpu / scan.cpu, a.size(), b.size(),
                    same ? "yes" : "NO", same_order ? "yes" : "no");
    }
    return 0;
}
