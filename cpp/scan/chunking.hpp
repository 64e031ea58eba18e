// Cutting a corpus into chunks that can be counted independently (on separate threads) with exactly
// the counts of the whole.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "io/mapped_file.hpp"
#include "scan/pretokenize_gpt4.hpp"  // PretokenPattern
#include "scan/special_tokens.hpp"

namespace bpe {

// Cut offsets [0, ..., text.size()] (strictly increasing), at most one per multiple of
// `chunk_bytes`, each within `chunk_bytes` after its target (targets with no cut in reach are
// skipped). A cut is the start of a special token that no other occurrence spans, preferred within
// min(chunk_bytes, 1 MiB) of the target; else a position spanned by no special token where the
// `pattern`'s cut rule (chunk_cut_of, the scanner's entry in kNamedScanners) allows one: GPT-2's
// at ' ' or '\n' right after a non-whitespace character (no GPT-2 alternative matches whitespace
// after a non-space, so the word before p ends at p, and `(?!\S)` only looks forward from p); GPT-4's
// and o200k's at ' ' or '\n' after an ASCII letter or digit; superword's after a line end (see
// chunking.cpp). Counting the chunks separately equals counting the whole.
// When `text` lies in `file`, the pages each search read are released as soon as its cut is found.
std::vector<size_t> chunk_boundaries(std::string_view text, const SpecialTokens& special_tokens,
                                     size_t chunk_bytes, int num_threads = 0, const MappedFile* file = nullptr,
                                     PretokenPattern pattern = PretokenPattern::kGpt2);

// The chunk size when none is asked for: several chunks per thread, at least 1 MiB, the threads'
// chunks together at most 64 MiB (a mapped chunk is resident while it is counted).
size_t default_chunk_bytes(size_t text_size, int threads);

}  // namespace bpe
