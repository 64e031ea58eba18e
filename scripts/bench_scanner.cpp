// Throughput of the native GPT-2 pre-tokenizer alone and of pre-tokenize + count, without Python.
//
// Build (from the repository root; -fopenmp for the two-thread count):
//   c++ -std=c++17 -O3 -fopenmp -Icpp scripts/bench_scanner.cpp cpp/pretokenize.cpp
//       cpp/word_count.cpp cpp/bpe_merge.cpp -o bench_scanner
// Run:
//   ./bench_scanner FILE [repeats=5] [scan|count|all]
// Prints MB/s (10^6 bytes per second), best of `repeats`, for: the scanner with an empty visitor
// (pre-tokenize only) on each scanner path, and counting (no special tokens split,
// then with <|endoftext|>) on one and on two threads. Under `valgrind --tool=callgrind` use
// repeats=1 and one mode for repeatable instruction counts.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "pretokenize.hpp"
#include "word_count.hpp"

namespace {

template <typename Work>
double best_mb_per_s(size_t bytes, int repeats, Work&& work) {
    double best = 0;
    for (int i = 0; i < repeats; ++i) {
        const auto start = std::chrono::steady_clock::now();
        work();
        const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
        best = std::max(best, double(bytes) / took.count() / 1e6);
    }
    return best;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s FILE [repeats] [scan|count|all]\n", argv[0]);
        return 2;
    }
    std::ifstream in(argv[1], std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
    const std::string mode = argc > 3 ? argv[3] : "all";
    std::printf("%s: %zu bytes, best of %d\n", argv[1], text.size(), repeats);

    if (mode == "scan" || mode == "all") {
        const std::pair<bpe::ScannerPath, const char*> paths[] = {
            {bpe::ScannerPath::kFast, "fast"}, {bpe::ScannerPath::kSwar, "swar"}, {bpe::ScannerPath::kScalar, "scalar"}};
        for (const auto& [path, name] : paths) {
            bpe::set_scanner_path(path);
            size_t pretokens = 0;
            size_t checksum = 0;
            const double speed = best_mb_per_s(text.size(), repeats, [&] {
                pretokens = 0;
                checksum = 0;
                const size_t bad = bpe::for_each_pretoken(text.data(), text.size(), [&](size_t, size_t end) {
                    ++pretokens;
                    checksum += end;
                });
                if (bad != bpe::kValidUtf8) std::printf("invalid UTF-8 at %zu\n", bad);
            });
            std::printf("pre-tokenize only, %-6s path: %8.1f MB/s  (%zu pre-tokens, checksum %zu)\n",
                        name, speed, pretokens, checksum);
        }
        bpe::set_scanner_path(bpe::ScannerPath::kFast);
    }
    if (mode == "count" || mode == "all") {
        for (const int threads : {1, 2}) {
            bpe::CountOptions options;
            options.num_threads = threads;
            size_t words = 0;
            const double speed = best_mb_per_s(text.size(), repeats, [&] {
                words = bpe::count_words(text, {"<|endoftext|>"}, options).counts.size();
            });
            std::printf("pre-tokenize + count, %d thread(s): %8.1f MB/s  (%zu distinct words)\n", threads,
                        speed, words);
        }
    }
    return 0;
}
