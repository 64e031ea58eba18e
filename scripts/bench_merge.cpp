// The merge loop alone (bpe::train_merges) on a count file, without Python.
//
// Build (from the repository root):
//   c++ -std=c++17 -O3 -fopenmp -Icpp scripts/bench_merge.cpp cpp/merge/*.cpp -o bench_merge
// Make the count file once (cs336-count-words, or python -m cs336_basics.count_cli):
//   python -m cs336_basics.count_cli corpus.txt -o counts.bin
// Run:
//   ./bench_merge counts.bin [vocab=32000] [threads=1] [repeats=1] [parallel_words=256] [tie_break=cs336]
// Prints, per repeat, the wall and CPU seconds of train_merges and how it used its threads (merges on
// them, falls back to one thread on a busy machine, returns), then the number of merges and a
// 64-bit FNV-1a digest of them (equal digests: equal merges). vocab counts 256 byte tokens and one
// special token, as the trainers do. `parallel_words` overrides the merge loop's threshold for
// rewriting a merge's words on the threads; `tie_break` is cs336, smallest-id or hf. Under `perf stat` or `valgrind --tool=callgrind` use
// repeats=1; reading the file is a small, fixed part. Built with -DBPE_MERGE_PROFILE, the loop also
// prints where its time went: loading, the initial pairs, merges on one thread and on the threads.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "merge/bpe_merge.hpp"

namespace {

double process_cpu_seconds() {
    timespec now{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
    return double(now.tv_sec) + 1e-9 * double(now.tv_nsec);
}

template <typename Value>
Value read_at(const std::string& data, size_t& offset) {
    if (offset + sizeof(Value) > data.size()) throw std::runtime_error("count file truncated");
    Value value;
    std::memcpy(&value, data.data() + offset, sizeof(Value));  // little-endian hosts only
    offset += sizeof(Value);
    return value;
}

// The count file's words (format version 1 or 2, cs336_basics/word_counts.py); the checksum is not checked.
bpe::CountedWords load_count_file(const char* path) {
    std::ifstream file(path, std::ios::binary);
    if (!file) throw std::runtime_error(std::string("cannot open ") + path);
    const std::string data((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    if (data.compare(0, 8, std::string("CS336WC\0", 8)) != 0) throw std::runtime_error("not a count file");
    size_t offset = 8;
    const auto version = read_at<uint32_t>(data, offset);
    if (version != 1 && version != 2) throw std::runtime_error("count file version is not 1 or 2");
    offset += read_at<uint32_t>(data, offset);  // the pattern
    if (version == 2) offset += read_at<uint32_t>(data, offset);  // the Unicode version
    const uint32_t specials = read_at<uint32_t>(data, offset);
    for (uint32_t token = 0; token < specials; ++token) offset += read_at<uint32_t>(data, offset);
    offset += 8;  // bytes of text counted
    const auto num_words = read_at<uint64_t>(data, offset);
    const auto blob_length = read_at<uint64_t>(data, offset);
    size_t lengths_at = offset;
    size_t counts_at = offset + 4 * num_words;
    size_t blob_at = counts_at + 8 * num_words;
    if (blob_at + blob_length > data.size()) throw std::runtime_error("count file truncated");
    bpe::CountedWords words;
    words.reserve(num_words, blob_length);
    for (uint64_t word = 0; word < num_words; ++word) {
        const auto length = read_at<uint32_t>(data, lengths_at);
        const auto count = read_at<uint64_t>(data, counts_at);
        words.add(data.data() + blob_at, length, int64_t(count));
        blob_at += length;
    }
    return words;
}

uint64_t fnv1a(uint64_t hash, const std::string& bytes) {
    const uint64_t length = bytes.size();
    for (size_t at = 0; at < 8; ++at) hash = (hash ^ ((length >> (8 * at)) & 0xFF)) * 0x100000001B3ull;
    for (const char byte : bytes) hash = (hash ^ static_cast<unsigned char>(byte)) * 0x100000001B3ull;
    return hash;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s COUNTS [vocab=32000] [threads=1] [repeats=1] [parallel_words=256] "
                     "[tie_break=cs336]\n", argv[0]);
        return 2;
    }
    const size_t vocab = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 32000;
    const int threads = argc > 3 ? std::atoi(argv[3]) : 1;
    const int repeats = argc > 4 ? std::atoi(argv[4]) : 1;
    const size_t parallel_words = argc > 5 ? std::strtoull(argv[5], nullptr, 10) : bpe::kDefaultParallelWords;
    const std::string rule = argc > 6 ? argv[6] : "cs336";
    const std::vector<std::string> rules = bpe::tie_break_names();  // at bpe::TieBreak's values
    const auto found = std::find(rules.begin(), rules.end(), rule);
    if (found == rules.end()) {
        std::fprintf(stderr, "tie_break must be one of bpe::tie_break_names(), got %s\n", rule.c_str());
        return 2;
    }
    const auto tie_break = static_cast<bpe::TieBreak>(found - rules.begin());
    const bpe::CountedWords words = load_count_file(argv[1]);
    std::printf("%zu distinct words, vocab %zu, %d thread(s), ties %s\n", words.size(), vocab, threads, rule.c_str());
    std::vector<bpe::Merge> merges;
    for (int repeat = 0; repeat < repeats; ++repeat) {
        const auto start = std::chrono::steady_clock::now();
        const double cpu_start = process_cpu_seconds();
        merges = bpe::train_merges(words, vocab - 257, nullptr, nullptr, threads, bpe::kDefaultPrunePairs,
                                    parallel_words, tie_break);
        const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
        const bpe::MergeThreadUse use = bpe::last_merge_thread_use();
        std::printf("merge: %.3f s wall, %.3f s CPU; %zu merges on the threads, to one thread %zu time(s), "
                    "back %zu\n", took.count(), process_cpu_seconds() - cpu_start, use.parallel_merges,
                    use.starved, use.resumed);
    }
    // The digest of the merges as bytes (left, right), each token spelled from the ids.
    std::vector<std::string> tokens;
    for (int byte = 0; byte < 256; ++byte) tokens.emplace_back(1, static_cast<char>(byte));
    uint64_t hash = 0xCBF29CE484222325ull;
    for (const bpe::Merge& merge : merges) {
        hash = fnv1a(fnv1a(hash, tokens[merge.left]), tokens[merge.right]);
        tokens.push_back(tokens[merge.left] + tokens[merge.right]);
    }
    std::printf("%zu merges, digest %016llx\n", merges.size(), static_cast<unsigned long long>(hash));
    return 0;
}
