"""A named pattern is one row (`cs336_basics.rules.pattern.PATTERN_ROWS`): every row keeps what a row promises
(it matches every character, its cuts split no pre-token, it exports, it is found by any of its names);
the native library's named scanners are the rows' (the one check); and a toy regex-only row, added the
way docs/PATTERNS.md says, trains on every version, counts, encodes and is a name of the command line,
with no other module told of it."""

from __future__ import annotations

import dataclasses
import json
import random
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import regex

from cs336_basics import BPEInputError, Tokenizer, count_words, train_bpe
from cs336_basics.commands.cli import main as cli_main
from cs336_basics.native.backend import pure_python_forced
from cs336_basics.outputs.export import check_exportable, hf_split_regex, tiktoken_pattern_problem
from cs336_basics.outputs.serialization import RUN_FILE
from cs336_basics.rules import pattern as patterns
from cs336_basics.rules.pattern import PATTERN_ROWS, NamedPattern, check_native_scanners, resolve_pattern
from cs336_basics.rules.splitting import safe_cuts
from tests.support import REPO_ROOT

SPECIAL = ["<|endoftext|>"]
# Where patterns part: contractions, digit runs, case runs, marks, punctuation before newlines, every
# kind of whitespace, and whitespace at the very end.
TEXTS = [
    "Hello, World! don't DON'T it's 1234567 x1y22z333\n\n  \tend  ",
    "über straße 42.5% — \u3000日本語のテキスト\r\n\r\n/path/to a/\nb \u0301abc A\u0301BC HelloWORLD 'S's",
    "word, " * 5 + "!\n\n  \n " + "x" * 30 + "  \u2014abc \u2014\u2014abc \U0001f600\U0001f600 ²½٣\x85\xa0",
    " ",
    "a",
    "",
]

# The toy row a newcomer adds: letters, pairs of digits, other symbols, whitespace (every character).
TOY = NamedPattern("toy", r"\p{L}+|\p{N}{1,2}|[^\s\p{L}\p{N}]+|\s+", "a toy", aliases=("toy_base",))
DOCUMENTS = ["the cat sat on 12345 mats", "über 42 x1!! ", "日本 the cat's hat\n\n", "hello world " * 5]


@pytest.fixture
def toy() -> Iterator[NamedPattern]:
    """The toy row appended to the table, as a newcomer appends it in pattern.py; the table restored after."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(patterns, "PATTERN_ROWS", (*PATTERN_ROWS, TOY))
        yield TOY


def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text(SPECIAL[0].join(DOCUMENTS), encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------
# What every row promises


@pytest.mark.parametrize("row", PATTERN_ROWS, ids=lambda row: row.name)
def test_a_row_is_found_by_each_of_its_names_in_any_case(row: NamedPattern) -> None:
    for name in (row.name, *row.aliases):
        for spelled in (name, name.upper(), name.capitalize()):
            assert resolve_pattern(spelled) == patterns.Pattern(row.regex, row.name)
    assert resolve_pattern(row.regex).row == row  # a recorded regex is its row again
    assert row.name in patterns.known_pattern_names()


@pytest.mark.parametrize("row", PATTERN_ROWS, ids=lambda row: row.name)
def test_a_row_matches_every_character(row: NamedPattern) -> None:
    compiled = regex.compile(row.regex)
    for text in TEXTS:
        assert "".join(compiled.findall(text)) == text


@pytest.mark.parametrize("row", PATTERN_ROWS, ids=lambda row: row.name)
def test_a_rows_cuts_split_no_pre_token(row: NamedPattern) -> None:
    compiled = regex.compile(row.regex)
    for text in TEXTS:
        whole = compiled.findall(text)
        cuts = set()
        if row.safe_cut is not None:
            cuts |= {match.end() for match in regex.finditer(row.safe_cut, text, flags=regex.REVERSE)}
        if row.cuts is not None:
            data = text.encode("utf-8")
            cuts |= {len(data[:cut].decode("utf-8")) for cut in safe_cuts(data, 0, len(data), row.cuts)}
        for cut in sorted(cuts):
            assert compiled.findall(text[:cut]) + compiled.findall(text[cut:]) == whole, (row.name, text, cut)


@pytest.mark.parametrize("row", PATTERN_ROWS, ids=lambda row: row.name)
def test_a_row_exports(row: NamedPattern) -> None:
    assert tiktoken_pattern_problem(row.regex) is None
    check_exportable(["hf", "tiktoken"], row.name)
    tokenizers = pytest.importorskip("tokenizers", reason="HF tokenizers is optional: pip install -e '.[export]'")
    split = tokenizers.pre_tokenizers.Split(tokenizers.Regex(hf_split_regex(row.regex)), "isolated")
    for text in TEXTS:
        assert [piece for piece, _ in split.pre_tokenize_str(text)] == regex.findall(row.regex, text)


@pytest.mark.parametrize("row", [row for row in PATTERN_ROWS if row.version1], ids=lambda row: row.name)
def test_a_version1_rows_classes_as_sets_match_as_lookaheads(row: NamedPattern) -> None:
    # `version1`: another Unicode version's classes spelled as sets split text as the lookaheads that
    # any regex gets (the same expression with an alternative that never matches is no row's).
    rng = random.Random(row.name)
    pool = [*patterns._differing_code_points()[::7], *"aZ1 '\n!\u0301"]
    for unicode in (patterns.UNICODE_VERSIONS[0], patterns.UNICODE_VERSIONS[-1]):  # the newest, the oldest
        as_sets = regex.compile(patterns.classes_as(row.regex, unicode))
        as_lookaheads = regex.compile(patterns.classes_as(row.regex + "|(?!)", unicode))
        for _ in range(40):
            text = "".join(rng.choice(pool) for _ in range(rng.randint(1, 30)))
            assert as_sets.findall(text) == as_lookaheads.findall(text), (unicode, ascii(text))


def test_a_native_row_says_where_its_text_is_cut() -> None:
    with pytest.raises(ValueError, match=r"cuts=\.\.\."):
        NamedPattern("fast", r"\S+|\s+", "a scanner", scanner="fast")
    with pytest.raises(ValueError, match="cuts is one of whitespace, line_ends"):
        NamedPattern("fast", r"\S+|\s+", "a scanner", scanner="fast", cuts="spaces")
    with pytest.raises(ValueError, match="lower-case"):
        NamedPattern("Toy", r"\S+|\s+", "a toy")


# ---------------------------------------------------------------------------------------------
# The one check of the C++'s scanners against the rows


def native_module(name: str):
    if pure_python_forced():
        pytest.skip("CS336_PURE_PYTHON is set: the native library is not loaded")
    return pytest.importorskip(f"cs336_basics.native.{name}", reason="the native extension is not built")


def test_the_native_library_has_the_rows_scanners() -> None:
    counter, encoder = native_module("_count_cpp"), native_module("_encode")
    assert set(counter.NATIVE_PATTERNS) == {row.scanner for row in PATTERN_ROWS if row.scanner is not None}
    assert encoder.NATIVE_PATTERNS == counter.NATIVE_PATTERNS
    assert encoder.NATIVE_CUTS == counter.NATIVE_CUTS
    check_native_scanners(counter.NATIVE_PATTERNS, counter.NATIVE_CUTS)  # what both bindings run when they load
    assert {row.scanner: row.cuts for row in PATTERN_ROWS if row.scanner is not None} == counter.NATIVE_CUTS
    for row in PATTERN_ROWS:
        assert resolve_pattern(row.name).native == (row.scanner is not None)


def test_a_row_whose_scanner_is_not_built_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = native_module("_count_cpp")
    built = NamedPattern("toy", TOY.regex, "a toy", scanner="toy", cuts="whitespace")
    monkeypatch.setattr(patterns, "PATTERN_ROWS", (*PATTERN_ROWS, built))
    with pytest.raises(ImportError, match=r"not the pattern rows' \(.*toy\): rebuild"):
        check_native_scanners(counter.NATIVE_PATTERNS)
    with pytest.raises(ImportError, match="rebuild"):
        check_native_scanners([*counter.NATIVE_PATTERNS, "extra"])


def test_a_row_whose_cuts_are_not_its_scanners_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    # The C++ cuts superword's text after line ends; a row that said whitespace would not be counted so.
    counter = native_module("_count_cpp")
    rows = tuple(
        dataclasses.replace(row, cuts="whitespace") if row.scanner == "superword" else row for row in PATTERN_ROWS
    )
    monkeypatch.setattr(patterns, "PATTERN_ROWS", rows)
    with pytest.raises(ImportError, match="cuts the text of scanner 'superword' at line_ends.*rebuild"):
        check_native_scanners(counter.NATIVE_PATTERNS, counter.NATIVE_CUTS)
    check_native_scanners(counter.NATIVE_PATTERNS)  # without the cuts, only the names are checked


# ---------------------------------------------------------------------------------------------
# A new row, added the way docs/PATTERNS.md says


def test_a_new_row_trains_by_name_on_every_version(trainer: str, toy: NamedPattern, tmp_path: Path) -> None:
    path = corpus(tmp_path)
    expected = train_bpe(path, 300, SPECIAL, trainer="bpe_v1", pattern="toy")
    assert train_bpe(path, 300, SPECIAL, trainer=trainer, pattern="TOY_base") == expected
    assert expected != train_bpe(path, 300, SPECIAL, trainer="bpe_v1")  # GPT-2's splits otherwise


def test_a_new_row_counts_its_matches(toy: NamedPattern, tmp_path: Path) -> None:
    matches = Counter(word.encode("utf-8") for document in DOCUMENTS for word in regex.findall(TOY.regex, document))
    counts = count_words(corpus(tmp_path), SPECIAL, pattern="toy")
    assert counts.counts == dict(matches) and counts.pattern_label == "toy"


def test_a_new_row_is_a_name_of_the_command_line(
    toy: NamedPattern, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert cli_main(["bpe_v2", str(out), "-d", str(corpus(tmp_path)), "-v", "300", "-q", "--pattern", "Toy"]) == 0
    run = json.loads((out / RUN_FILE).read_text(encoding="utf-8"))
    assert run["pattern"]["name"] == "toy" and run["pattern"]["regex"] == TOY.regex
    with pytest.raises(SystemExit):
        cli_main(["--help"])
    assert "toy (a toy)" in " ".join(capsys.readouterr().out.split())


def test_a_new_row_encodes(toy: NamedPattern, tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert cli_main(["bpe_v2", str(out), "-d", str(corpus(tmp_path)), "-v", "300", "-q", "--pattern", "toy"]) == 0
    tokenizer = Tokenizer.from_files(out / "vocab.json", out / "merges.txt")
    assert tokenizer.pattern.name == "toy" and not tokenizer.pattern.native_encoding
    text = "the cat sat on 12345 mats, über 42!\n"
    ids = tokenizer.encode(text)
    assert tokenizer.decode(ids) == text
    words = regex.findall(TOY.regex, text)
    assert sum((tokenizer.encode(word) for word in words), []) == ids  # the toy's pre-tokens, each alone
    assert list(tokenizer.encode_iterable([text[:7], text[7:]])) == ids
    with pytest.raises(BPEInputError, match="native=True needs a pattern the compiled encoder runs"):
        Tokenizer.from_files(out / "vocab.json", out / "merges.txt", native=True)


# ---------------------------------------------------------------------------------------------
# The section that says how


def test_adding_a_pattern_names_its_files() -> None:
    text = (REPO_ROOT / "docs" / "PATTERNS.md").read_text(encoding="utf-8")
    section = text.split("## Adding a pattern", 1)[1].split("\n## ", 1)[0]
    regex_only, native = section.split("### With a native scanner", 1)
    named = re.compile(r"^\d\. `([^`]+)`", flags=re.MULTILINE)
    assert named.findall(regex_only) == ["cs336_basics/rules/pattern.py"]
    files = named.findall(native)
    assert len(files) <= 4 and "cs336_basics/rules/pattern.py" in files
    for path in files:
        assert "NAME" in path or (REPO_ROOT / path).is_file(), path
