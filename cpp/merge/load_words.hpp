// Building the words and their pairs: every word once as its bytes, then its pairs counted and listed,
// or each word first encoded by a base's merges (start_from).
// Part of bpe_merge.cpp, its only includer: an unnamed namespace, as the loop was in one file.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "kit/bits.hpp"
#include "kit/omp_shim.hpp"
#include "merge/trainer.hpp"

namespace bpe {
namespace {

using namespace merge_tables;

// Fewer words than this per thread are counted on fewer threads: a team costs more than it saves.
constexpr size_t kWordsPerThread = 1 << 12;

// Encodes a word in place by ranked merges (Trainer::load_encoded_words): a linked list of its symbols
// and a min-heap of its ranked pairs by (rank, position), so the leftmost occurrence of the pair
// ranked first merges next; an entry whose pair has changed since is skipped. O(n log n) in the
// word's length, a pre-token of megabytes included. Base merge k makes token 256 + k.
class WordEncoder {
public:
    template <typename Symbol>
    uint32_t encode(Symbol* symbols, uint32_t length, const PairIdMap& ranks) {
        if (length < 2) return length;
        next_.resize(length);
        previous_.resize(length);
        gone_.assign(length, 0);
        heap_.clear();
        const auto rank_of = [&](uint32_t at, uint32_t after) {
            return ranks.find(pair_key(TokenId(symbols[at]), TokenId(symbols[after])));
        };
        const auto push = [&](uint32_t at, uint32_t after) {
            const PairId rank = rank_of(at, after);
            if (rank == PairIdMap::kMissing) return;
            heap_.push_back({rank, at});
            std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
        };
        for (uint32_t at = 0; at < length; ++at) {
            next_[at] = at + 1;  // `length`: none
            previous_[at] = at - 1;  // UINT32_MAX: none
        }
        for (uint32_t at = 0; at + 1 < length; ++at) push(at, at + 1);
        while (!heap_.empty()) {
            std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
            const auto [rank, at] = heap_.back();
            heap_.pop_back();
            const uint32_t after = gone_[at] ? length : next_[at];
            if (after >= length || rank_of(at, after) != rank) continue;  // stale
            symbols[at] = Symbol(kFirstMergedToken + uint32_t(rank));
            gone_[after] = 1;
            next_[at] = next_[after];
            if (next_[at] < length) previous_[next_[at]] = at;
            if (previous_[at] != UINT32_MAX) push(previous_[at], at);
            if (next_[at] < length) push(at, next_[at]);
        }
        uint32_t written = 0;
        for (uint32_t at = 0; at < length; at = next_[at]) symbols[written++] = symbols[at];  // 0 never goes
        return written;
    }

private:
    std::vector<uint32_t> next_, previous_;
    std::vector<uint8_t> gone_;
    std::vector<std::pair<PairId, uint32_t>> heap_;
};

// The pairs of bytes some token of a base holds side by side: merging l and r puts l's last byte
// beside r's first, and every such pair of a token came in by one merge. Between two bytes that no
// token holds side by side no ranked pair ever spans, so a word's encoding is its pieces' encodings,
// cut there (SuperBPE's lines cut between words, as stage 1's tokens never end in a letter before a space).
class ByteJoins {
public:
    explicit ByteJoins(const std::vector<Merge>& base) : joined_(size_t(1) << 16, 0) {
        std::vector<uint8_t> first(256), last(256);
        for (uint32_t byte = 0; byte < 256; ++byte) first[byte] = last[byte] = uint8_t(byte);
        for (const Merge& merge : base) {
            if (merge.left >= first.size() || merge.right >= first.size()) {
                throw std::invalid_argument("train_merges: a replayed merge names a token made after it");
            }
            joined_[size_t(last[merge.left]) << 8 | first[merge.right]] = 1;
            first.push_back(first[merge.left]);
            last.push_back(last[merge.right]);
        }
    }
    bool joined(uint32_t left_byte, uint32_t right_byte) const { return joined_[left_byte << 8 | right_byte]; }

private:
    std::vector<uint8_t> joined_;
};

// A word of bytes encoded by a base's merges piece by piece (ByteJoins' cuts), each short piece's
// encoding kept for its next occurrence: pieces repeat as words do, where whole lines do not.
template <typename Symbol>
class PieceEncoder {
public:
    // Appends the word's tokens to `out`.
    void encode(const unsigned char* bytes, uint32_t length, std::vector<Symbol>& out, const PairIdMap& ranks,
                const ByteJoins& joins) {
        uint32_t start = 0;
        for (uint32_t at = 1; at <= length; ++at) {
            if (at < length && joins.joined(bytes[at - 1], bytes[at])) continue;
            encode_piece(bytes + start, at - start, out, ranks);
            start = at;
        }
    }

private:
    static constexpr uint32_t kLongestKept = 64;  // longer pieces are rare: encoded each time
    static constexpr size_t kMostKept = size_t(1) << 20;  // then the table starts over

    // A kept piece: its bytes and its tokens, each at an offset of its arena (key_length 0: empty).
    struct Slot {
        uint64_t hash = 0;
        uint32_t key_at = 0;
        uint32_t tokens_at = 0;
        uint8_t key_length = 0;
        uint8_t num_tokens = 0;
    };

    void encode_piece(const unsigned char* piece, uint32_t length, std::vector<Symbol>& out, const PairIdMap& ranks) {
        if (length == 1) {
            out.push_back(Symbol(piece[0]));
            return;
        }
        if (length > kLongestKept) {
            const size_t first = out.size();
            out.insert(out.end(), piece, piece + length);
            out.resize(first + words_.encode(out.data() + first, length, ranks));
            return;
        }
        const char* key = reinterpret_cast<const char*>(piece);
        const uint64_t hash = hash_bytes(key, length);
        if (2 * (num_kept_ + 1) > slots_.size()) grow();
        const size_t mask = slots_.size() - 1;
        for (size_t at = hash & mask;; at = (at + 1) & mask) {
            Slot& slot = slots_[at];
            if (slot.key_length == 0) {  // new: encoded once, kept
                Symbol tokens[kLongestKept];
                std::copy(piece, piece + length, tokens);
                const uint32_t num_tokens = words_.encode(tokens, length, ranks);
                slot = {hash, uint32_t(key_bytes_.size()), uint32_t(kept_tokens_.size()), uint8_t(length),
                        uint8_t(num_tokens)};
                key_bytes_.insert(key_bytes_.end(), key, key + length);
                kept_tokens_.insert(kept_tokens_.end(), tokens, tokens + num_tokens);
                ++num_kept_;
                out.insert(out.end(), tokens, tokens + num_tokens);
                return;
            }
            if (slot.hash == hash && slot.key_length == length &&
                std::memcmp(key_bytes_.data() + slot.key_at, key, length) == 0) {
                const Symbol* tokens = kept_tokens_.data() + slot.tokens_at;
                out.insert(out.end(), tokens, tokens + slot.num_tokens);
                return;
            }
        }
    }

    // Twice the slots, the kept pieces placed again; past kMostKept pieces, an empty table.
    void grow() {
        if (num_kept_ >= kMostKept || slots_.empty()) {
            slots_.assign(size_t(1) << 16, Slot{});
            key_bytes_.clear();
            kept_tokens_.clear();
            num_kept_ = 0;
            return;
        }
        std::vector<Slot> old(slots_.size() * 2);
        old.swap(slots_);
        const size_t mask = slots_.size() - 1;
        for (const Slot& slot : old) {
            if (slot.key_length == 0) continue;
            size_t at = slot.hash & mask;
            while (slots_[at].key_length != 0) at = (at + 1) & mask;
            slots_[at] = slot;
        }
    }

    WordEncoder words_;
    std::vector<Slot> slots_;
    std::vector<char> key_bytes_;
    std::vector<Symbol> kept_tokens_;
    size_t num_kept_ = 0;
};

// Words of one byte, or seen 0 times, hold no pair and are dropped; the rest become symbols.
// The checks every CountedWords passes before it is loaded.
inline void check_counted_words(const CountedWords& words) {
    const size_t num_words = words.counts.size();
    if (words.offsets.size() != num_words + 1 || words.offsets.front() != 0 ||
        words.offsets.back() != words.bytes.size()) {
        throw std::invalid_argument(
            "CountedWords: offsets must hold size() + 1 entries, from 0 to bytes.size()");
    }
    for (size_t word = 0; word < num_words; ++word) {
        const uint64_t begin = words.offsets[word];
        const uint64_t end = words.offsets[word + 1];
        if (end < begin) throw std::invalid_argument("CountedWords: offsets must not decrease");
        if (words.counts[word] < 0) throw std::invalid_argument("CountedWords: counts must not be negative");
        if (end - begin > UINT32_MAX) throw std::invalid_argument("CountedWords: a word longer than 4 GiB");
    }
}

template <typename Symbol>
inline void Trainer<Symbol>::load_words(const CountedWords& words, int num_threads) {
    check_counted_words(words);
    const size_t num_words = words.counts.size();
    const auto kept = [&](size_t word) {
        return words.offsets[word + 1] - words.offsets[word] >= 2 && words.counts[word] != 0;
    };
    // Where each kept word goes, on one thread (cheap); then its symbols, on the threads.
    std::vector<size_t> sources;  // the kept words' indices in `words`
    size_t units = 0;
    for (size_t word = 0; word < num_words; ++word) {
        if (!kept(word)) continue;
        if (units > static_cast<size_t>(INT32_MAX)) break;  // too large: thrown below
        sources.push_back(word);
        word_ids_.push_back(WordId(units));
        units += word_units(uint32_t(words.offsets[word + 1] - words.offsets[word]));
    }
    if (units > static_cast<size_t>(INT32_MAX)) {
        throw std::invalid_argument("CountedWords: more than 16 GiB of distinct words");
    }
    arena_ = HugePageArray<uint64_t>(units);
    const size_t num_kept = sources.size();
    const size_t threads = size_t(std::clamp<int64_t>(num_threads, 1, int64_t(num_kept / kWordsPerThread) + 1));
    observed(threads, [&] {
        parallel_for(threads, int(threads), [&](size_t share) {
            for (size_t index = num_kept * share / threads; index < num_kept * (share + 1) / threads; ++index) {
                const size_t word = sources[index];
                const uint64_t begin = words.offsets[word];
                const auto length = uint32_t(words.offsets[word + 1] - begin);
                header(word_ids_[index]) = {words.counts[word], length, length};
                Symbol* symbols = this->symbols(word_ids_[index]);
                for (uint32_t at = 0; at < length; ++at) {
                    symbols[at] = static_cast<unsigned char>(words.bytes[begin + at]);
                }
            }
        });
    });
}

// Every pair of the unmerged words is a pair of bytes, so a table of all 65,536 replaces the
// hash map here, and the words can be split between threads: each counts its share of the
// words into a table of its own, then, once every list's length and each thread's offset in it
// are known, writes its word ids into place. The pairs, their counts and lists come out the
// same for every thread count (lists in word order).
// Perf: what a visit of a pair touches is one 16-byte Tally, one cache line, where three
// arrays (count, last word, listed) took three.
template <typename Symbol>
inline void Trainer<Symbol>::count_initial_pairs(int num_threads) {
    constexpr size_t kBytePairs = 1 << 16;
    const size_t num_words = word_ids_.size();
    // A team that did not get its cores while loading the words counts them on one thread.
    if (parallel_choice_.starved()) num_threads = 1;
    const size_t threads = size_t(std::clamp<int64_t>(num_threads, 1, int64_t(num_words / kWordsPerThread) + 1));
    struct Tally {  // one byte pair in one thread's share of the words
        union {
            int64_t count;   // first pass: its occurrences times their words' counts
            WordId* cursor;  // second pass: where its next word goes in its list
        };
        WordId last_word;  // the last word that listed it: a word lists a pair once
        uint32_t listed;   // first pass: the words listing it; then this share's offset in its list
    };
    static_assert(sizeof(Tally) == 16, "a tally in one cache line");
    std::vector<std::vector<Tally>> tallies(threads);
    const auto first_word = [&](size_t share) { return num_words * share / threads; };
    observed(threads, [&] {
        parallel_for(threads, num_threads, [&](size_t share) {
            tallies[share].assign(kBytePairs, Tally{{0}, -1, 0});
            Tally* const tally = tallies[share].data();
            for_each_pair(first_word(share), first_word(share + 1),
                          [&](TokenId left, TokenId right, int64_t count, WordId word) {
                              Tally& pair = tally[size_t(left) << 8 | size_t(right)];
                              pair.count += count;
                              if (pair.last_word != word) {
                                  pair.last_word = word;
                                  ++pair.listed;
                              }
                          });
        });
    });
    // The tallies summed over the threads, each thread a slice of the byte pairs; then the
    // pairs created in byte-pair order on one thread (at most 65,536).
    std::vector<int64_t> counts(kBytePairs);
    std::vector<uint32_t> lengths(kBytePairs);
    const auto slice = [&](size_t part) { return kBytePairs * part / threads; };
    parallel_for(threads, num_threads, [&](size_t part) {
        for (size_t byte_pair = slice(part); byte_pair < slice(part + 1); ++byte_pair) {
            int64_t count = 0;
            uint32_t listed = 0;
            for (std::vector<Tally>& share : tallies) {
                Tally& pair = share[byte_pair];
                count += pair.count;
                const uint32_t offset = listed;
                listed += pair.listed;
                pair.listed = offset;
            }
            counts[byte_pair] = count;
            lengths[byte_pair] = listed;
        }
    });
    std::vector<WordId*> lists(kBytePairs, nullptr);
    for (size_t byte_pair = 0; byte_pair < kBytePairs; ++byte_pair) {
        if (lengths[byte_pair] == 0) continue;
        PairRecord& record = pairs_[pair_id(TokenId(byte_pair >> 8), TokenId(byte_pair & 0xFF))];
        record.count = counts[byte_pair];
        lists[byte_pair] = record.resize_words(lengths[byte_pair], workers_[0].pool);
    }
    parallel_for(threads, num_threads, [&](size_t share) {
        Tally* const tally = tallies[share].data();
        for (size_t byte_pair = 0; byte_pair < kBytePairs; ++byte_pair) {
            tally[byte_pair].cursor = lists[byte_pair] == nullptr ? nullptr : lists[byte_pair] + tally[byte_pair].listed;
            tally[byte_pair].last_word = -1;
        }
        for_each_pair(first_word(share), first_word(share + 1),
                      [&](TokenId left, TokenId right, int64_t, WordId word) {
                          Tally& pair = tally[size_t(left) << 8 | size_t(right)];
                          if (pair.last_word != word) {
                              pair.last_word = word;
                              *pair.cursor++ = word;
                          }
                      });
    });
}

// Each word as its encoding by a base's merges (bpe_merge.hpp, `replay`): the pair ranked first
// merged at every occurrence from the left, until no ranked pair is left, as the tokenizer
// encodes; the base's tokens join the token table first. The words are encoded straight from
// their bytes, each thread into a buffer of its own, and only then laid out, at their encoded
// length: the caller's words (`release`) are freed before the arena is made, so the bytes and
// an arena of two bytes a byte never live at once (SuperBPE's lines shrink to a token per three or
// four bytes). Then every pair is counted from the words (no longer pairs of bytes). Replaying
// the merges on the pair tables instead took up to 1.5 times as long as training as many merges:
// no pair can be pruned while any may be replayed.
template <typename Symbol>
inline void Trainer<Symbol>::load_encoded_words(const CountedWords& words, CountedWords* release,
                                                const std::vector<Merge>& base, int num_threads) {
    check_counted_words(words);
    PairIdMap ranks(base.size());
    for (const Merge& merge : base) {
        if (merge.left >= tokens_.size() || merge.right >= tokens_.size()) {
            throw std::invalid_argument("train_merges: a replayed merge names a token made after it");
        }
        const auto rank = PairId(tokens_.size() - kFirstMergedToken);
        ranks.find_or_insert(pair_key(TokenId(merge.left), TokenId(merge.right)), rank);
        tokens_.add_merge(TokenId(merge.left), TokenId(merge.right));
        if (!token_lengths_.empty()) {
            token_lengths_.push_back(token_lengths_[merge.left] + token_lengths_[merge.right]);
        }
        if (!token_shapes_.empty()) {
            token_shapes_.push_back(TokenShape::joined(token_shapes_[merge.left], token_shapes_[merge.right]));
        }
    }
    const ByteJoins joins(base);
    const size_t num_words = words.counts.size();
    const size_t threads = size_t(std::clamp<int64_t>(num_threads, 1, int64_t(num_words / kWordsPerThread) + 1));
    struct Share {
        std::vector<Symbol> symbols;   // its words' tokens, back to back
        std::vector<uint32_t> lengths;  // each of its words' tokens (0: a word left out)
    };
    std::vector<Share> shares(threads);
    const auto first_word = [&](size_t share) { return num_words * share / threads; };
    observed(threads, [&] {
        parallel_for(threads, int(threads), [&](size_t share) {
            PieceEncoder<Symbol> encoder;
            Share& mine = shares[share];
            for (size_t word = first_word(share); word < first_word(share + 1); ++word) {
                const uint64_t begin = words.offsets[word];
                const auto length = uint32_t(words.offsets[word + 1] - begin);
                if (length < 2 || words.counts[word] == 0) {  // no pair: left out
                    mine.lengths.push_back(0);
                    continue;
                }
                const size_t before = mine.symbols.size();
                const auto* bytes = reinterpret_cast<const unsigned char*>(words.bytes.data() + begin);
                encoder.encode(bytes, length, mine.symbols, ranks, joins);
                auto encoded = uint32_t(mine.symbols.size() - before);
                if (encoded < 2) {  // one token: no pair left, nothing to keep
                    mine.symbols.resize(before);
                    encoded = 0;
                }
                mine.lengths.push_back(encoded);
            }
        });
    });
    // Where each kept word goes, on one thread (cheap); the counts are copied out before the
    // caller's words go.
    std::vector<int64_t> counts;
    std::vector<size_t> first_kept(threads + 1, 0);
    size_t units = 0;
    for (size_t share = 0; share < threads; ++share) {
        first_kept[share] = word_ids_.size();
        for (size_t index = 0; index < shares[share].lengths.size(); ++index) {
            const uint32_t length = shares[share].lengths[index];
            if (length == 0) continue;
            if (units > static_cast<size_t>(INT32_MAX)) {
                throw std::invalid_argument("CountedWords: more than 16 GiB of distinct words");
            }
            word_ids_.push_back(WordId(units));
            counts.push_back(words.counts[first_word(share) + index]);
            units += word_units(length);
        }
    }
    first_kept[threads] = word_ids_.size();
    if (units > static_cast<size_t>(INT32_MAX)) {
        throw std::invalid_argument("CountedWords: more than 16 GiB of distinct words");
    }
    if (release != nullptr) *release = CountedWords();
    arena_ = HugePageArray<uint64_t>(units);
    parallel_for(threads, int(threads), [&](size_t share) {
        Share& mine = shares[share];
        const Symbol* from = mine.symbols.data();
        size_t kept = first_kept[share];
        for (const uint32_t length : mine.lengths) {
            if (length == 0) continue;
            header(word_ids_[kept]) = {counts[kept], length, length};
            std::copy(from, from + length, symbols(word_ids_[kept]));
            from += length;
            ++kept;
        }
        mine = Share();  // freed as soon as copied
    });
    recount_pairs();
}

}  // namespace
}  // namespace bpe
