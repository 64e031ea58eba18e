"""Probe each reference tool's own character classes, code point by code point, and compare them with
the native scanner's tables.

Every pattern the native scanners run splits on the classes `\\p{L}`, `\\p{N}`, `\\s`, o200k's two letter
classes and, in cl100k's and o200k's case-insensitive contractions, the letters that fold to s, d, m,
t, l, v, r or e. Each tool matches them with its own Unicode tables, so this asks each tool itself which
code points (0..0x10FFFF, surrogates left out) are in each class, through its own regex engine:

- `regex` (the oracle's and CS336's): `regex.finditer`, in this process or, with `--regex DIR`, in a
  child with DIR (a `pip install --target DIR regex==X` of another release) first on its path;
- tiktoken: a `tiktoken.Encoding` built offline with the 256 single bytes as its ranks and the class as
  its `pat_str`: `encode_ordinary` keeps only the matched text, so decoding it gives the members;
- HF tokenizers (Oniguruma): a `Split` pre-tokenizer on the class, `behavior="removed"`: what
  `pre_tokenize_str` returns is the text that is not in the class;
- rustbpe (the Rust regex crate via fancy-regex): `train_from_iterator` with the class as its pattern on
  all code points: only matched text is counted, so a multi-byte character's bytes merge into one
  token exactly when it is a member (an ASCII one is trained doubled, `(?:CLASS){2}`, to have a merge).

A tool that is not installed is skipped, saying so. For each tool and class it prints how many code
points it classes differently from each of the native scanner's tables (scripts/gen_unicode_tables.py),
and which table agrees everywhere.

    python scripts/probe_unicode_classes.py
    python scripts/probe_unicode_classes.py --regex /tmp/regex-2023.3.22 --regex /tmp/regex-2024.11.6
    python scripts/probe_unicode_classes.py --write   # record the tools' classes for the generator
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from cs336_basics.rules.pattern import O200K_LOWER_CLASS, O200K_UPPER_CLASS  # noqa: E402

# What the tables of the other Unicode versions need: their differences from the installed regex's.
DATA = ROOT / "scripts" / "unicode_versions.json"

MAX_CODE_POINT = 0x10FFFF
SURROGATES = range(0xD800, 0xE000)
# The classes the native scanners' patterns use, each a one-character expression every engine reads.
CLASSES = {
    "letter": r"\p{L}",
    "number": r"\p{N}",
    "space": r"\s",
    "upper": O200K_UPPER_CLASS,
    "lower": O200K_LOWER_CLASS,
    "fold": r"(?i:[sdmtlvre])",
}


def all_text() -> str:
    """Every code point but the surrogates (which no tool takes as text), in order."""
    return "".join(chr(cp) for cp in range(MAX_CODE_POINT + 1) if not 0xD800 <= cp < 0xE000)


def members_from_text(matched: str) -> bytearray:
    out = bytearray(MAX_CODE_POINT + 1)
    for char in matched:
        out[ord(char)] = 1
    return out


def probe_regex(expression: str) -> bytearray:
    import regex

    out = bytearray(MAX_CODE_POINT + 1)
    for match in regex.finditer(expression + "+", all_text()):
        for char in match.group():
            out[ord(char)] = 1
    return out


def probe_tiktoken(expression: str) -> bytearray:
    import tiktoken

    ranks = {bytes([byte]): byte for byte in range(256)}
    encoding = tiktoken.Encoding(name="probe", pat_str=expression, mergeable_ranks=ranks, special_tokens={})
    return members_from_text(encoding.decode_bytes(encoding.encode_ordinary(all_text())).decode("utf-8"))


def probe_hf(expression: str) -> bytearray:
    from tokenizers import Regex, pre_tokenizers

    split = pre_tokenizers.Split(Regex(expression), behavior="removed")
    out = bytearray([1]) * (MAX_CODE_POINT + 1)
    for cp in SURROGATES:
        out[cp] = 0
    for piece, _ in split.pre_tokenize_str(all_text()):
        for char in piece:
            out[ord(char)] = 0
    return out


def probe_rustbpe(expression: str) -> bytearray:
    import rustbpe

    text = all_text()
    out = bytearray(MAX_CODE_POINT + 1)
    ascii_chars = [chr(cp) for cp in range(0x80)]
    tokenizer = rustbpe.Tokenizer()
    tokenizer.train_from_iterator(iter(c + c for c in ascii_chars), 256 + 128, pattern=f"(?:{expression}){{2}}")
    tokens = {bytes(token) for token, _ in tokenizer.get_mergeable_ranks()}
    for char in ascii_chars:
        out[ord(char)] = (char + char).encode() in tokens
    # In chunks: a chunk's merges are at most its bytes, so every member's bytes do merge.
    chunk = 1 << 14
    for start in range(0x80, len(text), chunk):
        part = text[start : start + chunk]
        tokenizer = rustbpe.Tokenizer()
        tokenizer.train_from_iterator(iter([part]), 256 + 4 * len(part), pattern=expression)
        tokens = {bytes(token) for token, _ in tokenizer.get_mergeable_ranks()}
        for char in part:
            if ord(char) >= 0x80 and char.encode() in tokens:
                out[ord(char)] = 1
    return out


TOOLS: dict[str, tuple[str, Callable[[str], bytearray]]] = {
    # name: (distribution, probe)
    "tiktoken": ("tiktoken", probe_tiktoken),
    "hf": ("tokenizers", probe_hf),
    "rustbpe": ("rustbpe", probe_rustbpe),
}


def probe_tool(tool: str) -> tuple[str, dict[str, bytearray]] | None:
    """("distribution version", its classes), or None if it is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    distribution, probe = TOOLS[tool]
    try:
        name = f"{distribution} {version(distribution)}"
    except PackageNotFoundError:
        print(f"{tool}: not probed ({distribution} is not installed)")
        return None
    return name, {cls: probe(expression) for cls, expression in CLASSES.items()}


def probe_regex_release(directory: str | None) -> tuple[str, str, dict[str, bytearray]]:
    """(release, Unicode version, classes) of the `regex` in `directory` (a child process with it first
    on the path), or of the installed one."""
    with tempfile.TemporaryDirectory() as scratch:
        env = dict(os.environ)
        if directory is not None:
            env["PYTHONPATH"] = os.pathsep.join([directory, env.get("PYTHONPATH", "")])
        subprocess.run([sys.executable, __file__, "--dump-regex", scratch], check=True, env=env)
        release, unicode = (Path(scratch) / "version").read_text(encoding="utf-8").split()
        return release, unicode, {cls: bytearray((Path(scratch) / cls).read_bytes()) for cls in CLASSES}


def dump_regex(directory: str) -> None:
    from importlib.metadata import version

    (Path(directory) / "version").write_text(f"{version('regex')} {unicode_version_of_regex()}", encoding="utf-8")
    for cls, expression in CLASSES.items():
        (Path(directory) / cls).write_bytes(probe_regex(expression))


def differences(a: bytearray, b: bytearray) -> int:
    return sum(1 for x, y in zip(a, b) if x != y)


def values(classes: dict[str, bytearray]) -> bytes:
    """Each code point's class and o200k case as the native tables store them (gen_unicode_tables.py)."""
    letter, number, space, upper, lower = (classes[cls] for cls in ("letter", "number", "space", "upper", "lower"))
    return bytes(
        (1 if letter[cp] else 2 if number[cp] else 3 if space[cp] else 0) | upper[cp] << 2 | lower[cp] << 3
        for cp in range(MAX_CODE_POINT + 1)
    )


def differing_ranges(table: bytes, base: bytes) -> list[list[int]]:
    """[first, last, value] for each run of code points where `table` differs from `base` with one value."""
    ranges: list[list[int]] = []
    for cp in range(MAX_CODE_POINT + 1):
        if table[cp] == base[cp]:
            continue
        if ranges and ranges[-1][1] == cp - 1 and ranges[-1][2] == table[cp]:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp, table[cp]])
    return ranges


def unicode_version_of_regex() -> str:
    """The Unicode version the installed `regex` release says it supports (its description's words)."""
    from importlib.metadata import metadata

    found = re.search(r"supports Unicode (\d+\.\d+)", metadata("regex").get_payload() or "")
    return found.group(1) if found else "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--regex", action="append", default=[], metavar="DIR",
                        help="also probe the regex release installed in DIR (pip install --target DIR regex==X)")
    parser.add_argument("--tools", default="tiktoken,hf,rustbpe", help="which tools to probe (comma-separated)")
    parser.add_argument("--write", action="store_true",
                        help=f"write what the tables of the other Unicode versions need to {DATA.relative_to(ROOT)}")
    parser.add_argument("--dump-regex", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.dump_regex:
        dump_regex(args.dump_regex)
        return 0

    base_release, base_unicode, base = probe_regex_release(None)
    print(f"regex {base_release} (installed, Unicode {base_unicode}; the native base table's source): "
          + ", ".join(f"{cls} {sum(members)}" for cls, members in base.items()))
    releases: dict[str, list[str]] = {base_unicode: [base_release]}
    tables: dict[str, bytes] = {base_unicode: values(base)}
    for directory in args.regex:
        release, unicode, classes = probe_regex_release(directory)
        if classes["fold"] != base["fold"]:
            sys.exit(f"regex {release} folds case differently: the scanners assume U+017F is the only non-ASCII fold")
        table = values(classes)
        if unicode in tables and tables[unicode] != table:
            sys.exit(f"regex {release} and {releases[unicode]} both say Unicode {unicode} but class differently")
        tables[unicode] = table
        releases.setdefault(unicode, []).append(release)
    tools: dict[str, list[str]] = {}
    for tool in filter(None, args.tools.split(",")):
        probed = probe_tool(tool)
        if probed is None:
            continue
        name, classes = probed
        counts = {cls: differences(members, base[cls]) for cls, members in classes.items()}
        same = [u for u, table in tables.items() if table == values(classes) and classes["fold"] == base["fold"]]
        print(f"{name}: differs from regex {base_release} on "
              + ", ".join(f"{cls} {count}" for cls, count in counts.items())
              + (f"; equal to regex's Unicode {same[0]} classes everywhere" if same else "; equal to no probed regex"))
        if same:
            tools.setdefault(same[0], []).append(name)
    for unicode, table in tables.items():
        if unicode != base_unicode:
            print(f"regex Unicode {unicode} ({', '.join(releases[unicode])}): differs from the base on "
                  f"{sum(1 for a, b in zip(table, tables[base_unicode]) if a != b)} code points")
    if args.write:
        data = {
            "about": "Written by scripts/probe_unicode_classes.py --write; read by scripts/gen_unicode_tables.py.",
            "base": {"unicode": base_unicode, "regex": releases[base_unicode], "tools": tools.get(base_unicode, []),
                     "counts": {cls: sum(members) for cls, members in base.items()}},
            "tables": {
                unicode: {"regex": releases[unicode], "tools": tools.get(unicode, []),
                          "ranges": differing_ranges(table, tables[base_unicode])}
                for unicode, table in sorted(tables.items()) if unicode != base_unicode
            },
        }
        DATA.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {DATA}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
