// UTF-8 from the code units of a Python str as CPython stores it (PEP 393: one, two or four bytes per
// character), without the Python API, so that the bindings can transcode with the GIL released and
// faster than str.encode: ASCII runs go eight or sixteen characters at a time.
#pragma once

#include <cstddef>

namespace bpe {

// Returned by utf8_from_code_units for a surrogate code point, which UTF-8 cannot encode.
inline constexpr size_t kSurrogateInText = static_cast<size_t>(-1);

// The most UTF-8 bytes one code unit of `unit_bytes` (1, 2 or 4) bytes becomes.
constexpr size_t max_utf8_bytes_per_unit(int unit_bytes) { return unit_bytes == 1 ? 2 : unit_bytes == 2 ? 3 : 4; }

// Writes the UTF-8 of the `count` code units at `units`, `unit_bytes` (1, 2 or 4) bytes each, to
// `out` (room for count * max_utf8_bytes_per_unit(unit_bytes) bytes) and returns how many bytes it
// wrote, or kSurrogateInText (then `out` holds garbage).
size_t utf8_from_code_units(const void* units, size_t count, int unit_bytes, char* out);

}  // namespace bpe
