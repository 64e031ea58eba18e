// Known answers for the native core without Python, for a machine or compiler the test suite has
// not run on (an ARM board, qemu, clang, a cross compiler): every scanner path of GPT-2's split
// (the SIMD fast path, SWAR, scalar) and GPT-4's, counting on one and on several threads, the
// merge loop on one and on several threads, and the encoder.
//
// Build and run (from the repository root; without -fopenmp the "several threads" checks run on one):
//   c++ -std=c++17 -O2 -fopenmp -Icpp cpp/selftest.cpp cpp/*/*.cpp -o native_selftest
//   ./native_selftest
// AArch64 under qemu (Debian: g++-aarch64-linux-gnu, qemu-user):
//   aarch64-linux-gnu-g++ -std=c++17 -O2 -fopenmp -Icpp cpp/selftest.cpp cpp/*/*.cpp -o native_selftest_arm64
//   qemu-aarch64 -L /usr/aarch64-linux-gnu ./native_selftest_arm64
// Windows with mingw-w64, under Wine (Debian: mingw-w64, wine64):
//   x86_64-w64-mingw32-g++-posix -std=c++17 -O2 -fopenmp -static -Icpp cpp/selftest.cpp cpp/*/*.cpp -o t.exe
//   /usr/lib/wine/wine64 ./t.exe
// Prints each failure and a summary; exit status 0 when every check passed.
//
// Where the answers come from: hand-worked splits and merges (the CS336 handout's examples among
// them); texts assembled from pre-tokens that the pattern's rules keep apart, so the split is known
// by construction; a naive BPE trainer and encoder written here from the assignment's definition;
// and agreement between the scanner paths on random bytes, invalid UTF-8 included.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "encode/bpe_encode.hpp"
#include "merge/bpe_merge.hpp"
#include "kit/omp_shim.hpp"
#include "scan/pretokenize.hpp"
#include "scan/pretokenize_gpt4.hpp"
#include "count/word_count.hpp"

namespace {

using bpe::PretokenPattern;
using bpe::ScannerPath;
using Tokens = std::vector<std::string>;

constexpr int kThreads = 4;
const ScannerPath kPaths[] = {ScannerPath::kFast, ScannerPath::kSwar, ScannerPath::kScalar};

int checks = 0;
int failures = 0;

const char* path_name(ScannerPath path) {
    switch (path) {
        case ScannerPath::kSwar: return "swar";
        case ScannerPath::kScalar: return "scalar";
        default: return "fast";
    }
}

// Every named scanner (bpe::kNamedScanners) is checked; its name is how failures name it.
const char* pattern_name(PretokenPattern pattern) {
    for (const bpe::NamedScanner& scanner : bpe::kNamedScanners) {
        if (scanner.pattern == pattern) return scanner.name.data();
    }
    return "?";
}

const char* fast_path_kind() {
#if defined(BPE_SSE2)
    return "SSE2";
#elif defined(BPE_NEON)
    return "NEON";
#else
    return "SWAR (no SIMD path for this target)";
#endif
}

// Printable form of a text: non-printing and non-ASCII bytes as \xNN, and no more than 300 bytes of it.
std::string shown(std::string_view text) {
    std::string out;
    if (text.size() > 300) return shown(text.substr(0, 300)) + "...";
    for (unsigned char byte : text) {
        if (byte >= 0x20 && byte < 0x7F && byte != '\\') {
            out += char(byte);
        } else {
            char buffer[8];
            std::snprintf(buffer, sizeof buffer, "\\x%02X", byte);
            out += buffer;
        }
    }
    return out;
}

std::string shown(const Tokens& tokens) {
    std::string out = "[";
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? "|" : "") + shown(tokens[i]);
    return out + "]";
}

bool check(bool ok, const std::string& what) {
    ++checks;
    if (!ok) {
        ++failures;
        std::printf("FAIL %s\n", what.c_str());
    }
    return ok;
}

// The pre-tokens of `text` on `path`; `error` gets the scanner's result (kValidUtf8 or an offset).
Tokens split(PretokenPattern pattern, ScannerPath path, std::string_view text, size_t* error = nullptr) {
    bpe::set_scanner_path(path);
    Tokens tokens;
    const size_t result = bpe::for_each_pretoken_of(pattern, text.data(), text.size(), [&](size_t begin, size_t end) {
        tokens.emplace_back(text.substr(begin, end - begin));
    });
    bpe::set_scanner_path(ScannerPath::kFast);
    if (error != nullptr) *error = result;
    return tokens;
}

void expect_split(PretokenPattern pattern, const std::string& text, const Tokens& expected) {
    for (ScannerPath path : kPaths) {
        size_t error;
        const Tokens got = split(pattern, path, text, &error);
        check(error == bpe::kValidUtf8 && got == expected, std::string(pattern_name(pattern)) + " " + path_name(path) +
                                                               " split of \"" + shown(text) + "\": got " + shown(got) +
                                                               ", expected " + shown(expected));
    }
}

// ---------------------------------------------------------------------------------------------
// Scanners: hand-worked splits

void hand_worked_splits() {
    const PretokenPattern gpt2 = PretokenPattern::kGpt2;
    expect_split(gpt2, "Hello world", {"Hello", " world"});
    expect_split(gpt2, "I'm here", {"I", "'m", " here"});
    expect_split(gpt2, "don't", {"don", "'t"});
    expect_split(gpt2, "it's 'quoted'", {"it", "'s", " '", "quoted", "'"});
    expect_split(gpt2, "WE'LL", {"WE", "'", "LL"});  // GPT-2's contractions are lowercase only
    expect_split(gpt2, "a  b", {"a", " ", " b"});
    expect_split(gpt2, "x\n\ny", {"x", "\n", "\n", "y"});
    expect_split(gpt2, "  end  ", {" ", " end", "  "});
    expect_split(gpt2, "123abc 4", {"123", "abc", " 4"});
    expect_split(gpt2, "h\xC3\xA9llo w\xC3\xB6rld", {"h\xC3\xA9llo", " w\xC3\xB6rld"});
    expect_split(gpt2, "\xE2\x82\xAC" "100!!", {"\xE2\x82\xAC", "100", "!!"});  // the euro sign is a symbol
    expect_split(gpt2, "a\xC2\xA0" "b", {"a", "\xC2\xA0", "b"});  // NBSP is \s, but not the ` ?` prefix
    expect_split(gpt2, "", {});

    for (PretokenPattern gpt4 : {PretokenPattern::kCl100k, PretokenPattern::kRustbpe}) {
        expect_split(gpt4, "Hello world", {"Hello", " world"});
        expect_split(gpt4, "I'M here", {"I", "'M", " here"});  // case-insensitive contractions
        expect_split(gpt4, "12345", {"123", "45"});            // \p{N}{1,3}
        expect_split(gpt4, "a\n\nb", {"a", "\n\n", "b"});      // \s*[\r\n]
        expect_split(gpt4, "x  y", {"x", " ", " y"});
        expect_split(gpt4, "hello!!\n\nworld", {"hello", "!!\n\n", "world"});
        expect_split(gpt4, "$100", {"$", "100"});
        expect_split(gpt4, "$abc", {"$abc"});  // one non-letter joins the letters after it
        expect_split(gpt4, "\tTab", {"\tTab"});
    }
    // cl100k's \s++$ takes a whitespace run at the end whole; rustbpe's pattern has no such rule.
    expect_split(PretokenPattern::kCl100k, "x\n  ", {"x", "\n  "});
    expect_split(PretokenPattern::kRustbpe, "x\n  ", {"x", "\n", "  "});

    // o200k: a word is a run of capitals then one of lower-case letters, a contraction its suffix,
    // and punctuation takes the \r, \n and / after it.
    const PretokenPattern o200k = PretokenPattern::kO200k;
    expect_split(o200k, "HelloWorld", {"Hello", "World"});
    expect_split(o200k, "HTTPServer", {"HTTPServer"});  // capitals, then lower case: one word
    expect_split(o200k, "I'M here", {"I'M", " here"});
    expect_split(o200k, "don't", {"don't"});
    expect_split(o200k, "12345", {"123", "45"});
    expect_split(o200k, "a!!/\nb", {"a", "!!/\n", "b"});
    expect_split(o200k, "a\n\nb", {"a", "\n\n", "b"});
    expect_split(o200k, "x  y", {"x", " ", " y"});
    expect_split(o200k, "x\n  ", {"x", "\n", "  "});  // no \s++$, as rustbpe's

    // superword: runs up to a line end (spaces and all), line-end runs, numbers in threes from the right.
    const PretokenPattern superword = PretokenPattern::kSuperword;
    expect_split(superword, "Hello world, it's here.", {"Hello world, it's here."});
    expect_split(superword, "a\n\r\nb \n", {"a", "\n\r\n", "b ", "\n"});
    expect_split(superword, "1234567 and 12", {"1", "234", "567", " and ", "12"});
    expect_split(superword, "x123456y", {"x", "123", "456", "y"});
    // Arabic-Indic digits (two bytes each) count as one character each, beside ASCII ones.
    expect_split(superword, "\xD9\xA3\xD9\xA4" "56\xD9\xA3", {"\xD9\xA3\xD9\xA4", "56\xD9\xA3"});
    expect_split(superword, "\xE6\x97\xA5\xC2\xA0\xE2\x80\xA8 z\t", {"\xE6\x97\xA5\xC2\xA0\xE2\x80\xA8 z\t"});
    const std::string line(150, 'w');
    expect_split(superword, line + "\n" + line + "9999" + line, {line, "\n", line, "9", "999", line});
    std::string digits(130, '7');
    expect_split(superword, "a" + digits + "\n", {"a", "7", "777", "777", "777", "777", "777", "777", "777", "777",
                                                   "777", "777", "777", "777", "777", "777", "777", "777", "777",
                                                   "777", "777", "777", "777", "777", "777", "777", "777", "777",
                                                   "777", "777", "777", "777", "777", "777", "777", "777", "777",
                                                   "777", "777", "777", "777", "777", "777", "777", "777", "\n"});
    expect_split(superword, "", {});

    // Every pattern has its entry in the scanners' list, and with it a chunk cut rule.
    for (int value = 0; value <= int(PretokenPattern::kSuperword); ++value) {
        bool listed = false;
        for (const bpe::NamedScanner& named : bpe::kNamedScanners) listed |= int(named.pattern) == value;
        check(listed, "pattern " + std::to_string(value) + " is in kNamedScanners");
    }
}

// ---------------------------------------------------------------------------------------------
// Scanners: long texts whose GPT-2 split is known by construction

struct Generated {
    std::string text;
    Tokens tokens;
};

class Random {
public:
    explicit Random(uint64_t seed) : engine_(seed) {}
    size_t below(size_t bound) { return size_t(engine_() % bound); }
    template <typename T>
    const T& pick(const std::vector<T>& items) { return items[below(items.size())]; }

private:
    std::mt19937_64 engine_;  // specified by the standard: the same stream everywhere
};

// Pre-tokens of the GPT-2 pattern chosen so that, joined, each stays one pre-token: a token without a
// leading ' ' follows one whose last character is of another class (letter, number, other), and a
// whitespace run (no ' ' in it) is never followed by whitespace, and by a token without a leading ' '
// only when it is one character (`\s+(?!\S)` gives back a longer run's last character).
Generated gpt2_text(Random& random, size_t count) {
    enum Kind { kLetters, kNumbers, kOthers, kContraction, kWhitespace, kBlank };
    const std::vector<std::string> letters = {"the", "cat", "Zebra", "h\xC3\xA9llo", "\xE6\x97\xA5\xE6\x9C\xAC",
                                              "\xCE\xA9mega", "x",
                                              "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz"};
    // ASCII digits, Arabic-Indic digits (Nd), Roman numeral twelve (Nl): all \p{N}.
    const std::vector<std::string> numbers = {"0", "42", "2024", "\xD9\xA3\xD9\xA4", "\xE2\x85\xAB"};
    // Punctuation, a currency sign, an em dash, an emoji (So): all "other".
    const std::vector<std::string> others = {"!", "...", "$", "\xE2\x82\xAC", "\xE2\x80\x94", "(", ")", "#@",
                                             "\xF0\x9F\x98\x80"};
    const std::vector<std::string> contractions = {"'s", "'t", "'re", "'ve", "'ll", "'d", "'m"};
    // \t, \n, \r\n, NBSP, the ideographic space: whitespace without ' '.
    const std::vector<std::string> single_spaces = {"\n", "\t", "\xC2\xA0", "\xE3\x80\x80"};
    const std::vector<std::string> long_spaces = {"\n\n", "\r\n", "\t\n\n"};

    Generated out;
    int previous = -1;          // the previous token's kind
    int previous_last = -1;     // the class of its last character: 0 letter, 1 number, 2 other
    bool previous_long = false;  // a whitespace run of more than one character
    for (size_t i = 0; i < count; ++i) {
        for (;;) {
            const int kind = int(random.below(6));
            const bool spaced = kind <= kOthers && random.below(2) == 0;
            if (kind == kWhitespace && (previous == kWhitespace || previous == kBlank)) continue;
            if (kind == kBlank && (previous == kWhitespace || previous == kBlank || previous == -1)) continue;
            if (kind == kContraction && (previous == kOthers || previous == kBlank)) continue;
            if (previous == kBlank && !spaced) continue;  // a lone ' ' only before a token it does not join
            if (!spaced && kind != kWhitespace && kind != kBlank) {
                const int first = kind == kLetters ? 0 : kind == kNumbers ? 1 : 2;
                if (first == previous_last) continue;
                if (previous == kWhitespace && previous_long) continue;
            }
            std::string token;
            if (kind == kLetters) token = random.pick(letters);
            if (kind == kNumbers) token = random.pick(numbers);
            if (kind == kOthers) token = random.pick(others);
            if (kind == kContraction) token = random.pick(contractions);
            if (kind == kBlank) token = " ";
            previous_long = false;
            if (kind == kWhitespace) {
                previous_long = random.below(2) == 0;
                token = random.pick(previous_long ? long_spaces : single_spaces);
            }
            if (spaced) token = " " + token;
            out.text += token;
            out.tokens.push_back(token);
            previous = kind;
            previous_last = kind == kLetters || kind == kContraction ? 0
                            : kind == kNumbers                          ? 1
                            : kind == kOthers                           ? 2
                                                                        : -1;
            break;
        }
    }
    return out;
}

void constructed_splits() {
    Random random(42);
    for (int round = 0; round < 40; ++round) {
        const Generated generated = gpt2_text(random, 20 + random.below(400));
        for (ScannerPath path : kPaths) {
            size_t error;
            const Tokens got = split(PretokenPattern::kGpt2, path, generated.text, &error);
            const std::string what =
                std::string("gpt2 ") + path_name(path) + " split of constructed text " + std::to_string(round);
            if (!check(error == bpe::kValidUtf8 && got == generated.tokens, what)) {
                for (size_t k = 0; k < got.size() && k < generated.tokens.size(); ++k) {
                    if (got[k] != generated.tokens[k]) {
                        std::printf("  first difference at pre-token %zu: got \"%s\", expected \"%s\"\n", k,
                                    shown(got[k]).c_str(), shown(generated.tokens[k]).c_str());
                        break;
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Scanners: every path agrees with the scalar one on random bytes, and on where UTF-8 turns invalid

void paths_agree() {
    const std::vector<std::string> pieces = {
        "a", "Z", "q", "s", "t", "ll", "ve", "re", "LL", "'", "'", " ", " ", " ", "  ", "\n", "\r\n", "\t",
        "\x0B", "\x0C", "0", "7", "12", "!", ".", "$", "\xC3\xA9", "\xCE\xA9", "\xE6\x97\xA5", "\xD9\xA3",
        "\xC2\xA0", "\xE3\x80\x80", "\xE2\x80\xA8", "\xF0\x9F\x98\x80", "\xE2\x82\xAC",
        "\xFF", "\x80", "\xC3", "\xE6\x97", "\xED\xA0\x80", "\xC0\xAF"};
    const size_t valid_pieces = pieces.size() - 6;  // the last six are invalid UTF-8
    Random random(7);
    int invalid_texts = 0;
    for (int round = 0; round < 600; ++round) {
        std::string text;
        const size_t count = random.below(200);
        // Mostly valid text (an invalid piece ends the scan), with long ASCII runs now and then.
        const bool valid = random.below(3) != 0;
        for (size_t i = 0; i < count; ++i) {
            const std::string& piece = pieces[random.below(valid ? valid_pieces : pieces.size())];
            const char first = piece[0];
            text += random.below(8) == 0 && (unsigned char)first < 0x80 ? std::string(random.below(40), first) : piece;
        }
        for (const bpe::NamedScanner& named : bpe::kNamedScanners) {
            const PretokenPattern pattern = named.pattern;
            size_t scalar_error;
            const Tokens scalar = split(pattern, ScannerPath::kScalar, text, &scalar_error);
            if (scalar_error != bpe::kValidUtf8) ++invalid_texts;
            std::string joined;
            for (const std::string& token : scalar) joined += token;
            // The pre-tokens tile the text, or the part before the invalid byte up to the pre-token it ends.
            const bool tiles = scalar_error == bpe::kValidUtf8
                                   ? joined == text
                                   : joined.size() <= scalar_error && text.rfind(joined, 0) == 0;
            check(tiles, std::string(pattern_name(pattern)) + " scalar pre-tokens tile \"" + shown(text) + "\"");
            for (ScannerPath path : {ScannerPath::kFast, ScannerPath::kSwar}) {
                size_t error;
                const Tokens got = split(pattern, path, text, &error);
                check(error == scalar_error && got == scalar, std::string(pattern_name(pattern)) + " " +
                                                                  path_name(path) + " agrees with scalar on \"" +
                                                                  shown(text) + "\"");
            }
        }
    }
    check(invalid_texts > 100, "the random texts include invalid UTF-8");

    // The offset of the first byte that does not start a valid character.
    for (const bpe::NamedScanner& named : bpe::kNamedScanners) {
        const PretokenPattern pattern = named.pattern;
        for (ScannerPath path : kPaths) {
            size_t error;
            split(pattern, path, "abc \xE2\x82", &error);
            check(error == 4, std::string(pattern_name(pattern)) + " " + path_name(path) + ": a truncated character");
            split(pattern, path, std::string(100, 'a') + "\xED\xA0\x80", &error);
            check(error == 100, std::string(pattern_name(pattern)) + " " + path_name(path) + ": a surrogate");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Counting

using Counts = std::map<std::string, int64_t>;

Counts as_map(const bpe::CountedWords& words) {
    Counts out;
    for (size_t i = 0; i < words.size(); ++i) {
        out[words.bytes.substr(words.offsets[i], words.offsets[i + 1] - words.offsets[i])] += words.counts[i];
    }
    return out;
}

void counting() {
    const std::string separator = "<|endoftext|>";
    Random random(11);
    std::string corpus;
    Counts expected;
    for (int document = 0; document < 120; ++document) {
        if (document > 0) corpus += separator;
        const Generated generated = gpt2_text(random, random.below(300));
        corpus += generated.text;
        for (const std::string& token : generated.tokens) ++expected[token];
    }
    for (ScannerPath path : kPaths) {
        bpe::set_scanner_path(path);
        for (int threads : {1, kThreads}) {
            for (size_t chunk_bytes : {size_t(0), size_t(512)}) {
                bpe::CountOptions options;
                options.num_threads = threads;
                options.chunk_bytes = chunk_bytes;
                const Counts got = as_map(bpe::count_words_in_buffer(corpus, {separator}, options));
                const std::string what = std::string("gpt2 counts on ") + std::to_string(threads) + " thread(s), " +
                                         path_name(path) + ", chunk_bytes " + std::to_string(chunk_bytes);
                check(got == expected, what);
            }
        }
    }
    bpe::set_scanner_path(ScannerPath::kFast);

    // The same corpus from a file: memory-mapped on POSIX, read whole on Windows (mapped_file.hpp).
    const std::filesystem::path path = std::filesystem::temp_directory_path() / "cs336_native_selftest_corpus.txt";
    {
        std::ofstream file(path, std::ios::binary);
        file.write(corpus.data(), std::streamsize(corpus.size()));
        check(bool(file), "writing the corpus to " + path.string());
    }
    for (int threads : {1, kThreads}) {
        bpe::CountOptions options;
        options.num_threads = threads;
        options.chunk_bytes = 512;
        check(as_map(bpe::count_words(path.string(), {separator}, options)) == expected,
              "gpt2 counts of a file on " + std::to_string(threads) + " thread(s)");
    }
    std::filesystem::remove(path);

    // Every other named scanner: the counts are those of the scalar scanner's pre-tokens, document by document.
    for (const bpe::NamedScanner& named : bpe::kNamedScanners) {
        const PretokenPattern pattern = named.pattern;
        if (pattern == PretokenPattern::kGpt2) continue;  // GPT-2's counts are checked above
        Counts split_counts;
        size_t begin = 0;
        for (;;) {
            const size_t end = std::min(corpus.find(separator, begin), corpus.size());
            for (const std::string& token : split(pattern, ScannerPath::kScalar, corpus.substr(begin, end - begin))) {
                ++split_counts[token];
            }
            if (end == corpus.size()) break;
            begin = end + separator.size();
        }
        for (int threads : {1, kThreads}) {
            bpe::CountOptions options;
            options.num_threads = threads;
            options.chunk_bytes = 512;
            options.pattern = pattern;
            check(as_map(bpe::count_words_in_buffer(corpus, {separator}, options)) == split_counts,
                  std::string(pattern_name(pattern)) + " counts on " + std::to_string(threads) + " thread(s)");
        }
    }

    // superword's pre-tokens span spaces: its chunks are cut after line ends only. Long lines of
    // words and numbers, no special token to cut at, in chunks much smaller than a line.
    std::string lines;
    for (int line = 0; line < 400; ++line) {
        const size_t words = 1 + random.below(60);
        for (size_t word = 0; word < words; ++word) {
            lines += word % 7 == 3 ? std::to_string(random.below(100000000)) : gpt2_text(random, 3).text;
            lines += " ";
        }
        lines += random.below(4) == 0 ? "\r\n" : random.below(3) == 0 ? "\n\n" : "\n";
    }
    Counts line_counts;
    for (const std::string& token : split(PretokenPattern::kSuperword, ScannerPath::kScalar, lines)) ++line_counts[token];
    for (int threads : {1, kThreads}) {
        for (size_t chunk_bytes : {size_t(64), size_t(700)}) {
            bpe::CountOptions options;
            options.num_threads = threads;
            options.chunk_bytes = chunk_bytes;
            options.pattern = PretokenPattern::kSuperword;
            check(as_map(bpe::count_words_in_buffer(lines, {separator}, options)) == line_counts,
                  "superword counts of long lines on " + std::to_string(threads) + " thread(s), chunk_bytes " +
                      std::to_string(chunk_bytes));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The merge loop, against a naive trainer written from the assignment's definition

using Pair = std::pair<std::string, std::string>;

// Merges as byte strings: each step merges the most frequent adjacent pair (ties: the greatest
// (left bytes, right bytes)) at every non-overlapping occurrence, left to right.
std::vector<Pair> naive_merges(const Counts& counts, size_t num_merges) {
    std::vector<std::pair<Tokens, int64_t>> words;
    for (const auto& [word, count] : counts) {
        Tokens symbols;
        for (char byte : word) symbols.emplace_back(1, byte);
        words.emplace_back(symbols, count);
    }
    std::vector<Pair> merges;
    while (merges.size() < num_merges) {
        std::map<Pair, int64_t> pairs;
        for (const auto& [symbols, count] : words) {
            for (size_t i = 0; i + 1 < symbols.size(); ++i) pairs[{symbols[i], symbols[i + 1]}] += count;
        }
        const Pair* best = nullptr;
        int64_t best_count = 0;
        for (const auto& [pair, count] : pairs) {  // ascending order: a later equal count is greater
            if (count > 0 && count >= best_count) {
                best = &pair;
                best_count = count;
            }
        }
        if (best == nullptr) break;
        const Pair merge = *best;
        merges.push_back(merge);
        for (auto& [symbols, count] : words) {
            Tokens merged;
            for (size_t i = 0; i < symbols.size(); ++i) {
                if (i + 1 < symbols.size() && symbols[i] == merge.first && symbols[i + 1] == merge.second) {
                    merged.push_back(merge.first + merge.second);
                    ++i;
                } else {
                    merged.push_back(symbols[i]);
                }
            }
            symbols = std::move(merged);
        }
    }
    return merges;
}

bpe::CountedWords as_word_counts(const Counts& counts) {
    bpe::CountedWords words;
    for (const auto& [word, count] : counts) words.add(word.data(), word.size(), count);
    return words;
}

// train_merges' merges spelled as bytes (token 256 + k is merge k's two tokens joined), after the
// merges of a base they went on from.
std::vector<Pair> spelled(const std::vector<bpe::Merge>& merges, const std::vector<bpe::Merge>& base = {}) {
    std::vector<std::string> vocab;
    for (int byte = 0; byte < 256; ++byte) vocab.emplace_back(1, char(byte));
    for (const bpe::Merge& merge : base) vocab.push_back(vocab.at(merge.left) + vocab.at(merge.right));
    std::vector<Pair> out;
    for (const bpe::Merge& merge : merges) {
        out.emplace_back(vocab.at(merge.left), vocab.at(merge.right));
        vocab.push_back(vocab[merge.left] + vocab[merge.right]);
    }
    return out;
}

void merging() {
    // The CS336 handout's example: low x5, lower x2, widest x3, newest x6. (e, s) and (s, t) tie at 9
    // and (s, t) is greater; worked by hand, the first six merges are:
    const Counts handout = {{"low", 5}, {"lower", 2}, {"widest", 3}, {"newest", 6}};
    const std::vector<Pair> handout_merges = {{"s", "t"},  {"e", "st"},  {"o", "w"},
                                              {"l", "ow"}, {"w", "est"}, {"n", "e"}};
    check(naive_merges(handout, 6) == handout_merges, "the naive trainer on the handout's example");
    for (int threads : {1, kThreads}) {
        const auto merges = bpe::train_merges(as_word_counts(handout), 6, nullptr, nullptr, threads,
                                              bpe::kDefaultPrunePairs, /*parallel_words=*/0);
        check(spelled(merges) == handout_merges, "train_merges on the handout's example, " + std::to_string(threads) +
                                                     " thread(s)");
    }

    // Random words (non-ASCII bytes too) to the end: no pair left.
    Random random(5);
    for (int round = 0; round < 6; ++round) {
        Counts counts;
        const std::string alphabet = "abcde\xC3\xA9\xFF";
        for (int i = 0; i < 60; ++i) {
            std::string word;
            for (size_t length = 1 + random.below(9); length > 0; --length) {
                word += alphabet[random.below(alphabet.size())];
            }
            counts[word] += int64_t(1 + random.below(20));
        }
        const std::vector<Pair> expected = naive_merges(counts, 1000);
        for (int threads : {1, kThreads}) {
            const auto merges = bpe::train_merges(as_word_counts(counts), 1000, nullptr, nullptr, threads,
                                                  bpe::kDefaultPrunePairs, /*parallel_words=*/0);
            check(spelled(merges) == expected, "train_merges against the naive trainer, round " +
                                                   std::to_string(round) + ", " + std::to_string(threads) +
                                                   " thread(s)");
        }
    }

    // SuperBPE's limits on the merged token (MergeLimits), worked by hand. One word per token: in
    // "a b a b a b", (a, space) then (b, space), and every pair after those would span two words. No
    // ": ": the two-byte ": " counts most but is never merged, so (a, b) is the only merge.
    bpe::MergeLimits one_word;
    one_word.max_words = 1;
    bpe::MergeLimits no_colon_space;
    no_colon_space.no_colon_space = true;
    for (int threads : {1, kThreads}) {
        const auto words = bpe::train_merges(as_word_counts({{"a b a b a b", 3}}), 10, nullptr, nullptr, threads,
                                             bpe::kDefaultPrunePairs, 0, bpe::TieBreak::kCs336, {}, one_word);
        check(spelled(words) == std::vector<Pair>{{"a", " "}, {"b", " "}},
              "max_words 1 keeps tokens within a word, " + std::to_string(threads) + " thread(s)");
        const auto colon = bpe::train_merges(as_word_counts({{": ", 5}, {"ab", 1}}), 10, nullptr, nullptr, threads,
                                             bpe::kDefaultPrunePairs, 0, bpe::TieBreak::kHf, {}, no_colon_space);
        check(spelled(colon) == std::vector<Pair>{{"a", "b"}},
              "no_colon_space never merges \": \", " + std::to_string(threads) + " thread(s)");
        // A base's merges are replayed whatever they make: (a, space) and (a , b) make "a b", two words
        // already; under one word nothing is merged after them, under two ("a b", space) only.
        const std::vector<bpe::Merge> base = {{'a', ' '}, {256, 'b'}};
        const auto based = bpe::train_merges(as_word_counts({{"a b a b", 2}}), 10, nullptr, nullptr, threads,
                                             bpe::kDefaultPrunePairs, 0, bpe::TieBreak::kCs336, base, one_word);
        bpe::MergeLimits two_words;
        two_words.max_words = 2;
        const auto based_two = bpe::train_merges(as_word_counts({{"a b a b", 2}}), 10, nullptr, nullptr, threads,
                                                 bpe::kDefaultPrunePairs, 0, bpe::TieBreak::kCs336, base, two_words);
        check(based.empty() && spelled(based_two, base) == std::vector<Pair>{{"a b", " "}},
              "max_words bounds the new merges only, " + std::to_string(threads) + " thread(s)");
    }

    // A busy machine, simulated: the first two parallel merges stall, so every merge goes to one thread,
    // and a probe after the cooldown brings the threads back; the merges are one thread's.
    Counts busy;
    for (int i = 0; i < 40000; ++i) {
        std::string word = " ";
        for (size_t length = 1 + random.below(12); length > 0; --length) word += "etaoinshrdlucm"[random.below(14)];
        busy[word] += 1;
    }
    const auto one_thread = bpe::train_merges(as_word_counts(busy), 600, nullptr, nullptr, 1);
    const size_t previous = bpe::simulate_busy_machine(2);
    const auto merges = bpe::train_merges(as_word_counts(busy), 600, nullptr, nullptr, kThreads,
                                          bpe::kDefaultPrunePairs, /*parallel_words=*/16);
    const bpe::MergeThreadUse use = bpe::last_merge_thread_use();
    bpe::simulate_busy_machine(previous);
    check(spelled(merges) == spelled(one_thread), "train_merges on a simulated busy machine against one thread");
    if (bpe::openmp_enabled()) {
        check(use.starved == 1 && use.resumed == 1 && use.parallel_merges > 1,
              "stalled parallel merges send the merges to one thread and a probe brings the threads back (" +
                  std::to_string(use.parallel_merges) + " parallel, " + std::to_string(use.starved) +
                  " starved, " + std::to_string(use.resumed) + " resumed)");
    }
}

// ---------------------------------------------------------------------------------------------
// The encoder, against the handout's example and a naive encoder

void encoding() {
    // The handout's example: vocab {0: ' ', 1: a, 2: c, 3: e, 4: h, 5: t, 6: th, 7: ' c', 8: ' a',
    // 9: the, 10: ' at'}, merges (t, h), (' ', c), (' ', a), (th, e), (' a', t): "the cat ate" is
    // [9, 7, 1, 5, 10, 3]. Bytes the vocab lacks get ids of their own (100 + byte).
    std::vector<uint32_t> byte_ids(256);
    for (int byte = 0; byte < 256; ++byte) byte_ids[size_t(byte)] = uint32_t(100 + byte);
    const std::string handout_bytes = " aceht";
    for (size_t i = 0; i < handout_bytes.size(); ++i) byte_ids[size_t(uint8_t(handout_bytes[i]))] = uint32_t(i);
    const std::vector<bpe::MergeRule> handout_merges = {{5, 4, 6}, {0, 2, 7}, {0, 1, 8}, {6, 3, 9}, {8, 5, 10}};
    {
        bpe::Encoder encoder(byte_ids, handout_merges, {}, 64);
        std::vector<uint32_t> ids;
        encoder.encode("the cat ate", ids);
        check(ids == std::vector<uint32_t>{9, 7, 1, 5, 10, 3}, "the handout's encoding of \"the cat ate\"");
    }

    // Merges trained (by the naive trainer) on a generated corpus, a special token, and texts from the
    // same generator: the encoder's ids against merging each pre-token by the lowest rank, by hand.
    Random random(3);
    Counts corpus_words;
    for (int document = 0; document < 20; ++document) {
        for (const std::string& token : gpt2_text(random, 200).tokens) ++corpus_words[token];
    }
    const std::vector<Pair> trained = naive_merges(corpus_words, 300);
    std::map<std::string, uint32_t> vocab;
    for (int byte = 0; byte < 256; ++byte) vocab[std::string(1, char(byte))] = uint32_t(byte);
    std::map<std::pair<uint32_t, uint32_t>, size_t> ranks;
    std::vector<bpe::MergeRule> rules;
    std::vector<std::string> spelling(256);
    for (int byte = 0; byte < 256; ++byte) spelling[size_t(byte)] = std::string(1, char(byte));
    for (const Pair& merge : trained) {
        const uint32_t left = vocab.at(merge.first), right = vocab.at(merge.second);
        const uint32_t merged = uint32_t(256 + rules.size());
        vocab[merge.first + merge.second] = merged;
        ranks.emplace(std::make_pair(left, right), rules.size());
        rules.push_back({left, right, merged});
    }
    const std::string special = "<|endoftext|>";
    const uint32_t special_id = uint32_t(256 + rules.size());
    for (uint32_t id = 0; id < 256; ++id) byte_ids[id] = id;

    const auto naive_encode = [&](const std::string& text) {
        std::vector<uint32_t> out;
        size_t begin = 0;
        for (;;) {
            const size_t end = std::min(text.find(special, begin), text.size());
            for (const std::string& token : split(PretokenPattern::kGpt2, ScannerPath::kScalar,
                                                  std::string_view(text).substr(begin, end - begin))) {
                std::vector<uint32_t> ids;
                for (unsigned char byte : token) ids.push_back(byte);
                for (;;) {
                    size_t best = SIZE_MAX;
                    for (size_t i = 0; i + 1 < ids.size(); ++i) {
                        const auto found = ranks.find({ids[i], ids[i + 1]});
                        if (found != ranks.end() && found->second < best) best = found->second;
                    }
                    if (best == SIZE_MAX) break;
                    std::vector<uint32_t> merged;
                    for (size_t i = 0; i < ids.size(); ++i) {
                        if (i + 1 < ids.size() && ids[i] == rules[best].left && ids[i + 1] == rules[best].right) {
                            merged.push_back(rules[best].merged);
                            ++i;
                        } else {
                            merged.push_back(ids[i]);
                        }
                    }
                    ids = std::move(merged);
                }
                out.insert(out.end(), ids.begin(), ids.end());
            }
            if (end == text.size()) break;
            out.push_back(special_id);
            begin = end + special.size();
        }
        return out;
    };

    bpe::Encoder encoder(byte_ids, rules, {{special, special_id}}, 1024);
    std::vector<std::string> texts;
    for (int i = 0; i < 24; ++i) {
        std::string text = gpt2_text(random, random.below(400)).text;
        if (i % 3 == 0) text += special + gpt2_text(random, 50).text + special;
        texts.push_back(text);
    }
    std::vector<std::vector<uint32_t>> expected;
    for (const std::string& text : texts) expected.push_back(naive_encode(text));
    check(expected[0].size() < texts[0].size(), "the trained merges shorten the texts");
    for (ScannerPath path : kPaths) {
        bpe::set_scanner_path(path);
        for (size_t i = 0; i < texts.size(); ++i) {
            std::vector<uint32_t> ids;
            encoder.encode(texts[i], ids);
            check(ids == expected[i],
                  std::string("encode on the ") + path_name(path) + " path, text " + std::to_string(i));
        }
    }
    bpe::set_scanner_path(ScannerPath::kFast);

    std::vector<std::string_view> views(texts.begin(), texts.end());
    std::vector<std::vector<uint32_t>> buffers;
    std::vector<uint32_t*> outs;
    for (const std::string& text : texts) buffers.emplace_back(text.size() + bpe::Encoder::kSpareIds);
    for (auto& buffer : buffers) outs.push_back(buffer.data());
    std::vector<size_t> written(texts.size());
    encoder.encode_batch(views, outs.data(), written.data(), kThreads);
    for (size_t i = 0; i < texts.size(); ++i) {
        buffers[i].resize(written[i]);
        check(buffers[i] == expected[i],
              "encode_batch on " + std::to_string(kThreads) + " threads, text " + std::to_string(i));
    }
}

}  // namespace

int main() {
    std::printf("native_selftest: fast path %s, OpenMP %s\n", fast_path_kind(),
                bpe::openmp_enabled() ? "on (the several-thread checks use 4)"
                                      : "off (the several-thread checks run on one)");
    const struct {
        const char* name;
        void (*run)();
    } sections[] = {{"hand-worked splits", hand_worked_splits},
                    {"constructed splits", constructed_splits},
                    {"paths agree", paths_agree},
                    {"counting", counting},
                    {"merging", merging},
                    {"encoding", encoding}};
    for (const auto& section : sections) {
        const int failed_before = failures;
        try {
            section.run();
        } catch (const std::exception& error) {
            check(false, std::string(section.name) + " threw: " + error.what());
        }
        std::printf("  %-20s %s\n", section.name, failures == failed_before ? "ok" : "FAILED");
    }
    std::printf("native_selftest: %d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
