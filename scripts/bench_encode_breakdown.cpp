// Where the encoder's time goes, per pre-token, on one thread: the scanner alone, a warm pass (every
// word a cache hit), a cold pass (a fresh Encoder: hits plus one merge per distinct word), an
// uncached pass (every occurrence merged), each distinct word merged once, and one long pre-token.
// Every figure is the best of --repeat rounds by CPU time, the rounds interleaved; the ids of every
// pass are checked equal.
//
// Build and run (from the repository root; TABLES written by scripts/bench_encode_breakdown.py):
//   g++ -std=c++17 -O2 -fopenmp -Icpp scripts/bench_encode_breakdown.cpp cpp/*/*.cpp -o bench_encode_breakdown
//   ./bench_encode_breakdown TABLES TEXT [repeat]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "encode/bpe_encode.hpp"
#include "scan/pretokenize_gpt4.hpp"

namespace {

double cpu_seconds() {
    timespec now{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return double(now.tv_sec) + 1e-9 * double(now.tv_nsec);
}

template <class Work>
double timed(Work&& work) {
    const double start = cpu_seconds();
    work();
    return cpu_seconds() - start;
}

std::string read_file(const char* path) {
    std::ifstream file(path, std::ios::binary);
    std::stringstream buffer;
    buffer << file.rdbuf();
    return buffer.str();
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s TABLES TEXT [repeat]\n", argv[0]);
        return 2;
    }
    const int repeat = argc > 3 ? std::atoi(argv[3]) : 3;
    // TABLES: 256 byte ids, then "left right merged" per merge in rank order, then "special ID HEX".
    std::ifstream tables(argv[1]);
    std::vector<uint32_t> byte_ids(256);
    for (uint32_t& id : byte_ids) tables >> id;
    std::vector<bpe::MergeRule> merges;
    std::vector<std::pair<std::string, uint32_t>> specials;
    std::string first;
    while (tables >> first) {
        if (first == "special") {
            uint32_t id;
            std::string hex;
            tables >> id >> hex;
            std::string token;
            for (size_t i = 0; i + 1 < hex.size(); i += 2) token.push_back(char(std::stoi(hex.substr(i, 2), nullptr, 16)));
            specials.emplace_back(token, id);
            continue;
        }
        bpe::MergeRule rule{uint32_t(std::stoul(first)), 0, 0};
        tables >> rule.right >> rule.merged;
        merges.push_back(rule);
    }
    const std::string text = read_file(argv[2]);
    const size_t slots = size_t(1) << 19;

    // The pre-tokens, as the scanner gives them (special tokens not split off: the corpora here
    // hold few), and the distinct ones.
    std::vector<std::pair<size_t, size_t>> words;
    bpe::for_each_pretoken_of(bpe::PretokenPattern::kGpt2, text.data(), text.size(),
                              [&](size_t begin, size_t end) { words.emplace_back(begin, end - begin); },
                              bpe::unicode_table(0));
    std::unordered_set<std::string_view> seen;
    std::vector<std::pair<size_t, size_t>> distinct_words;
    for (const auto& [begin, size] : words) {
        const std::string_view word(text.data() + begin, size);
        if (seen.insert(word).second) distinct_words.emplace_back(begin, size);
    }
    const std::string long_word(1 << 20, 'a');  // one pre-token of a megabyte (letters only)
    std::string long_mixed;  // a megabyte of random lowercase letters: one pre-token, many merges
    for (uint32_t state = 1; long_mixed.size() < (1 << 20);) {
        state = state * 1664525u + 1013904223u;
        long_mixed.push_back(char('a' + (state >> 24) % 26));
    }

    // The first 200 KB repeated to the text's size (cut after a space): every set in cache when warm.
    std::string repeated;
    {
        const std::string head = text.substr(0, text.rfind(' ', 200000));
        while (repeated.size() + head.size() <= text.size()) repeated += head;
    }
    std::vector<uint32_t> out(text.size() + bpe::Encoder::kSpareIds);
    std::vector<uint32_t> reference;
    std::vector<double> best(8, 1e9);
    size_t scanned = 0;
    for (int round = 0; round < repeat; ++round) {
        best[0] = std::min(best[0], timed([&] {
            scanned = 0;
            bpe::for_each_pretoken_block_of(
                bpe::PretokenPattern::kGpt2, text.data(), text.size(), text.size(),
                [&](size_t, size_t) { ++scanned; },
                [&](const unsigned char*, size_t, uint64_t boundaries) {
                    scanned += size_t(__builtin_popcountll(boundaries & (boundaries - 1)));
                },
                bpe::unicode_table(0));
        }));
        size_t count = 0;
        {
            bpe::Encoder encoder(byte_ids, merges, specials, slots);
            best[1] = std::min(best[1], timed([&] { count = encoder.encode(text, out.data()); }));
            std::vector<uint32_t> cold(out.begin(), out.begin() + long(count));
            best[2] = std::min(best[2], timed([&] { count = encoder.encode(text, out.data()); }));
            if (reference.empty()) reference = cold;
            if (cold != reference || !std::equal(reference.begin(), reference.end(), out.begin()) ||
                count != reference.size()) {
                std::fprintf(stderr, "ids differ between passes\n");
                return 1;
            }
        }
        {
            bpe::Encoder encoder(byte_ids, merges, specials, slots);
            encoder.encode(repeated, out.data());
            best[7] = std::min(best[7], timed([&] { encoder.encode(repeated, out.data()); }));
        }
        bpe::Encoder uncached(byte_ids, merges, specials, 0);
        best[3] = std::min(best[3], timed([&] { count = uncached.encode(text, out.data()); }));
        if (count != reference.size() || !std::equal(reference.begin(), reference.end(), out.begin())) {
            std::fprintf(stderr, "uncached ids differ\n");
            return 1;
        }
        best[4] = std::min(best[4], timed([&] {
            for (const auto& [begin, size] : distinct_words) uncached.encode(std::string_view(text.data() + begin, size), out.data());
        }));
        std::vector<uint32_t> long_out(long_word.size() + bpe::Encoder::kSpareIds);
        best[5] = std::min(best[5], timed([&] { uncached.encode(long_word, long_out.data()); }));
        best[6] = std::min(best[6], timed([&] { uncached.encode(long_mixed, long_out.data()); }));
    }
    const double mb = double(text.size()) / 1e6;
    const double per_word = 1e9 / double(words.size());
    std::printf("text: %.1f MB, %zu pre-tokens (scanner: %zu), %zu distinct; %d rounds, best by thread CPU time\n", mb,
                words.size(), scanned + 1, distinct_words.size(), repeat);
    std::printf("| pass | MB/s | ns per pre-token |\n|---|---:|---:|\n");
    const char* names[] = {"scanner alone", "cold (fresh encoder)", "warm (cache filled)", "uncached (every word merged)"};
    for (int i = 0; i < 4; ++i) std::printf("| %s | %.1f | %.1f |\n", names[i], mb / best[i], best[i] * per_word);
    std::printf("| warm, every set in cache (200 KB of the text repeated) | %.1f | |\n", double(repeated.size()) / 1e6 / best[7]);
    std::printf("| each distinct word merged once (encode per word) | | %.1f ns per distinct word |\n",
                best[4] * 1e9 / double(distinct_words.size()));
    std::printf("| one pre-token of 1 MiB of 'a' | %.1f | |\n", double(long_word.size()) / 1e6 / best[5]);
    std::printf("| one pre-token of 1 MiB of random letters | %.1f | |\n", double(long_mixed.size()) / 1e6 / best[6]);
    return 0;
}
