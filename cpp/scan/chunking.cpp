#include "scan/chunking.hpp"

#include <algorithm>
#include <cstdint>

#include "kit/omp_shim.hpp"
#include "scan/pretokenize.hpp"

namespace bpe {
namespace {

constexpr size_t kMaxSpecialTokenWindow = size_t(1) << 20;
constexpr size_t kParallelBoundaryBytes = size_t(64) << 20;
constexpr size_t kChunkBudget = size_t(64) << 20;

// Whether the character ending just before `p` (0 < p) is complete and not whitespace. ASCII is
// one byte; a multi-byte character is decoded back from its lead byte.
bool non_space_ends_before(std::string_view text, size_t p) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
    if (bytes[p - 1] < 0x80) return detail::kAscii.classes[bytes[p - 1]] != unicode_tables::kSpace;
    size_t lead = p - 1;
    while (lead > 0 && p - lead < 4 && detail::is_continuation(bytes[lead])) --lead;
    uint8_t cls;
    // \s is the same in every Unicode table (scripts/probe_unicode_classes.py): the first serves all.
    return detail::read_multibyte(bytes + lead, bytes + p, cls, unicode_tables::kTables[0]) == p - lead &&
           cls != unicode_tables::kSpace;
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

// Whether text[p - 1] (0 < p) is an ASCII letter or digit.
bool ascii_alnum_before(std::string_view text, size_t p) {
    const uint8_t cls = detail::kAscii.classes[static_cast<unsigned char>(text[p - 1])];
    return cls == unicode_tables::kLetter || cls == unicode_tables::kNumber;
}

// Whether text[p - 1] (0 < p) is '\r' or '\n' and text[p] is neither.
bool line_end_before(std::string_view text, size_t p) {
    const auto is_newline = [](char byte) { return byte == '\r' || byte == '\n'; };
    return is_newline(text[p - 1]) && !is_newline(text[p]);
}

// First p in [from, limit) where `rule` allows a cut (ChunkCut, pretokenize_gpt4.hpp), not inside a
// special token. At whitespace: text[p] in {' ', '\n'} after a non-space character (GPT-2's), or
// after an ASCII letter or digit (GPT-4's patterns take newlines after punctuation, ` ?[^\s\p{L}\p{N}]++[\r\n]*`;
// there a letter or number run ends at p, and the text before the cut ends in no whitespace for
// `\s++$` to see): no alternative matches whitespace after such a character, so the word before p
// ends at p; the whitespace run starts a new word, and `(?!\S)` only looks forward from inside it.
// After a line end (superword's): the run of \r \n before p ends there, and nothing before it looks
// past it. An ASCII byte never lies inside a multi-byte character.
size_t find_pattern_cut(std::string_view text, const SpecialTokens& special, size_t from, size_t limit,
                        ChunkCut rule) {
    for (size_t p = std::max<size_t>(from, 1); p < limit; ++p) {
        bool allowed;
        if (rule == ChunkCut::kAfterLineEnd) {
            allowed = line_end_before(text, p);
        } else {
            const char byte = text[p];
            allowed = (byte == ' ' || byte == '\n') &&
                      (rule == ChunkCut::kAfterNonSpace ? non_space_ends_before(text, p) : ascii_alnum_before(text, p));
        }
        if (allowed && !special.spans(text, p)) return p;
    }
    return std::string_view::npos;
}

// The cut for the target offset `from`: a special token within `window`, else the pattern's cut
// (chunk_cut_of) within `reach`; npos when there is neither (the chunk then simply grows).
size_t next_cut(std::string_view text, const SpecialTokens& special, size_t from, size_t window,
                size_t reach, ChunkCut rule) {
    if (!special.empty()) {
        const size_t cut = find_special_token_cut(text, special, from, std::min(text.size(), from + window));
        if (cut != std::string_view::npos) return cut;
    }
    return find_pattern_cut(text, special, from, std::min(text.size(), from + reach), rule);
}

}  // namespace


size_t default_chunk_bytes(size_t text_size, int threads) {
    // Several chunks per thread balance uneven text; bounded so tables stay warm and startup is short.
    // A mapped file's chunks stay resident while they are counted, so the threads share one budget
    // of kChunkBudget bytes in flight: 64 MiB chunks on one thread, 4 MiB on 16.
    const size_t team = size_t(std::max(threads, 1));
    const size_t per_chunk = text_size / (team * 8) + 1;
    return std::clamp<size_t>(per_chunk, size_t(1) << 20, std::max<size_t>(kChunkBudget / team, size_t(1) << 20));
}


std::vector<size_t> chunk_boundaries(std::string_view text, const SpecialTokens& special_tokens,
                                     size_t chunk_bytes, int num_threads, const MappedFile* file,
                                     PretokenPattern pattern) {
    chunk_bytes = std::max<size_t>(chunk_bytes, 1);
    const size_t targets = text.size() / chunk_bytes;  // cuts wanted at chunk_bytes * (1..targets)
    const size_t window = std::min(chunk_bytes, kMaxSpecialTokenWindow);
    std::vector<size_t> cuts(targets);
    const ChunkCut cut_rule = chunk_cut_of(pattern);
    // Each cut depends only on its target, so they can be found in parallel and are schedule-free;
    // finding one is quick (the text near the target), so only big inputs are worth a thread team.
    const int threads = text.size() < kParallelBoundaryBytes ? 1
                        : num_threads > 0                    ? num_threads
                                                             : omp_default_threads();
    parallel_for(targets, threads, [&](size_t index) {
        const size_t target = (index + 1) * chunk_bytes;
        cuts[index] = next_cut(text, special_tokens, target, window, chunk_bytes, cut_rule);
        // The search faulted in the pages it read, each fault a whole large folio (up to 2 MiB on
        // Linux 6): on many threads, hundreds of MiB that would stay until their chunks are counted.
        if (file != nullptr) {
            const size_t searched_to = std::min(text.size(), std::min(cuts[index], target + chunk_bytes));
            file->release(text.data() + target, searched_to - target);
        }
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

}  // namespace bpe
