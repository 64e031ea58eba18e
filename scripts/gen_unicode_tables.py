"""Generate cpp/scan/unicode_tables.hpp: the character classes of the native pre-tokenizers' patterns,
one table per Unicode version the references use; and cs336_basics/rules/unicode_classes.py, each table's
classes where the versions differ, for the pure-Python path (`pattern.classes_as`).

The native pre-tokenizer must agree with `regex.finditer` on every input, so the classes `\\p{L}`,
`\\p{N}` and `\\s` (every pattern's), and o200k's upper- and lower-case letter classes (marks in both),
are not taken from a Unicode database but from the installed `regex` package itself: every code point
0..0x10FFFF (surrogates included) is tested with it. Rerun this script after
upgrading `regex`; CI runs `--check`, which fails when the checked-in tables no longer match (the
versions named in the file's header may differ: Python's `unicodedata` changes with Python, not
with `regex`).

The installed `regex`'s table comes from testing it; the other versions' (18.0 down to 15.0, those of
rustbpe, tiktoken, HF tokenizers and the `regex` releases `regex>=2023.0` allows) are it with the
differences scripts/unicode_versions.json records: `scripts/probe_unicode_classes.py --write` probed
them from each tool and release itself (docs/REFERENCES.md). The script stops with one line when the
installed `regex` is not the release that data was probed against (`.ci/constraints.txt` pins it).

Layout: two tables per version, each a two-level lookup (the versions share the distinct blocks and
differ in their block indexes). Code points are grouped into blocks of 128;
`kClassBlockIndex[cp >> 7]` names one of the distinct blocks, stored 2 bits per code point in
`kClassBlocks`. Code points past the last block that has a letter, number or space are all "other" and
need no table. o200k's table (`kClassCaseBlockIndex`, `kClassCaseBlocks`) is built the same way with
4 bits per code point, the class and o200k's two letter classes together (bit 2 in the upper-case
one, bit 3 in the lower-case one): its scanner reads both with one lookup.

    python scripts/gen_unicode_tables.py           # rewrite both files
    python scripts/gen_unicode_tables.py --check   # exit 1 if either checked-in file is stale
"""

from __future__ import annotations

import argparse
import json
import sys
import unicodedata
from pathlib import Path

import regex

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from cs336_basics.rules.pattern import O200K_LOWER_CLASS, O200K_UPPER_CLASS  # noqa: E402

OUTPUT = Path(__file__).resolve().parent.parent / "cpp" / "scan" / "unicode_tables.hpp"
# The same tables where the versions differ, for the pure-Python path (cs336_basics/rules/pattern.py).
PYTHON_OUTPUT = Path(__file__).resolve().parent.parent / "cs336_basics" / "rules" / "unicode_classes.py"
# The other Unicode versions' tables, as differences from the installed regex's (probe_unicode_classes.py).
DATA = Path(__file__).resolve().parent / "unicode_versions.json"
MAX_CODE_POINT = 0x10FFFF
BLOCK_SHIFT = 7
BLOCK_SIZE = 1 << BLOCK_SHIFT
BITS_PER_CLASS = 2
# o200k's table: the class in the low 2 bits, the case in the next 2.
BITS_PER_CLASS_AND_CASE = 4

# Class codes shared with cpp/scan/pretokenize.hpp; "other" is 0 so the untabled tail needs nothing.
OTHER, LETTER, NUMBER, SPACE = 0, 1, 2, 3
# Compiled with the same (default) flags as the GPT-2 pattern in cs336_basics/rules/contract.py.
CLASS_PATTERNS = {LETTER: r"\p{L}+", NUMBER: r"\p{N}+", SPACE: r"\s+"}
# o200k's letter classes as cs336_basics/rules/pattern.py spells them: a code point's case is the sum of
# the bits of those it is in (3: in both, Lm, Lo and the marks).
UPPER, LOWER = 1, 2
CASE_PATTERNS = {UPPER: O200K_UPPER_CLASS + "+", LOWER: O200K_LOWER_CLASS + "+"}
PROVENANCE = "// Source:"


def classify_all_code_points() -> bytearray:
    """The class of every code point, as the installed `regex` package sees it."""
    everything = "".join(map(chr, range(MAX_CODE_POINT + 1)))
    classes = bytearray(MAX_CODE_POINT + 1)
    for code, pattern in CLASS_PATTERNS.items():
        for match in regex.finditer(pattern, everything):
            for code_point in range(match.start(), match.end()):
                if classes[code_point] != OTHER:
                    # The pre-tokenizer relies on the three classes being disjoint.
                    sys.exit(f"U+{code_point:04X} matches both {pattern} and class {classes[code_point]}")
                classes[code_point] = code
    return classes


def case_of_all_code_points(classes: bytearray) -> bytearray:
    """The o200k case bits of every code point; checks what the scanner assumes: every letter has a
    case, and a code point with a case that is no letter (a mark) is "other" to the main classes."""
    everything = "".join(map(chr, range(MAX_CODE_POINT + 1)))
    cases = bytearray(MAX_CODE_POINT + 1)
    for bit, pattern in CASE_PATTERNS.items():
        for match in regex.finditer(pattern, everything):
            for code_point in range(match.start(), match.end()):
                cases[code_point] |= bit
    check_cases(classes, cases)
    return cases


def check_cases(classes: bytearray, cases: bytearray) -> None:
    """What the scanner assumes of a table: every letter has a case, and a code point with a case that
    is no letter (a mark) is "other" to the main classes."""
    for code_point, case in enumerate(cases):
        if (case != 0) != (classes[code_point] == LETTER) and classes[code_point] != OTHER:
            sys.exit(f"U+{code_point:04X} has o200k case {case} but class {classes[code_point]}")
        if classes[code_point] == LETTER and case == 0:
            sys.exit(f"U+{code_point:04X} is a letter in neither of o200k's letter classes")


def pack_block(values: bytearray, bits: int) -> tuple[int, ...]:
    per_word = 64 // bits
    words = []
    for first in range(0, BLOCK_SIZE, per_word):
        word = 0
        for index in range(per_word):
            word |= values[first + index] << (index * bits)
        words.append(word)
    return tuple(words)


def build_tables(tables: list[bytearray], bits: int) -> tuple[list[list[int]], list[tuple[int, ...]], int]:
    """(block index per 128-code-point block of each table, the distinct packed blocks all share, first
    code point no table classes)."""
    last_classified = max(max(cp for cp in range(len(values)) if values[cp] != 0) for values in tables)
    num_blocks = (last_classified >> BLOCK_SHIFT) + 1
    distinct: dict[tuple[int, ...], int] = {}
    indexes = []
    for values in tables:
        index = []
        for block in range(num_blocks):
            packed = pack_block(values[block * BLOCK_SIZE : (block + 1) * BLOCK_SIZE], bits)
            index.append(distinct.setdefault(packed, len(distinct)))
        indexes.append(index)
    return indexes, list(distinct), num_blocks * BLOCK_SIZE


def lookup_function(name: str, result: str, bits: int, table: str, table_end: str, outside: str) -> str:
    """The C++ two-level lookup of one table; `outside` is what a code point past its end gets."""
    per_word = 64 // bits
    return f"""\
inline constexpr {result} {name}(uint32_t code_point, const Table& table = kTables[0]) {{
    if (code_point >= {table_end}) return {outside};
    const uint32_t offset = code_point & ((1u << kBlockShift) - 1);
    const uint32_t block = table.{name}_index[code_point >> kBlockShift];
    const uint64_t word = {table}Blocks[block * {BLOCK_SIZE // per_word} + offset / {per_word}];
    return static_cast<{result}>((word >> ((offset % {per_word}) * {bits})) & {(1 << bits) - 1}u);
}}"""


def format_rows(items: list[str], per_row: int, indent: str = "    ") -> str:
    rows = [", ".join(items[start : start + per_row]) for start in range(0, len(items), per_row)]
    return ",\n".join(indent + row for row in rows)


def index_rows(indexes: list[list[int]]) -> str:
    """Each table's row of a two-level table's block index, in braces."""
    rows = [format_rows([str(value) for value in index], 20, " " * 8) for index in indexes]
    return ",\n".join("    {\n" + row + "\n    }" for row in rows)


def index_type(blocks: list[tuple[int, ...]]) -> str:
    return "uint8_t" if len(blocks) <= 256 else "uint16_t"


def block_words(blocks: list[tuple[int, ...]]) -> list[str]:
    return [f"0x{word:016x}" for block in blocks for word in block]


def unicode_versions(classes: bytearray, cases: bytearray) -> list[tuple[str, dict, bytearray]]:
    """(Unicode version, its entry in DATA, each code point's class | case << 2) for the installed
    `regex`'s version (first) and each version DATA records as differences from it."""
    data = json.loads(DATA.read_text(encoding="utf-8"))
    base = data["base"]
    counts = {"letter": classes.count(LETTER), "number": classes.count(NUMBER), "space": classes.count(SPACE),
              "upper": sum(1 for case in cases if case & UPPER), "lower": sum(1 for case in cases if case & LOWER)}
    if any(base["counts"][name] != count for name, count in counts.items()):
        sys.exit(f"{DATA.name} was probed against regex {', '.join(base['regex'])} (Unicode {base['unicode']}), whose "
                 f"classes the installed regex {regex.__version__} does not have: rerun "
                 "scripts/probe_unicode_classes.py --write (docs/REFERENCES.md)")
    values = bytearray(cls | (case << BITS_PER_CLASS) for cls, case in zip(classes, cases))
    versions = [(base["unicode"], base, values)]
    for unicode, entry in sorted(data["tables"].items(), key=lambda item: version_key(item[0]), reverse=True):
        table = bytearray(values)
        for first, last, value in entry["ranges"]:
            table[first : last + 1] = bytes([value]) * (last + 1 - first)
        check_cases(bytearray(value & 3 for value in table), bytearray(value >> BITS_PER_CLASS for value in table))
        versions.append((unicode, entry, table))
    return versions


def version_key(unicode: str) -> tuple[int, ...]:
    return tuple(int(part) for part in unicode.split("."))


def differing_ranges(tables: list[bytearray]) -> list[tuple[int, int]]:
    """[first, last] of each run of code points some two tables class (or case) differently."""
    ranges: list[tuple[int, int]] = []
    for cp in range(MAX_CODE_POINT + 1):
        if all(table[cp] == tables[0][cp] for table in tables[1:]):
            continue
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1] = (ranges[-1][0], cp)
        else:
            ranges.append((cp, cp))
    return ranges


def value_runs(table: bytearray, differing: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """(first, last, value) of each run of one value within the differing ranges."""
    runs: list[tuple[int, int, int]] = []
    for first, last in differing:
        for cp in range(first, last + 1):
            if runs and runs[-1][1] == cp - 1 and runs[-1][2] == table[cp]:
                runs[-1] = (runs[-1][0], cp, table[cp])
            else:
                runs.append((cp, cp, table[cp]))
    return runs


def render_python(versions: list[tuple[str, dict, bytearray]]) -> str:
    """cs336_basics/rules/unicode_classes.py: each table's values where some two tables differ."""
    differing = differing_ranges([table for _, _, table in versions])
    rows = []
    for unicode, _, table in versions:
        runs = [f"(0x{first:X}, 0x{last:X}, {value})" for first, last, value in value_runs(table, differing)]
        rows.append(f'    "{unicode}": (\n{format_rows(runs, 4, " " * 8)},\n    ),')
    names = ", ".join(f'"{unicode}"' for unicode, _, _ in versions)
    body = "\n".join(rows)
    return f'''\
r"""GENERATED by scripts/gen_unicode_tables.py -- do not edit by hand; rerun the script instead.

The native tables' classes (cpp/scan/unicode_tables.hpp) on the code points where their Unicode
versions differ, so that the pure-Python path (pattern.py) classes them as a table does. A value is
the class (0 other, 1 `\\p{{L}}`, 2 `\\p{{N}}`, 3 `\\s`) plus 4 in o200k's upper-case letter class and 8 in
its lower-case one.
"""

# The tables' Unicode versions, newest first (the header's kUnicodeVersions).
UNICODE_VERSIONS = ({names})

# Per version, (first, last, value) runs covering every code point where some two versions differ.
DIFFERING_CLASSES: dict[str, tuple[tuple[int, int, int], ...]] = {{
{body}
}}
'''


def render_all() -> tuple[str, str]:
    """(the C++ header, the Python module)."""
    classes = classify_all_code_points()
    cases = case_of_all_code_points(classes)
    versions = unicode_versions(classes, cases)
    return render(classes, cases, versions), render_python(versions)


def render(classes: bytearray, cases: bytearray, versions: list[tuple[str, dict, bytearray]]) -> str:
    tables = [table for _, _, table in versions]
    indexes, blocks, table_end = build_tables([bytearray(value & 3 for value in table) for table in tables],
                                              BITS_PER_CLASS)
    both_indexes, both_blocks, both_table_end = build_tables(tables, BITS_PER_CLASS_AND_CASE)
    differing = differing_ranges(tables)
    class_counts = ", ".join(f"{pattern[:-1]} {classes.count(code)}" for code, pattern in CLASS_PATTERNS.items())
    case_counts = f"upper only {cases.count(UPPER)}, lower only {cases.count(LOWER)}, both {cases.count(UPPER | LOWER)}"
    classify = lookup_function("classify", "CharClass", BITS_PER_CLASS, "kClass", "kTableEnd", "kOther")
    class_and_case_of = lookup_function(
        "class_and_case", "uint8_t", BITS_PER_CLASS_AND_CASE, "kClassCase", "kClassCaseTableEnd", "0"
    )
    sources = "\n".join(
        f"//   {index}: Unicode {unicode}: regex {', '.join(entry['regex'])}"
        + (f"; {', '.join(entry['tools'])}" if entry["tools"] else "")
        for index, (unicode, entry, _) in enumerate(versions)
    )
    count = len(versions)
    names = ", ".join(f'"{unicode}"' for unicode, _, _ in versions)
    return f"""\
// GENERATED by scripts/gen_unicode_tables.py -- do not edit by hand; rerun the script instead.
{PROVENANCE} the `regex` package {regex.__version__} (Python unicodedata {unicodedata.unidata_version}),
// testing every code point 0..0x10FFFF. Code points: {class_counts}; o200k cases {case_counts}.
// The tables of the other Unicode versions are that one with the differences {DATA.name} records
// (scripts/probe_unicode_classes.py probed each tool and regex release itself). Table by table, with
// the regex releases and tools whose classes it holds, every code point and every class:
{sources}
#pragma once

#include <cstdint>

namespace bpe {{
namespace unicode_tables {{

enum CharClass : uint8_t {{ kOther = {OTHER}, kLetter = {LETTER}, kNumber = {NUMBER}, kSpace = {SPACE} }};

inline constexpr uint32_t kBlockShift = {BLOCK_SHIFT};
inline constexpr unsigned kTableCount = {count};
// Each table's Unicode version, in the order of kTables.
inline constexpr const char* kUnicodeVersions[kTableCount] = {{{names}}};
// Code points from here on are all kOther.
inline constexpr uint32_t kTableEnd = 0x{table_end:X};

inline constexpr {index_type(blocks)} kClassBlockIndex[kTableCount][{len(indexes[0])}] = {{
{index_rows(indexes)}
}};

// {len(blocks)} distinct blocks of {BLOCK_SIZE} code points, {BITS_PER_CLASS} bits per code point.
inline constexpr uint64_t kClassBlocks[{len(blocks) * len(blocks[0])}] = {{
{format_rows(block_words(blocks), 4)}
}};

// o200k's letter classes: {O200K_UPPER_CLASS} (bit 0) and {O200K_LOWER_CLASS} (bit 1).
enum LetterCase : uint8_t {{ kNoCase = 0, kUpper = {UPPER}, kLower = {LOWER}, kEitherCase = {UPPER | LOWER} }};

// o200k's table: a code point's CharClass in the low {BITS_PER_CLASS} bits, its LetterCase above them.
inline constexpr unsigned kCaseShift = {BITS_PER_CLASS};
// Code points from here on are kOther with no case.
inline constexpr uint32_t kClassCaseTableEnd = 0x{both_table_end:X};

inline constexpr {index_type(both_blocks)} kClassCaseBlockIndex[kTableCount][{len(both_indexes[0])}] = {{
{index_rows(both_indexes)}
}};

// {len(both_blocks)} distinct blocks of {BLOCK_SIZE} code points, {BITS_PER_CLASS_AND_CASE} bits per code point.
inline constexpr uint64_t kClassCaseBlocks[{len(both_blocks) * len(both_blocks[0])}] = {{
{format_rows(block_words(both_blocks), 4)}
}};

// One Unicode version's classes: its rows of the block indexes (the blocks are shared).
struct Table {{
    const {index_type(blocks)}* classify_index;
    const {index_type(both_blocks)}* class_and_case_index;
}};

inline constexpr Table kTables[kTableCount] = {{
{format_rows([f"{{kClassBlockIndex[{index}], kClassCaseBlockIndex[{index}]}}" for index in range(count)], 2)}
}};

{classify}

{class_and_case_of}

// The code points where some two tables differ, as first and last of each run: where the bindings
// tell which table a `regex` release's classes are.
inline constexpr unsigned kDifferingRangeCount = {len(differing)};
inline constexpr uint32_t kDifferingRanges[2 * kDifferingRangeCount] = {{
{format_rows([f"0x{first:X}, 0x{last:X}" for first, last in differing], 6)}
}};

}}  // namespace unicode_tables
}}  // namespace bpe
"""


def without_provenance(header: str) -> str:
    """The header without its "Source:" line: the versions it names (Python's unicodedata differs
    between Python releases) do not matter when the tables themselves are equal."""
    return "".join(line for line in header.splitlines(keepends=True) if not line.startswith(PROVENANCE))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the checked-in file instead")
    args = parser.parse_args()
    generated, python_module = render_all()
    if args.check:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
        current_python = PYTHON_OUTPUT.read_text(encoding="utf-8") if PYTHON_OUTPUT.exists() else ""
        if without_provenance(current) != without_provenance(generated) or current_python != python_module:
            print(
                f"{OUTPUT.name} or {PYTHON_OUTPUT.name} does not match the classes of the installed regex "
                f"{regex.__version__}: run `python scripts/gen_unicode_tables.py` and commit the result",
                file=sys.stderr,
            )
            return 1
        note = "" if current == generated else " (tables identical; generated with other versions, see its header)"
        print(f"{OUTPUT.name} and {PYTHON_OUTPUT.name} are up to date for regex {regex.__version__}{note}")
        return 0
    OUTPUT.write_text(generated, encoding="utf-8")
    PYTHON_OUTPUT.write_text(python_module, encoding="utf-8")
    print(f"wrote {OUTPUT} and {PYTHON_OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
