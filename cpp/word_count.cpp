// Performance notes (one thread, 2-core AMD EPYC VM, mixed real text ~180 MB/s, synthetic
// TinyStories/OpenWebText-like text ~190-220 MB/s; a later VM of the same kind gave 97-104 MB/s on
// real_mix, old and new code alike): roughly half the time is the pre-tokenizer and
// half the word table. The table is dominated by cache misses on rare words, hence: 32-byte slots
// with short words inline (no pointer chase), lookups queued in batches of 32 with their slots
// prefetched (about 1.3x), and huge pages for big tables (TLB misses; up to 1.2x). A small
// "hot word" cache in front of the table was tried and was slower. With many distinct words the
// tables outgrow the caches: the 11.9 GB OWT-like corpus (5.1M distinct words) counts at 149 MB/s
// on two threads (about 65 ns per word per thread).
#include "word_count.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ios>
#include <memory>
#include <new>
#include <stdexcept>
#include <utility>

#include "omp_shim.hpp"
#include "pretokenize.hpp"

#if defined(_WIN32)
#include <fstream>
#include <iterator>
#else
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

namespace bpe {
namespace {

// ---------------------------------------------------------------------------------------------
// Words, hashing and tables

inline uint64_t load64(const char* p) {
    uint64_t value;
    std::memcpy(&value, p, 8);
    return value;
}

inline uint32_t load32(const char* p) {
    uint32_t value;
    std::memcpy(&value, p, 4);
    return value;
}

inline uint64_t mix(uint64_t h) {
    h ^= h >> 32;
    h *= 0xd6e8feb86659fd93ULL;
    h ^= h >> 29;
    h *= 0x9fb21c651e98df25ULL;
    h ^= h >> 32;
    return h;
}

// Most words fit in 16 bytes (English averages about five); those are kept inline in the table
// slot, zero-padded, so a lookup compares two integers instead of chasing a pointer.
constexpr size_t kInlineBytes = 16;

struct WordKey {
    uint64_t hash;
    uint64_t packed[2];  // the bytes of a short word, zero-padded, in memory order
    const char* data;
    size_t length;
};

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define BPE_LITTLE_ENDIAN 1
#endif

#if defined(BPE_LITTLE_ENDIAN)
// Overlapping loads instead of a byte loop; shifts place each byte at its memory position.
inline void pack_short(const char* p, size_t n, uint64_t packed[2]) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(p);
    if (n > 8) {
        packed[0] = load64(p);
        packed[1] = load64(p + n - 8) >> (8 * (16 - n));
    } else if (n >= 4) {
        packed[0] = load32(p) | (uint64_t(load32(p + n - 4)) << (8 * (n - 4)));
        packed[1] = 0;
    } else if (n > 0) {
        packed[0] = bytes[0] | (uint64_t(bytes[n / 2]) << (8 * (n / 2))) |
                    (uint64_t(bytes[n - 1]) << (8 * (n - 1)));
        packed[1] = 0;
    } else {
        packed[0] = packed[1] = 0;
    }
}
#else
inline void pack_short(const char* p, size_t n, uint64_t packed[2]) {
    char padded[kInlineBytes] = {};
    std::memcpy(padded, p, n);
    std::memcpy(packed, padded, kInlineBytes);
}
#endif

uint64_t hash_long(const char* p, size_t length) {
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ length;
    for (; length >= 8; p += 8, length -= 8) {
        h = (h ^ load64(p)) * 0xc4ceb9fe1a85ec53ULL + 0x2545f4914f6cdd1dULL;
    }
    uint64_t tail[2];
    pack_short(p, length, tail);
    return mix(h ^ tail[0]);
}

#if defined(BPE_LITTLE_ENDIAN)
// kKeep.masks[n]: the first n bytes of a 16-byte little-endian load.
struct KeepMasks {
    uint64_t masks[kInlineBytes + 1][2];
    constexpr KeepMasks() : masks() {
        for (size_t n = 0; n <= kInlineBytes; ++n) {
            masks[n][0] = n >= 8 ? ~uint64_t(0) : (uint64_t(1) << (8 * n)) - 1;
            masks[n][1] = n <= 8 ? 0 : n == 16 ? ~uint64_t(0) : (uint64_t(1) << (8 * (n - 8))) - 1;
        }
    }
};
inline constexpr KeepMasks kKeep{};
#endif

// `readable_end`: bytes before it may be read past the word's end, so that a short word can be
// packed with two whole loads and two masks, without branching on its length.
inline WordKey make_key(const char* data, size_t length, const char* readable_end) {
    WordKey key;
    key.data = data;
    key.length = length;
    if (length <= kInlineBytes) {
#if defined(BPE_LITTLE_ENDIAN)
        if (readable_end - data >= ptrdiff_t(kInlineBytes)) {
            key.packed[0] = load64(data) & kKeep.masks[length][0];
            key.packed[1] = load64(data + 8) & kKeep.masks[length][1];
        } else {
            pack_short(data, length, key.packed);
        }
#else
        (void)readable_end;
        pack_short(data, length, key.packed);
#endif
        key.hash = mix((key.packed[0] * 0xc4ceb9fe1a85ec53ULL) ^
                       (key.packed[1] + length) * 0xff51afd7ed558ccdULL);
    } else {
        key.packed[0] = key.packed[1] = 0;
        key.hash = hash_long(data, length);
    }
    return key;
}

inline WordKey make_key(const char* data, size_t length) { return make_key(data, length, data + length); }

// Long words' bytes live here; blocks never move, so slots can keep plain pointers into them.
class Arena {
public:
    const char* store(const char* data, size_t length) {
        if (length > remaining_) {
            const size_t size = std::max(length, kBlockBytes);
            blocks_.emplace_back(new char[size]);
            cursor_ = blocks_.back().get();
            remaining_ = size;
        }
        char* const stored = cursor_;
        std::memcpy(stored, data, length);
        cursor_ += length;
        remaining_ -= length;
        return stored;
    }

private:
    static constexpr size_t kBlockBytes = size_t(1) << 20;
    std::vector<std::unique_ptr<char[]>> blocks_;
    char* cursor_ = nullptr;
    size_t remaining_ = 0;
};

// 32 bytes, two per cache line; all zero is an empty slot.
struct WordSlot {
    uint32_t check;   // high half of the hash: picks the slot (top bits) and filters lookups
    uint32_t length;  // saturated; a long word's exact length is in `long_word`
    int64_t count;    // 0 marks an empty slot
    union {
        uint64_t packed[2];
        struct {
            const char* data;
            uint64_t length;
        } long_word;
    };

    size_t size() const { return length <= kInlineBytes ? length : size_t(long_word.length); }
    const char* bytes() const {
        return length <= kInlineBytes ? reinterpret_cast<const char*>(packed) : long_word.data;
    }
    std::string_view view() const { return {bytes(), size()}; }
};

inline uint32_t check_of(uint64_t hash) { return uint32_t(hash >> 32); }

inline uint32_t saturated_length(size_t length) {
    return length < UINT32_MAX ? uint32_t(length) : UINT32_MAX;
}

inline bool same_word(const WordSlot& slot, const WordKey& key) {
    if (slot.check != check_of(key.hash) || slot.length != saturated_length(key.length)) return false;
    if (key.length <= kInlineBytes) return slot.packed[0] == key.packed[0] && slot.packed[1] == key.packed[1];
    return slot.long_word.length == key.length && std::memcmp(slot.long_word.data, key.data, key.length) == 0;
}

inline void prefetch_for_write(const void* address) {
#if defined(__GNUC__)
    __builtin_prefetch(address, 1);
#else
    (void)address;
#endif
}

// Zero-filled slot storage. Lookups land on random slots, so a big table asks for transparent huge
// pages: with 4 KiB pages nearly every lookup would also miss the TLB.
class SlotBuffer {
public:
    SlotBuffer() = default;
    explicit SlotBuffer(size_t count) : count_(count) {
        const size_t bytes = count * sizeof(WordSlot);
#if defined(MADV_HUGEPAGE)
        if (bytes >= kHugePageBytes) {
            // Over-allocate by a huge page so that the slots can start on a huge-page boundary.
            mapped_bytes_ = bytes + kHugePageBytes;
            void* mapped =
                ::mmap(nullptr, mapped_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (mapped == MAP_FAILED) throw std::bad_alloc();
            mapped_ = mapped;
            const uintptr_t aligned =
                (uintptr_t(mapped) + kHugePageBytes - 1) & ~uintptr_t(kHugePageBytes - 1);
            ::madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);
            slots_ = reinterpret_cast<WordSlot*>(aligned);
            return;
        }
#endif
        slots_ = static_cast<WordSlot*>(std::calloc(count, sizeof(WordSlot)));
        if (slots_ == nullptr) throw std::bad_alloc();
    }
    SlotBuffer(SlotBuffer&& other) noexcept { swap(other); }
    SlotBuffer& operator=(SlotBuffer&& other) noexcept {
        swap(other);
        return *this;
    }
    SlotBuffer(const SlotBuffer&) = delete;
    SlotBuffer& operator=(const SlotBuffer&) = delete;
    ~SlotBuffer() {
#if defined(MADV_HUGEPAGE)
        if (mapped_ != nullptr) {
            ::munmap(mapped_, mapped_bytes_);
            return;
        }
#endif
        std::free(slots_);
    }

    WordSlot& operator[](size_t index) { return slots_[index]; }
    const WordSlot& operator[](size_t index) const { return slots_[index]; }
    size_t size() const { return count_; }

private:
    static constexpr size_t kHugePageBytes = size_t(2) << 20;

    void swap(SlotBuffer& other) noexcept {
        std::swap(slots_, other.slots_);
        std::swap(count_, other.count_);
        std::swap(mapped_, other.mapped_);
        std::swap(mapped_bytes_, other.mapped_bytes_);
    }

    WordSlot* slots_ = nullptr;
    size_t count_ = 0;
    void* mapped_ = nullptr;
    size_t mapped_bytes_ = 0;
};

// Tables are cut into partitions by the hash's top bits so that merging runs one partition per task.
constexpr unsigned kPartitionBits = 6;
constexpr size_t kPartitions = size_t(1) << kPartitionBits;

inline size_t partition_of(uint32_t check) { return check >> (32 - kPartitionBits); }

// Open addressing with linear probing, at most 70% full. A word's home slot is the top bits of its
// hash, so slots are in hash order up to probing displacement: a partition is a contiguous slot
// range in every table, and growing reinserts in order. Probing runs into spare slots past the
// last home slot instead of wrapping around (and grows the table in the unlikely case it runs out).
class WordTable {
public:
    WordTable() : WordTable(kInitialBits) {}

    void prefetch_slot(uint64_t hash) const { prefetch_for_write(&slots_[home(check_of(hash))]); }

    // Adds one occurrence of each of `keys` (the load check runs once for the batch); a new long
    // word's bytes are copied into `arena`.
    void add_each_once(const WordKey* keys, size_t count, Arena& arena) {
        while (10 * (size_ + count) > 7 * home_slots()) grow();
        for (size_t i = 0; i < count; ++i) {
            while (!try_add(keys[i], 1, arena)) grow();
        }
    }

    size_t size() const { return size_; }

    // Calls `visit(slot)` for each word whose hash is in `partition`.
    template <typename Visit>
    void for_each_in_partition(size_t partition, Visit&& visit) const {
        // Home slots of the partition are [first, last); words displaced past `last` sit in the
        // occupied run that starts there.
        const size_t first = (partition << bits_) >> kPartitionBits;
        const size_t last = ((partition + 1) << bits_) >> kPartitionBits;
        for (size_t index = first; index < slots_.size(); ++index) {
            const WordSlot& slot = slots_[index];
            if (slot.count == 0) {
                if (index >= last) break;
                continue;
            }
            if (partition_of(slot.check) == partition) visit(slot);
        }
    }

private:
    static constexpr unsigned kInitialBits = 4;
    static constexpr size_t kSpareSlots = 1024;

    explicit WordTable(unsigned bits) : bits_(bits), slots_((size_t(1) << bits) + kSpareSlots) {}

    size_t home_slots() const { return size_t(1) << bits_; }
    size_t home(uint32_t check) const { return size_t(check >> (32 - bits_)); }

    bool try_add(const WordKey& key, int64_t count, Arena& arena) {
        // Slot writes may alias the size (both are 64-bit integers): read it once.
        const size_t num_slots = slots_.size();
        for (size_t index = home(check_of(key.hash)); index < num_slots; ++index) {
            WordSlot& slot = slots_[index];
            if (slot.count == 0) {
                slot.check = check_of(key.hash);
                slot.length = saturated_length(key.length);
                slot.count = count;
                if (key.length <= kInlineBytes) {
                    slot.packed[0] = key.packed[0];
                    slot.packed[1] = key.packed[1];
                } else {
                    slot.long_word.data = arena.store(key.data, key.length);
                    slot.long_word.length = key.length;
                }
                ++size_;
                return true;
            }
            if (same_word(slot, key)) {
                slot.count += count;
                return true;
            }
        }
        return false;
    }

    void grow() {
        // The slot index is taken from the 32-bit check, so 2^32 home slots (128 GiB) is the limit.
        if (bits_ >= 32) throw std::length_error("word table too large");
        WordTable bigger(bits_ + 1);
        for (size_t index = 0; index < slots_.size(); ++index) {
            const WordSlot& slot = slots_[index];
            if (slot.count != 0) bigger.insert_new(slot);
        }
        bits_ = bigger.bits_;
        slots_ = std::move(bigger.slots_);
    }

    void insert_new(const WordSlot& slot) {
        for (size_t index = home(slot.check); index < slots_.size(); ++index) {
            if (slots_[index].count == 0) {
                slots_[index] = slot;
                ++size_;
                return;
            }
        }
        grow();
        insert_new(slot);
    }

    unsigned bits_;
    SlotBuffer slots_;
    size_t size_ = 0;
};

// One thread's counts. Words are queued a batch at a time and go through two stages: when a batch
// is full its keys are made and their slots prefetched, and they are looked up when the next batch
// is full, so the cache misses of a batch overlap each other and the scanning of the next batch.
// Queuing is a couple of stores, cheap enough to inline into the scanner's visitor.
// Aligned so that two threads' hot fields never share a cache line.
struct alignas(64) ThreadCounts {
    static constexpr size_t kBatch = 32;

    Arena arena;
    WordTable table;
    const char* queued_data[kBatch];
    size_t queued_length[kBatch];
    size_t num_queued = 0;
    WordKey prefetched[kBatch];
    size_t num_prefetched = 0;
    const char* readable_end = nullptr;  // end of the chunk being counted

    void add(const char* word, size_t length) {
        queued_data[num_queued] = word;
        queued_length[num_queued] = length;
        if (++num_queued == kBatch) advance();
    }

    // Must run before the queued words' bytes go away (at the end of a chunk).
    void flush() {
        advance();
        table.add_each_once(prefetched, num_prefetched, arena);
        num_prefetched = 0;
    }

private:
    void advance() {
        table.add_each_once(prefetched, num_prefetched, arena);
        for (size_t i = 0; i < num_queued; ++i) {
            prefetched[i] = make_key(queued_data[i], queued_length[i], readable_end);
            table.prefetch_slot(prefetched[i].hash);
        }
        num_prefetched = num_queued;
        num_queued = 0;
    }
};

// ---------------------------------------------------------------------------------------------
// Input

// Read-only view of a whole file: memory-mapped where possible, so a 12 GB corpus costs no heap.
class FileView {
public:
    explicit FileView(const std::string& path) {
#if defined(_WIN32)
        std::ifstream file(path, std::ios::binary);
        if (!file) throw std::ios_base::failure("cannot open " + path);
        contents_.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
        data_ = contents_.data();
        size_ = contents_.size();
#else
        const int fd = ::open(path.c_str(), O_RDONLY);
        if (fd < 0) fail("cannot open", path);
        struct stat info;
        if (::fstat(fd, &info) != 0) {
            const int error = errno;
            ::close(fd);
            errno = error;
            fail("cannot stat", path);
        }
        if (!S_ISREG(info.st_mode)) {
            ::close(fd);
            throw std::ios_base::failure("not a regular file: " + path);
        }
        size_ = size_t(info.st_size);
        if (size_ > 0) {
            void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
            if (mapped == MAP_FAILED) {
                const int error = errno;
                ::close(fd);
                errno = error;
                fail("cannot memory-map", path);
            }
            mapped_ = mapped;
            data_ = static_cast<const char*>(mapped);
        }
        ::close(fd);  // the mapping stays valid
#endif
    }

    FileView(const FileView&) = delete;
    FileView& operator=(const FileView&) = delete;

    ~FileView() {
#if !defined(_WIN32)
        if (mapped_ != nullptr) ::munmap(mapped_, size_);
#endif
    }

    std::string_view view() const { return {data_, size_}; }

    // Perf/memory: drops the resident pages wholly inside [begin, begin + length) from this process.
    // Mapped file pages count in the process's RSS, so without this a 12 GB corpus would show a
    // 12 GB peak; the page cache keeps them, and the mapping is private and never written, so a later
    // read (a neighbouring chunk's thread) refaults the same bytes.
    void release(const char* begin, size_t length) const {
#if !defined(_WIN32)
        const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
        const uintptr_t first = (uintptr_t(begin) + page - 1) / page * page;
        const uintptr_t last = (uintptr_t(begin) + length) / page * page;
        if (mapped_ != nullptr && first < last) {
            ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
        }
#else
        (void)begin;
        (void)length;
#endif
    }

private:
    [[noreturn]] static void fail(const char* what, const std::string& path) {
        throw std::ios_base::failure(std::string(what) + " " + path + ": " + std::strerror(errno));
    }

    const char* data_ = "";
    size_t size_ = 0;
#if defined(_WIN32)
    std::string contents_;
#else
    void* mapped_ = nullptr;
#endif
};

// ---------------------------------------------------------------------------------------------
// Chunk boundaries

constexpr size_t kMaxSpecialTokenWindow = size_t(1) << 20;
constexpr size_t kParallelBoundaryBytes = size_t(64) << 20;

// Whether the character ending just before `p` (0 < p) is complete and not whitespace. ASCII is
// one byte; a multi-byte character is decoded back from its lead byte.
bool non_space_ends_before(std::string_view text, size_t p) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
    if (bytes[p - 1] < 0x80) return detail::kAscii.classes[bytes[p - 1]] != unicode_tables::kSpace;
    size_t lead = p - 1;
    while (lead > 0 && p - lead < 4 && detail::is_continuation(bytes[lead])) --lead;
    uint8_t cls;
    return detail::read_multibyte(bytes + lead, bytes + p, cls) == p - lead && cls != unicode_tables::kSpace;
}

// First start of a special token in [from, limit) that no other occurrence spans.
size_t find_special_token_cut(std::string_view text, const SpecialTokens& special, size_t from,
                              size_t limit) {
    size_t best = std::string_view::npos;
    for (const std::string& token : special.tokens()) {
        const std::string_view searched = text.substr(0, std::min(text.size(), limit + token.size() - 1));
        for (size_t found = searched.find(token, from); found < best;
             found = searched.find(token, found + 1)) {
            if (!special.spans(text, found)) {
                best = found;
                break;
            }
        }
    }
    return best;
}

// First p in [from, limit) with text[p] in {' ', '\n'} after a non-space character, not inside a
// special token. No GPT-2 alternative matches whitespace after a non-space, so the word before p
// ends at p; the whitespace run starts a new word, and `(?!\S)` only looks forward from inside it.
// An ASCII byte never lies inside a multi-byte character.
size_t find_whitespace_cut(std::string_view text, const SpecialTokens& special, size_t from, size_t limit) {
    for (size_t p = std::max<size_t>(from, 1); p < limit; ++p) {
        const char byte = text[p];
        if ((byte == ' ' || byte == '\n') && non_space_ends_before(text, p) && !special.spans(text, p)) {
            return p;
        }
    }
    return std::string_view::npos;
}

// The cut for the target offset `from`: a special token within `window`, else whitespace within
// `reach`; npos when there is neither (the chunk then simply grows).
size_t next_cut(std::string_view text, const SpecialTokens& special, size_t from, size_t window,
                size_t reach) {
    if (!special.empty()) {
        const size_t cut = find_special_token_cut(text, special, from, std::min(text.size(), from + window));
        if (cut != std::string_view::npos) return cut;
    }
    return find_whitespace_cut(text, special, from, std::min(text.size(), from + reach));
}

size_t default_chunk_bytes(size_t text_size, int threads) {
    // Several chunks per thread balance uneven text; bounded so tables stay warm and startup is short.
    const size_t per_chunk = text_size / (size_t(std::max(threads, 1)) * 8) + 1;
    return std::clamp<size_t>(per_chunk, size_t(1) << 20, size_t(64) << 20);
}

// ---------------------------------------------------------------------------------------------
// Counting

void count_chunk(std::string_view chunk, size_t chunk_offset, const SpecialTokens& special,
                 ThreadCounts& counts, std::atomic<size_t>& first_invalid) {
    size_t invalid = kValidUtf8;
    counts.readable_end = chunk.data() + chunk.size();
    special.for_each_piece(chunk, [&](size_t begin, size_t end) {
        if (invalid != kValidUtf8) return;
        const char* const piece = chunk.data() + begin;
        const size_t bad = for_each_pretoken(piece, end - begin, [&](size_t word_begin, size_t word_end) {
            counts.add(piece + word_begin, word_end - word_begin);
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
    return a.check != b.check ? a.check < b.check : a.view() < b.view();
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
    parallel_for(kPartitions, threads, [&](size_t partition) {
        std::vector<WordSlot>& words = partitions[partition];
        std::vector<size_t> run_starts;
        for (const ThreadCounts& counts : per_thread) {
            run_starts.push_back(words.size());
            counts.table.for_each_in_partition(partition,
                                               [&](const WordSlot& slot) { words.push_back(slot); });
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
    });

    size_t total_words = 0;
    size_t total_bytes = 0;
    for (const auto& words : partitions) {
        total_words += words.size();
        for (const WordSlot& word : words) total_bytes += word.size();
    }
    WordCounts result;
    result.reserve(total_words, total_bytes);
    for (const auto& words : partitions) {
        for (const WordSlot& word : words) result.add(word.bytes(), word.size(), word.count);
    }
    return result;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Public API

SpecialTokens::SpecialTokens(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {
    tokens_.erase(std::remove(tokens_.begin(), tokens_.end(), std::string()), tokens_.end());
    // Longest first is what matters; equal-length tokens cannot both match at one place, so among
    // them any fixed order will do.
    std::sort(tokens_.begin(), tokens_.end(), [](const std::string& a, const std::string& b) {
        return a.size() != b.size() ? a.size() > b.size() : a < b;
    });
    tokens_.erase(std::unique(tokens_.begin(), tokens_.end()), tokens_.end());
}

bool SpecialTokens::spans(std::string_view text, size_t position) const {
    for (const std::string& token : tokens_) {
        const size_t length = token.size();
        const size_t first = position >= length - 1 ? position - (length - 1) : 0;
        for (size_t start = first; start < position; ++start) {
            if (start + length <= text.size() && text.compare(start, length, token) == 0) return true;
        }
    }
    return false;
}

std::vector<size_t> chunk_boundaries(std::string_view text, const SpecialTokens& special_tokens,
                                     size_t chunk_bytes, int num_threads) {
    chunk_bytes = std::max<size_t>(chunk_bytes, 1);
    const size_t targets = text.size() / chunk_bytes;  // cuts wanted at chunk_bytes * (1..targets)
    const size_t window = std::min(chunk_bytes, kMaxSpecialTokenWindow);
    std::vector<size_t> cuts(targets);
    // Each cut depends only on its target, so they can be found in parallel and are schedule-free;
    // finding one is quick (the text near the target), so only big inputs are worth a thread team.
    const int threads = text.size() < kParallelBoundaryBytes ? 1
                        : num_threads > 0                    ? num_threads
                                                             : omp_default_threads();
    parallel_for(targets, threads, [&](size_t index) {
        cuts[index] = next_cut(text, special_tokens, (index + 1) * chunk_bytes, window, chunk_bytes);
    });
    std::vector<size_t> boundaries{0};
    for (size_t cut : cuts) {
        // Skips targets without a cut, and cuts behind the previous one (a special token preferred
        // over nearer whitespace can put a later target's cut first).
        if (cut > boundaries.back() && cut < text.size()) boundaries.push_back(cut);
    }
    if (text.size() > 0) boundaries.push_back(text.size());
    return boundaries;
}

namespace {

// Counting over `text`; `file`, when given, is the mapping `text` lies in, whose pages are released
// chunk by chunk as they are counted.
WordCounts count_words_impl(std::string_view text, const std::vector<std::string>& special_tokens,
                            const CountOptions& options, CountReport* report, const FileView* file) {
    const int threads = options.num_threads > 0 ? options.num_threads : omp_default_threads();
    const SpecialTokens special(special_tokens);
    const size_t chunk_bytes = options.chunk_bytes > 0 ? options.chunk_bytes
                                                       : default_chunk_bytes(text.size(), threads);
    const std::vector<size_t> boundaries = chunk_boundaries(text, special, chunk_bytes, threads);
    const size_t num_chunks = boundaries.size() - 1;

    std::vector<ThreadCounts> per_thread(size_t(std::max(threads, 1)));
    std::vector<char> worked(per_thread.size(), 0);  // one byte per thread: no shared counter
    std::atomic<size_t> first_invalid{kValidUtf8};
    std::atomic<size_t> bytes_done{0};
    // The calling thread is thread 0 of the team; only it reports, so the callback (Python's, behind
    // the binding) never runs on a thread of OpenMP's.
    const int reporting_thread = omp_thread_id();
    parallel_for(num_chunks, threads, [&](size_t chunk) {
        const size_t begin = boundaries[chunk];
        // A chunk past a known error cannot report a smaller offset.
        if (begin >= first_invalid.load(std::memory_order_relaxed)) return;
        const size_t thread = size_t(omp_thread_id());
        worked[thread] = 1;
        const std::string_view piece = text.substr(begin, boundaries[chunk + 1] - begin);
        count_chunk(piece, begin, special, per_thread[thread], first_invalid);
        if (file != nullptr) file->release(piece.data(), piece.size());
        const size_t done = bytes_done.fetch_add(piece.size()) + piece.size();
        if (options.progress != nullptr && omp_thread_id() == reporting_thread) {
            options.progress(options.progress_context, done);
        }
    });
    if (first_invalid.load() != kValidUtf8) throw InvalidUtf8Error(first_invalid.load());
    // The last report is the whole: the calling thread may not have counted the last chunks.
    if (options.progress != nullptr) options.progress(options.progress_context, bytes_done.load());
    if (report != nullptr) {
        report->chunks = num_chunks;
        report->threads_used = int(std::count(worked.begin(), worked.end(), char(1)));
    }
    return merge_counts(per_thread, threads);
}

}  // namespace

WordCounts count_words(std::string_view text, const std::vector<std::string>& special_tokens,
                       const CountOptions& options, CountReport* report) {
    return count_words_impl(text, special_tokens, options, report, nullptr);
}

WordCounts count_words_in_file(const std::string& path, const std::vector<std::string>& special_tokens,
                               const CountOptions& options, CountReport* report) {
    const FileView file(path);
    return count_words_impl(file.view(), special_tokens, options, report, &file);
}

}  // namespace bpe
