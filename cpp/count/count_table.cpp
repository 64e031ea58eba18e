#include "count/count_table.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string_view>

#include "kit/bits.hpp"

namespace bpe {

namespace {

std::string_view word_at(const CountedWords& words, size_t index) {
    return std::string_view(words.bytes.data() + words.offsets[index],
                            static_cast<size_t>(words.offsets[index + 1] - words.offsets[index]));
}

// Element `index` of an array of T that may not be aligned for T (count files pack their arrays).
template <typename T>
T load(const void* array, size_t index) {
    T value;
    std::memcpy(&value, static_cast<const char*>(array) + index * sizeof(T), sizeof(T));
    return value;
}

template <typename T>
void store(void* array, size_t index, T value) {
    std::memcpy(static_cast<char*>(array) + index * sizeof(T), &value, sizeof(T));
}

// Distinct words of a growing table by open addressing over the canonical hash (the counter's):
// a word's home slot is the top bits of the hash, so words that arrive in about hash order (a
// counter's table, a slice of one) walk the slots in order instead of jumping around memory. A slot
// holds the hash's high half beside the word's index + 1 (0: empty), so a probe rarely reads a word
// it does not want; the full hashes are kept so that growing never hashes a word again.
class WordIndex {
  public:
    explicit WordIndex(size_t expected_words) {
        hashes_.reserve(expected_words);
        rebuild(expected_words * 2);
    }

    // A hint that `hash` will be looked up soon: its slot is fetched from memory meanwhile.
    void prefetch(uint64_t hash) const { bpe::prefetch(&slots_[home(hash)]); }

    // The index in `table` of `word` (whose canonical_word_hash is `hash`), appended with count 0
    // when new.
    size_t find_or_add(CountedWords& table, std::string_view word, uint64_t hash) {
        const uint64_t tag = hash & kTagBits;
        size_t slot = home(hash);
        for (;;) {
            const uint64_t entry = slots_[slot];
            if (entry == 0) break;
            const size_t index = static_cast<uint32_t>(entry) - 1;
            if ((entry & kTagBits) == tag && word_at(table, index) == word) return index;
            slot = (slot + 1) & mask_;
        }
        const size_t index = table.size();
        if (index + 1 >= std::numeric_limits<uint32_t>::max()) {
            throw std::overflow_error("word-count table: more than 4 billion distinct words");
        }
        table.add(word.data(), word.size(), 0);
        hashes_.push_back(hash);
        slots_[slot] = tag | (index + 1);
        if (2 * hashes_.size() > slots_.size()) rebuild(slots_.size() * 2);
        return index;
    }

  private:
    static constexpr uint64_t kTagBits = ~uint64_t{0} << 32;

    size_t home(uint64_t hash) const { return static_cast<size_t>(hash >> shift_); }

    void rebuild(size_t min_slots) {
        size_t size = 16;
        unsigned bits = 4;
        while (size < min_slots) size *= 2, ++bits;
        slots_.assign(size, 0);
        mask_ = size - 1;
        shift_ = 64 - bits;
        for (size_t index = 0; index < hashes_.size(); ++index) {
            size_t slot = home(hashes_[index]);
            while (slots_[slot] != 0) slot = (slot + 1) & mask_;
            slots_[slot] = (hashes_[index] & kTagBits) | (index + 1);
        }
    }

    std::vector<uint64_t> slots_;
    std::vector<uint64_t> hashes_;  // by word index
    size_t mask_ = 0;
    unsigned shift_ = 0;  // home slot = hash >> shift_
};

// The canonical hash of a table's word; the words lie back to back, so short ones hash from whole loads.
uint64_t hash_in_table(const CountedWords& words, size_t index) {
    return canonical_word_hash(word_at(words, index), words.bytes.data() + words.bytes.size());
}

// Words are hashed this many ahead of their lookup, their slots prefetched meanwhile.
constexpr size_t kLookAhead = 16;

}  // namespace

CountedWords add_word_counts(const std::vector<const CountedWords*>& tables) {
    size_t largest_words = 0, all_words = 0, all_bytes = 0;
    for (const CountedWords* table : tables) {
        largest_words = std::max(largest_words, table->size());
        all_words += table->size();
        all_bytes += table->bytes.size();
    }
    // The result's arrays never move (reserved pages that stay unused are never touched); the index
    // is cleared up front, so it starts at a guess and grows.
    CountedWords total;
    total.reserve(all_words, all_bytes);
    WordIndex index(std::min(all_words, largest_words + largest_words / 2));
    uint64_t hashes[kLookAhead];
    for (const CountedWords* table : tables) {
        const size_t size = table->size();
        for (size_t ahead = 0; ahead < std::min(size, kLookAhead); ++ahead) {
            hashes[ahead] = hash_in_table(*table, ahead);
            index.prefetch(hashes[ahead]);
        }
        for (size_t word = 0; word < size; ++word) {
            const uint64_t hash = hashes[word % kLookAhead];
            if (word + kLookAhead < size) {
                const uint64_t next = hash_in_table(*table, word + kLookAhead);
                hashes[word % kLookAhead] = next;
                index.prefetch(next);
            }
            const int64_t count = table->counts[word];
            if (count < 0) throw std::invalid_argument("word-count table: negative count");
            int64_t& sum = total.counts[index.find_or_add(total, word_at(*table, word), hash)];
            if (!add_without_overflow(sum, count)) {
                throw std::overflow_error("word-count table: a summed count does not fit in 64 bits");
            }
        }
    }
    return total;
}

size_t word_slice(std::string_view word, size_t num_slices) {
    return word_slice_of_hash(canonical_word_hash(word), num_slices);
}

std::vector<CountedWords> split_into_slices(const CountedWords& words, size_t num_slices) {
    if (num_slices == 0 || num_slices > std::numeric_limits<uint32_t>::max()) {
        throw std::invalid_argument("word-count table: the number of slices must be in [1, 2**32)");
    }
    // Two passes: every word's slice and the slices' sizes, then one copy into tables of exact size.
    std::vector<uint32_t> slice_of(words.size());
    std::vector<size_t> slice_words(num_slices, 0), slice_bytes(num_slices, 0);
    for (size_t index = 0; index < words.size(); ++index) {
        const std::string_view word = word_at(words, index);
        const size_t slice = word_slice(word, num_slices);
        slice_of[index] = static_cast<uint32_t>(slice);
        ++slice_words[slice];
        slice_bytes[slice] += word.size();
    }
    std::vector<CountedWords> slices(num_slices);
    std::vector<char*> next_byte(num_slices);
    for (size_t slice = 0; slice < num_slices; ++slice) {
        slices[slice].bytes.resize(slice_bytes[slice]);
        slices[slice].offsets.reserve(slice_words[slice] + 1);
        slices[slice].counts.reserve(slice_words[slice]);
        next_byte[slice] = slices[slice].bytes.data();
    }
    for (size_t index = 0; index < words.size(); ++index) {
        const std::string_view word = word_at(words, index);
        CountedWords& slice = slices[slice_of[index]];
        std::memcpy(next_byte[slice_of[index]], word.data(), word.size());
        next_byte[slice_of[index]] += word.size();
        slice.offsets.push_back(slice.offsets.back() + word.size());
        slice.counts.push_back(words.counts[index]);
    }
    return slices;
}

CountedWords concatenate_word_counts(const std::vector<const CountedWords*>& tables) {
    size_t num_words = 0, num_bytes = 0;
    for (const CountedWords* table : tables) {
        num_words += table->size();
        num_bytes += table->bytes.size();
    }
    CountedWords total;
    total.reserve(num_words, num_bytes);
    for (const CountedWords* table : tables) {
        const uint64_t base = total.bytes.size();
        total.bytes += table->bytes;
        for (size_t index = 1; index < table->offsets.size(); ++index) {
            total.offsets.push_back(base + table->offsets[index]);
        }
        total.counts.insert(total.counts.end(), table->counts.begin(), table->counts.end());
    }
    return total;
}

CountedWords sorted_by_bytes(const CountedWords& words) {
    std::vector<uint32_t> order(words.size());
    std::iota(order.begin(), order.end(), uint32_t{0});
    // std::string_view compares as unsigned bytes (char_traits<char>::compare is memcmp).
    std::sort(order.begin(), order.end(),
              [&](uint32_t a, uint32_t b) { return word_at(words, a) < word_at(words, b); });
    CountedWords sorted;
    sorted.reserve(words.size(), words.bytes.size());
    for (uint32_t index : order) {
        const std::string_view word = word_at(words, index);
        sorted.add(word.data(), word.size(), words.counts[index]);
    }
    return sorted;
}

size_t first_unordered_word(const CountedWords& words) {
    for (size_t index = 1; index < words.size(); ++index) {
        if (!(word_at(words, index - 1) < word_at(words, index))) return index;
    }
    return words.size();
}

void append_word_counts_from_arrays(CountedWords& words, const char* blob, size_t blob_size, const void* lengths,
                                    const void* counts, size_t num_words) {
    const auto length_at = [lengths](size_t index) { return load<uint32_t>(lengths, index); };
    uint64_t total_length = 0;
    for (size_t index = 0; index < num_words; ++index) total_length += length_at(index);
    if (total_length != blob_size) {
        throw std::invalid_argument("word-count arrays: the word lengths do not add up to the words' bytes");
    }
    const size_t first = words.size();
    uint64_t offset = words.bytes.size();
    words.bytes.append(blob, blob_size);
    words.offsets.resize(first + num_words + 1);
    words.counts.resize(first + num_words);
    for (size_t index = 0; index < num_words; ++index) {
        const uint64_t count = load<uint64_t>(counts, index);
        if (count == 0) throw std::invalid_argument("word-count arrays: a count is 0");
        if (count > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
            throw std::overflow_error("word-count arrays: a count does not fit in int64");
        }
        words.counts[first + index] = static_cast<int64_t>(count);
        offset += length_at(index);
        words.offsets[first + index + 1] = offset;
    }
}

CountedWords word_counts_from_arrays(const char* blob, size_t blob_size, const void* lengths,
                                   const void* counts, size_t num_words) {
    CountedWords words;
    append_word_counts_from_arrays(words, blob, blob_size, lengths, counts, num_words);
    return words;
}

void word_counts_to_arrays(const CountedWords& words, void* lengths, void* counts) {
    for (size_t index = 0; index < words.size(); ++index) {
        const uint64_t length = words.offsets[index + 1] - words.offsets[index];
        if (length > std::numeric_limits<uint32_t>::max()) {
            throw std::invalid_argument("word-count table: a word of 4 GiB or more");
        }
        if (words.counts[index] < 1) throw std::invalid_argument("word-count table: a count below 1");
        store(lengths, index, static_cast<uint32_t>(length));
        store(counts, index, static_cast<uint64_t>(words.counts[index]));
    }
}

}  // namespace bpe
