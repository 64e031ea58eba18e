// Throughput of the native pre-tokenizers alone and of pre-tokenize + count, without Python.
//
// Build (from the repository root; -fopenmp for the two-thread count):
//   c++ -std=c++17 -O3 -fopenmp -Icpp scripts/bench_scanner.cpp cpp/*/*.cpp -o bench_scanner
// Run:
//   ./bench_scanner FILE [repeats=5] [all|scan|count|fast|swar|scalar|count1|count2|read|gpt4|cl100k|rustbpe|o200k]
// Prints MB/s (10^6 bytes per second), best of `repeats` by wall clock and by CPU time, for the
// scanner with an empty visitor (pre-tokenize only) on each scanner path, and for counting (split
// on <|endoftext|>) on one and on two threads; the other modes run one of these, and `read` only
// reads the file (the baseline to subtract from instruction counts). `cl100k`, `rustbpe` and `o200k` run
// GPT-4's and GPT-4o's scanners (pretokenize_gpt4.hpp) alone and counting on one thread under that
// pattern, `gpt4` all three (`all` includes them): compare their scan with the fast path's, GPT-2's. CPU time is the
// steadier figure on a shared machine. Under `valgrind --tool=callgrind` use repeats=1 and one mode
// for repeatable instruction counts.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "scan/pretokenize.hpp"
#include "scan/pretokenize_gpt4.hpp"
#include "count/word_count.hpp"

namespace {

double process_cpu_seconds() {
    timespec now{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
    return double(now.tv_sec) + 1e-9 * double(now.tv_nsec);
}

struct Speed {
    double wall = 0;  // MB/s by wall clock
    double cpu = 0;   // MB/s by the process's CPU time (all threads): steadier on a shared machine
};

template <typename Work>
Speed best_mb_per_s(size_t bytes, int repeats, Work&& work) {
    Speed best;
    for (int i = 0; i < repeats; ++i) {
        const auto start = std::chrono::steady_clock::now();
        const double cpu_start = process_cpu_seconds();
        work();
        const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
        best.wall = std::max(best.wall, double(bytes) / took.count() / 1e6);
        best.cpu = std::max(best.cpu, double(bytes) / (process_cpu_seconds() - cpu_start) / 1e6);
    }
    return best;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr,
                     "usage: %s FILE [repeats] [all|scan|count|fast|swar|scalar|count1|count2|read|gpt4|cl100k|rustbpe|o200k]\n",
                     argv[0]);
        return 2;
    }
    std::ifstream in(argv[1], std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
    const std::string mode = argc > 3 ? argv[3] : "all";
    std::printf("%s: %zu bytes, best of %d\n", argv[1], text.size(), repeats);
    double scan_cpu = 0;                   // the fast path's MB/s by CPU time, for the ratios below
    double count_wall[3] = {0, 0, 0};      // counting's MB/s by wall clock, by thread count

    if (mode == "scan" || mode == "all" || mode == "fast" || mode == "swar" || mode == "scalar") {
        const std::pair<bpe::ScannerPath, const char*> paths[] = {
            {bpe::ScannerPath::kFast, "fast"}, {bpe::ScannerPath::kSwar, "swar"}, {bpe::ScannerPath::kScalar, "scalar"}};
        for (const auto& [path, name] : paths) {
            if (mode != "scan" && mode != "all" && mode != name) continue;
            bpe::set_scanner_path(path);
            size_t pretokens = 0;
            size_t checksum = 0;
            const Speed speed = best_mb_per_s(text.size(), repeats, [&] {
                pretokens = 0;
                checksum = 0;
                const size_t bad = bpe::for_each_pretoken(text.data(), text.size(), [&](size_t, size_t end) {
                    ++pretokens;
                    checksum += end;
                });
                if (bad != bpe::kValidUtf8) std::printf("invalid UTF-8 at %zu\n", bad);
            });
            std::printf("pre-tokenize only, %-6s path: %8.1f MB/s (CPU %8.1f)  (%zu pre-tokens, checksum %zu)\n",
                        name, speed.wall, speed.cpu, pretokens, checksum);
            if (path == bpe::ScannerPath::kFast) scan_cpu = speed.cpu;
        }
        bpe::set_scanner_path(bpe::ScannerPath::kFast);
    }
    if (mode == "count" || mode == "all" || mode == "count1" || mode == "count2") {
        for (const int threads : {1, 2}) {
            if ((mode == "count1" && threads != 1) || (mode == "count2" && threads != 2)) continue;
            bpe::CountOptions options;
            options.num_threads = threads;
            size_t words = 0;
            const Speed speed = best_mb_per_s(text.size(), repeats, [&] {
                words = bpe::count_words_in_buffer(text, {"<|endoftext|>"}, options).counts.size();
            });
            std::printf("pre-tokenize + count, %d thread(s): %8.1f MB/s (CPU per thread %8.1f)  (%zu distinct words)\n",
                        threads, speed.wall, speed.cpu, words);
            count_wall[threads] = speed.wall;
            if (threads == 1 && scan_cpu > 0) {
                std::printf("  ratio: count / pre-tokenize only (1 thread, CPU) %.2fx\n", speed.cpu / scan_cpu);
            }
        }
        if (count_wall[1] > 0 && count_wall[2] > 0) {
            std::printf("  ratio: count 2 threads / 1 thread (wall) %.2fx\n", count_wall[2] / count_wall[1]);
        }
    }
    // Every other named scanner (bpe::kNamedScanners), GPT-2's being measured above.
    for (const bpe::NamedScanner& scanner : bpe::kNamedScanners) {
        const bpe::PretokenPattern pattern = scanner.pattern;
        const char* name = scanner.name.data();
        if (pattern == bpe::PretokenPattern::kGpt2) continue;
        if (mode != "all" && mode != "gpt4" && mode != name) continue;
        size_t pretokens = 0;
        size_t checksum = 0;
        const Speed scan = best_mb_per_s(text.size(), repeats, [&] {
            pretokens = 0;
            checksum = 0;
            const size_t bad = bpe::for_each_pretoken_of(pattern, text.data(), text.size(), [&](size_t, size_t end) {
                ++pretokens;
                checksum += end;
            });
            if (bad != bpe::kValidUtf8) std::printf("invalid UTF-8 at %zu\n", bad);
        });
        std::printf("pre-tokenize only, %-7s:     %8.1f MB/s (CPU %8.1f)  (%zu pre-tokens, checksum %zu)\n", name,
                    scan.wall, scan.cpu, pretokens, checksum);
        if (scan_cpu > 0) std::printf("  ratio: %s / GPT-2 fast path (CPU) %.2fx\n", name, scan.cpu / scan_cpu);
        bpe::CountOptions options;
        options.num_threads = 1;
        options.pattern = pattern;
        size_t words = 0;
        const Speed count = best_mb_per_s(text.size(), repeats, [&] {
            words = bpe::count_words_in_buffer(text, {"<|endoftext|>"}, options).counts.size();
        });
        std::printf("pre-tokenize + count, %-7s, 1 thread: %8.1f MB/s (CPU %8.1f)  (%zu distinct words)\n", name,
                    count.wall, count.cpu, words);
    }
    return 0;
}
