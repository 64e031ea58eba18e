"""The native pre-tokenizer and word counter against the Python reference, which is `regex` itself.

Pre-tokens must equal `regex.findall` with the GPT-2 pattern on every input; word counts must equal
splitting on special tokens (longest first) + `regex` + Counter, for any thread count and chunk size;
invalid UTF-8 must name the same byte offset Python's decoder reports. Every test here runs once per
scanner path (the 64-byte block path with SSE2 or NEON, with SWAR, and the character-by-character one).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cs336_basics.native.backend import pure_python_forced
from cs336_basics.rules.splitting import GPT2_REGEX, count_words_in_text
from tests.support import require_fixture

if pure_python_forced():
    pytest.skip("CS336_PURE_PYTHON is set: the native pre-tokenizer is not loaded", allow_module_level=True)
native = pytest.importorskip(
    "cs336_basics.native._count_cpp", reason="the native extension is not built (pip install -e . with a C++ compiler)"
)

ENDOFTEXT = "<|endoftext|>"


@pytest.fixture(scope="module", autouse=True, params=native.SCANNER_PATHS)
def scanner_path(request: pytest.FixtureRequest) -> Iterator[str]:
    previous = native.use_scanner_path(request.param)
    yield request.param
    native.use_scanner_path(previous)


# Characters where the pattern's alternatives meet: the space prefix, contractions, every kind of
# whitespace (Unicode and not: \x1c-\x1f are `str.isspace()` but not `regex`'s \s), letters with
# combining marks, digits of several scripts, symbols, NUL, CJK, emoji and astral letters.
# fmt: off
TRICKY = [
    " ", "  ", "\n", "\r\n", "\r", "\t", "\x0b", "\x0c", "\u3000", "\x85", "\xa0", "\u2028", "\u2029",
    "\u200b", "\u180e", "\u1680", "\u2009", "\ufeff", "\x1c", "\x1d", "\x1e", "\x1f", "\x00",
    "'", "'s", "'t", "'d", "'m", "'ll", "'ve", "'re", "'S", "'LL", "'l", "'v", "'r", "s", "l", "e",
    "a", "Z", "é", "e\u0301", "\u0301", "ß", "Ω", "я", "中", "文", "ｶ", "\U00020000", "\U0001d400",
    "0", "7", "²", "½", "①", "٣", "\U0001d7ce", "!", "?", ".", ",", "-", "$", "€", "\U0001f600",
    "\U0001f3fb", "\u200d", "\ue000", "\U0010fffd", "<|", "|>",
]
# fmt: on

code_points = st.characters(codec="utf-8")  # every plane; no surrogates, which UTF-8 cannot carry
runs = st.builds(lambda text, times: text * times, st.sampled_from(TRICKY), st.integers(1, 60))
texts = st.lists(st.one_of(st.sampled_from(TRICKY), st.text(code_points, max_size=8), runs), max_size=40).map("".join)

# Mostly ASCII and long enough for the 64-byte block path, with the pieces its rules are about:
# runs of every class crossing block edges, contractions and near misses, space runs before
# non-spaces, and now and then a non-ASCII character.
# fmt: off
ASCII_PIECES = [
    "the", " cat", "Sat", " on", "a", "Z", "42", " 7", "3.14", " ", "  ", "   ", "\n", "\n\n", "\r\n", "\t",
    " \n", "\n ", "\x0b", "\x0c", "\r", "'s", "'t", "'d", "'m", "'ll", "'ve", "'re", "'S", "'l", "'v", "'r",
    "'", "''", " '", "don't", "we'll", "!", "...", " (", ")", "-", "\"", "\x00", "\x1f", "\x7f", "~",
    "x" * 70, " " * 70, "1" * 70, "." * 70, "\n" * 33, "ab" * 20,
]
# fmt: on
ascii_heavy = st.lists(
    st.sampled_from(ASCII_PIECES) | st.sampled_from(TRICKY), min_size=10, max_size=150
).map("".join)
# Every character here is where some rule of the block path applies.
contraction_soup = st.text(st.sampled_from(list(" \n\r\t'sdmtlvreSx1.!é\u3000")), min_size=50, max_size=400)

# fmt: off
EXAMPLES = [
    "", " ", "  ", "\n", "a", "a  \nb", "x \u3000y", "x\u3000 y", "x \u3000 y", "trailing spaces   ",
    "trailing mixed \n\u3000", "  leading", "\n\n\nHi", "a \n", "a\r\nb", "don't", "I'll we've they're",
    "'s'", "'ll", "'S", " 's", "?'s", "''s", "'''", "a'sb", "x'", "'", "1'2", "  'm", "\u3000'd",
    "hello world", "  hello", " \u3000hello", "a\x1c b", "\x85\x85x", "\xa0\xa0 x", "12 345 6.7",
    "e\u0301t\u00e9 ", "中文 字", "😀😀 😀", "a\x00b \x00", "tab\tsep\t\tx",
]
# fmt: on


def reference(text: str) -> list[str]:
    return GPT2_REGEX.findall(text)


# ---------------------------------------------------------------------------------------------
# Pre-tokenization


@pytest.mark.parametrize("text", EXAMPLES)
def test_known_cases(text: str) -> None:
    assert native.pretokenize(text) == reference(text)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts)
def test_matches_regex_on_any_text(text: str) -> None:
    expected = reference(text)
    assert native.pretokenize(text) == expected
    data = text.encode("utf-8")
    assert native.pretokenize_bytes(data) == [token.encode("utf-8") for token in expected]
    ends = native.pretoken_ends(data)
    assert [data[start:end] for start, end in zip([0, *ends], ends)] == native.pretokenize_bytes(data)


@settings(max_examples=200, deadline=None)
@given(st.text(code_points, max_size=200))
def test_matches_regex_on_arbitrary_code_points(text: str) -> None:
    assert native.pretokenize(text) == reference(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ascii_heavy | contraction_soup)
def test_matches_regex_on_long_mostly_ascii_text(text: str) -> None:
    expected = reference(text)
    assert native.pretokenize(text) == expected
    for cut in (1, 63, 64, 65):  # starting elsewhere moves every block edge
        assert native.pretokenize(text[cut:]) == reference(text[cut:])


# Pieces placed at every offset of two blocks' worth of ASCII text, so that each falls on every
# position of a 64-byte block (and of the 8/16-byte words the masks are built from).
# fmt: off
EDGE_PIECES = [
    "é", "中", "\u3000", "\x85", "\xa0", "😀", "'s", "'ll", "'ve", "'x", " 's", "''s", "\r\n", "  \n", " x",
    "\n\nx", "  7", "x" * 40 + "é", " " * 40 + "\u3000", "'", "e\u0301",
]
FILLERS = ["word ", " ", "a", "7", ".", "\n", "it's ", "ab  cd\n"]
# fmt: on


@pytest.mark.parametrize("piece", EDGE_PIECES)
def test_pieces_at_every_block_offset(piece: str) -> None:
    for filler in FILLERS:
        background = filler * (200 // len(filler) + 1)
        texts = [background[:offset] + piece + background[: 150 - offset] for offset in range(140)]
        for text in texts:
            assert native.pretokenize(text) == reference(text), (filler, text)


def test_invalid_byte_at_every_block_offset() -> None:
    background = b"Once upon a time, it's said, 42 cats   ran\n\n" * 5
    for offset in range(len(background)):
        for bad in (b"\xff", b"\x80", b"\xe2\x82"):
            data = background[:offset] + bad + background[offset:]
            with pytest.raises(ValueError, match=f"invalid UTF-8 at byte offset {offset}$"):
                native.pretokenize_bytes(data)


def test_scalar_scanner_environment_switch() -> None:
    # CS336_SCALAR_SCANNER=1 selects the scalar path when the module is imported.
    code = "import cs336_basics.native._count_cpp as native; print(native.use_scanner_path('fast'))"
    env = {**os.environ, "CS336_SCALAR_SCANNER": "1"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "scalar"
    with pytest.raises(ValueError, match="scanner path"):
        native.use_scanner_path("vectorized")


def test_every_code_point() -> None:
    # In "a{c}1" the pre-tokens show c's class: letters join the "a", numbers the "1", whitespace and
    # other symbols stand alone (differently). The separators add more neighbours around each one.
    separators = [" ", "  ", "\n", "'s ", "\u3000", "!", ""]
    pieces = []
    for index, code_point in enumerate(range(0x110000)):
        if 0xD800 <= code_point <= 0xDFFF:
            continue
        pieces.append(f"a{chr(code_point)}1{separators[index % len(separators)]}")
    text = "".join(pieces)
    assert native.pretokenize(text) == reference(text)


def test_long_whitespace_runs() -> None:
    for run in [" " * 5000, "\n" * 5000, " \n" * 3000, "\u3000 " * 2000, " \t\r\n\x0b\x0c\x85\xa0\u3000" * 500]:
        for text in [run, run + "x", "x" + run, "x" + run + "y", run + "'s", run + "1"]:
            assert native.pretokenize(text) == reference(text)


# fmt: off
INVALID = [
    b"\x80", b"\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xc2", b"\xc2\x20", b"\xe0\x80\x80", b"\xe0\x9f\xbf",
    b"\xe2\x82", b"\xe2\x28\xa1", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xf0\x80\x80\x80", b"\xf0\x8f\xbf\xbf",
    b"\xf0\x9f\x98", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xfe", b"\xff",
]
# fmt: on


def decode_error_offset(data: bytes) -> int | None:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as error:
        return error.start
    return None


@pytest.mark.parametrize("bad", INVALID)
@pytest.mark.parametrize("before", ["", "a", "ab ", " ", "é", "'", "中 ", "x\u3000"])
def test_invalid_utf8_names_the_offset(bad: bytes, before: str) -> None:
    for after in [b"", b"z", b" more", b"\xe2\x82\xac"]:
        data = before.encode("utf-8") + bad + after
        offset = decode_error_offset(data)
        assert offset is not None
        with pytest.raises(ValueError, match=f"invalid UTF-8 at byte offset {offset}$"):
            native.pretokenize_bytes(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=60) | texts.map(lambda text: text.encode("utf-8")), st.data())
def test_any_bytes_tokenize_or_fail_like_python(data: bytes, draw: st.DataObject) -> None:
    if data and draw.draw(st.booleans()):  # corrupt one byte of (usually valid) text
        position = draw.draw(st.integers(0, len(data) - 1))
        data = data[:position] + bytes([draw.draw(st.integers(0x80, 0xFF))]) + data[position + 1 :]
    offset = decode_error_offset(data)
    if offset is None:
        assert native.pretokenize_bytes(data) == [t.encode("utf-8") for t in reference(data.decode("utf-8"))]
    else:
        with pytest.raises(ValueError, match=f"invalid UTF-8 at byte offset {offset}$"):
            native.pretokenize_bytes(data)


def test_surrogates_in_str_are_rejected() -> None:
    with pytest.raises(UnicodeEncodeError):
        native.pretokenize("a\ud800b")


# ---------------------------------------------------------------------------------------------
# Counting

THREADS = [1, 2, 4, 8]  # eight: the threads share a table of words
CHUNK_BYTES = [1, 3, 16, 200, None]

SPECIAL_SETS = [
    [],
    [ENDOFTEXT],
    [ENDOFTEXT, ENDOFTEXT * 2],  # overlapping: the longer wins where both match
    ["<|a|>", "<|a|>b", "b<|a|>"],
    ["aa"],  # overlaps itself: leftmost first
    ["\n\n", " <s>", "d\n", "<|end of text|>"],  # whitespace inside: no chunk cut may split them
    ["é", "中文"],
    ["the"],  # inside ordinary words
]

# fmt: off
DOCUMENT_PIECES = [
    "The cat sat on the mat.", " word", "w0rd", "42", " ", "  ", "\n", "\n\n", " \n", "é", "中文", "'s", "!!",
    "\t", "\u3000", "<|", "|>", "<|a|>", "<|a|>b", "b", "aaa", "the", " <s>", ENDOFTEXT, ENDOFTEXT * 2,
    "x \u3000y", "a  \nb", "trailing  ", "d\n", "end\n\nd", "<|end of text|>",
]
# fmt: on


def python_counts(data: bytes, special_tokens: list[str]) -> dict[bytes, int]:
    return dict(count_words_in_text(data.decode("utf-8"), special_tokens))


def ordered(counts: native.NativeWordCounts) -> list[tuple[bytes, int]]:
    return list(counts.to_dict().items())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pieces=st.lists(st.sampled_from(DOCUMENT_PIECES) | st.text(code_points, max_size=6), max_size=80),
    special_tokens=st.sampled_from(SPECIAL_SETS),
)
@example(pieces=[ENDOFTEXT, "a", ENDOFTEXT * 3, "b", ENDOFTEXT], special_tokens=[ENDOFTEXT, ENDOFTEXT * 2])
@example(pieces=["aaaaa aa a"], special_tokens=["aa"])
@example(pieces=["x<|a|>bc <|a|>b<|a|>bb<|a|>"], special_tokens=SPECIAL_SETS[3])
@example(pieces=["and\n\nend\nmore d\nx <|end of text|>"], special_tokens=SPECIAL_SETS[5])
def test_counts_match_python_for_any_threads_and_chunks(pieces: list[str], special_tokens: list[str]) -> None:
    data = "".join(pieces).encode("utf-8")
    expected = python_counts(data, special_tokens)
    first = None
    for threads in THREADS:
        for chunk_bytes in CHUNK_BYTES:
            counts = native.count_words_in_buffer(data, special_tokens, threads, chunk_bytes)
            assert counts.to_dict() == expected, (threads, chunk_bytes)
            first = first or ordered(counts)
            assert ordered(counts) == first, "the order of words depends on threads or chunks"



def test_counts_match_where_tables_grow_to_their_predicted_size() -> None:
    """With more than two tables, a table past 2^17 home slots grows to the words it predicts from
    its share of the text, not to a power of two, so that partitions end between slots: hundreds of
    thousands of distinct words (letters only: one pre-token each) in many chunks."""
    rng = random.Random(7)

    def letters(number: int) -> str:
        return "".join(chr(ord("a") + (number >> shift) % 26) for shift in range(0, 25, 5))

    words = [" " + letters(rng.randrange(2**25) if rng.random() < 0.6 else rng.randrange(300)) for _ in range(600_000)]
    expected = {word.encode("utf-8"): count for word, count in Counter(words).items()}
    assert len(expected) > 300_000
    data = "".join(words).encode("utf-8")
    first = None
    for threads, chunk_bytes in [(3, 65_536), (7, 100_000)]:
        counts = native.count_words_in_buffer(data, [], threads, chunk_bytes)
        assert counts.to_dict() == expected, (threads, chunk_bytes)
        first = first or ordered(counts)
        assert ordered(counts) == first, "the order of words depends on threads or chunks"


def test_counts_match_once_the_shared_words_are_full() -> None:
    """On eight threads or more the words are looked up in one shared table of about 105K words.
    Past that many, new words go to each thread's own table, and a word seen there and in the
    shared table is summed when the tables are merged: 110K distinct words once each (a few of them
    long words, whose bytes the shared table keeps), then common words with one of the words past
    the limit now and then, few enough that the threads keep looking words up in the shared table."""
    rng = random.Random(11)

    def letters(number: int, length: int) -> str:  # a distinct word for each number below 26**4
        return "".join(chr(ord("a") + (number // 26**place) % 26) for place in range(length))

    distinct = [" " + letters(number, 17 if number % 50 == 0 else 5) for number in range(110_000)]
    common = distinct[:300]
    words = list(distinct)
    for _ in range(400_000):
        words.append(rng.choice(distinct[106_000:]) if rng.random() < 0.02 else rng.choice(common))
    data = "".join(words).encode("utf-8")
    expected = native.count_words_in_buffer(data, [], 1, None).to_dict()
    assert expected == {word.encode("utf-8"): count for word, count in Counter(words).items()}
    first = None
    for threads, chunk_bytes in [(8, 1 << 16), (11, 100_000)]:
        counts = native.count_words_in_buffer(data, [], threads, chunk_bytes)
        assert counts.to_dict() == expected, (threads, chunk_bytes)
        first = first or ordered(counts)
        assert ordered(counts) == first, "the order of words depends on threads or chunks"


# fmt: off
SPLIT_TEXTS = [
    "x<|a|>bc", "<|a|>b<|a|>", "b<|a|>bc", "<|a|><|a|>b", "aaaaa", "a aa aaa", "<|endoftext|><|endoftext|>x",
    "<|endoftext|>" * 3 + "y", "the other theme", "end\n\nd\n\n", "x <s> <|end of text|> y", "é中文é",
]
# fmt: on


@pytest.mark.parametrize("special_tokens", SPECIAL_SETS)
def test_special_tokens_split_like_regex(special_tokens: list[str]) -> None:
    # Leftmost match first; of the tokens matching there, the longest.
    for text in SPLIT_TEXTS:
        data = text.encode("utf-8")
        for threads, chunk_bytes in [(1, None), (2, 1)]:
            counts = native.count_words_in_buffer(data, special_tokens, threads, chunk_bytes)
            assert counts.to_dict() == python_counts(data, special_tokens), text


@pytest.mark.parametrize("special_tokens", SPECIAL_SETS[:4])
@pytest.mark.parametrize("layout", ["tokens at both ends", "adjacent tokens", "no tokens"])
def test_count_file(tmp_path: Path, special_tokens: list[str], layout: str) -> None:
    story = "Once upon a time, a cat's  friend said: \"don't\"\n\n  It ran 42 km!\u3000终 "
    if layout == "tokens at both ends":
        text = ENDOFTEXT + (story + ENDOFTEXT) * 300 + ENDOFTEXT * 2
    elif layout == "adjacent tokens":
        text = (story + ENDOFTEXT * 3 + "<|a|>bb<|a|>") * 300
    else:
        text = story * 300
    path = tmp_path / "corpus.txt"
    path.write_bytes(text.encode("utf-8"))
    expected = python_counts(path.read_bytes(), special_tokens)
    results = [
        ordered(native.count_words(path, special_tokens, threads, chunk_bytes))
        for threads in THREADS
        for chunk_bytes in [7, 1000, None]
    ]
    assert dict(results[0]) == expected
    assert all(result == results[0] for result in results)


@pytest.mark.parametrize("fixture", ["corpus.en", "tinystories_sample.txt"])
def test_count_real_text(fixture: str) -> None:
    source = require_fixture(fixture)
    expected = python_counts(source.read_bytes(), [ENDOFTEXT])
    for threads, chunk_bytes in [(1, None), (2, 4096), (4, 100)]:
        assert native.count_words(source, [ENDOFTEXT], threads, chunk_bytes).to_dict() == expected


def test_one_and_two_byte_words_count_alike_in_and_out_of_ascii_blocks() -> None:
    # Short ASCII words are counted apart from the table where the scanner's block path finds them
    # (long ASCII runs); next to a non-ASCII character the character path finds the same words.
    rng = random.Random(7)
    ascii_text = "".join(rng.choices("ab1 ,.'\n\t-", k=20_000))
    neighbours = ["é", "x", " y", "\n", "''", "s"]
    mixed_text = "".join(rng.choice(neighbours) + ascii_text[i : i + 3] for i in range(0, 6_000, 3))
    data = (ascii_text + ENDOFTEXT + mixed_text + ascii_text[:5]).encode("utf-8")
    expected = python_counts(data, [ENDOFTEXT])
    assert sum(count for word, count in expected.items() if len(word) <= 2) > 10_000
    for threads, chunk_bytes in [(1, None), (2, 1000), (2, 7)]:
        counts = native.count_words_in_buffer(data, [ENDOFTEXT], threads, chunk_bytes)
        assert counts.to_dict() == expected, (threads, chunk_bytes)


def test_many_distinct_words(tmp_path: Path) -> None:
    # Enough distinct words that the per-thread tables grow many times and merge in parallel.
    rng = random.Random(1234)
    alphabet = "abcdefghijklmnopqrstuvwxyzäöüß中文字 0123456789.,!'\n"
    text = ENDOFTEXT.join("".join(rng.choices(alphabet, k=rng.randint(50, 4000))) for _ in range(500))
    path = tmp_path / "many.txt"
    path.write_bytes(text.encode("utf-8"))
    expected = python_counts(path.read_bytes(), [ENDOFTEXT])
    assert len(expected) > 80_000
    results = [
        ordered(native.count_words(path, [ENDOFTEXT], threads, chunk))
        for threads, chunk in [(1, None), (2, 5000), (4, 333)]
    ]
    assert dict(results[0]) == expected
    assert all(result == results[0] for result in results)


@pytest.mark.parametrize("ending", ["", " ", "\n", ENDOFTEXT])
def test_words_at_every_length_around_the_inline_limit(ending: str) -> None:
    # The table keeps words of up to 15 bytes inline, with their length in the last byte, and
    # longer ones by address: runs of one character at every length from 1 to 40, of NUL bytes
    # (which pad an inline word, so only the length tells "\0" * 3 from "\0" * 4), of letters, and
    # of a 2-byte character, some repeated; each text ends with one of them, at the end of the
    # buffer or of a piece, where a word cannot be loaded in whole 16-byte reads.
    rng = random.Random(15)
    runs = [char * length for char in ["\0", "x", " y", "é"] for length in range(1, 41)]
    words = [run for run in runs for _ in range(rng.choice([1, 1, 2, 7]))]
    rng.shuffle(words)
    for last in [runs[14], runs[15], runs[40 + 15], runs[-1]]:
        data = (" ".join(words) + " " + last + ending).encode("utf-8")
        expected = python_counts(data, [ENDOFTEXT])
        first = None
        for threads in THREADS:
            for chunk_bytes in CHUNK_BYTES:
                counts = native.count_words_in_buffer(data, [ENDOFTEXT], threads, chunk_bytes)
                assert counts.to_dict() == expected, (threads, chunk_bytes)
                first = first or ordered(counts)
                assert ordered(counts) == first


@pytest.mark.parametrize("threads", [1, 2])
def test_progress_adds_up_to_the_file_size(tmp_path: Path, threads: int) -> None:
    path = tmp_path / "progress.txt"
    path.write_bytes(("some words here\n" * 20_000 + ENDOFTEXT).encode() * 5)
    reported: list[int] = []
    counts = native.count_words(path, [ENDOFTEXT], threads, 10_000, reported.append)
    # Only the calling thread reports between chunks, and with two threads the other one may count
    # them all (a busy machine), so only one thread guarantees reports along the way.
    assert all(step > 0 for step in reported) and (threads > 1 or len(reported) > 1)
    assert sum(reported) == path.stat().st_size
    assert counts.to_dict() == native.count_words(path, [ENDOFTEXT], threads, 10_000).to_dict()

    def interrupt(step: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        native.count_words(path, [ENDOFTEXT], threads, 10_000, interrupt)


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.txt"
    path.write_bytes(b"")
    assert len(native.count_words(path, [ENDOFTEXT])) == 0


def test_only_special_tokens() -> None:
    assert native.count_words_in_buffer((ENDOFTEXT * 50).encode(), [ENDOFTEXT], 2, 5).to_dict() == {}


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("chunk_bytes", [1, 64, None])
def test_invalid_utf8_in_file_names_the_smallest_offset(tmp_path: Path, threads: int, chunk_bytes: int) -> None:
    data = bytearray(("some words and more words\n" + ENDOFTEXT) * 400, "utf-8")
    for offset, bad in [(9000, b"\xff"), (4100, b"\xe2\x82"), (7000, b"\x80")]:
        data[offset : offset + len(bad)] = bad
    path = tmp_path / "bad.txt"
    path.write_bytes(bytes(data))
    assert decode_error_offset(bytes(data)) == 4100
    with pytest.raises(ValueError, match="invalid UTF-8 at byte offset 4100$"):
        native.count_words(path, [ENDOFTEXT], threads, chunk_bytes)


def test_invalid_utf8_next_to_special_tokens() -> None:
    for data in [b"abc\xe2" + ENDOFTEXT.encode() + b"def", b"abc" + ENDOFTEXT.encode() + b"\x80def"]:
        offset = decode_error_offset(data)
        with pytest.raises(ValueError, match=f"invalid UTF-8 at byte offset {offset}$"):
            native.count_words_in_buffer(data, [ENDOFTEXT], 2, 2)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(OSError, match="nope.txt"):
        native.count_words(tmp_path / "nope.txt", [])


@pytest.mark.parametrize(
    ("num_threads", "error"), [(0, ValueError), (True, TypeError), (1.5, TypeError), ("2", TypeError)]
)
def test_bad_num_threads(num_threads: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        native.count_words_in_buffer(b"text", [], num_threads)


def test_special_tokens_must_be_a_list() -> None:
    with pytest.raises(TypeError, match="list of strings"):
        native.count_words_in_buffer(b"text", ENDOFTEXT)


@pytest.mark.parametrize("chunk_bytes", [0, -5, 2.0])
def test_bad_chunk_bytes(chunk_bytes: object) -> None:
    with pytest.raises(ValueError, match="chunk_bytes"):
        native.count_words_in_buffer(b"text", [], 1, chunk_bytes)


def test_merge_runs_the_cpp_loop() -> None:
    data = ("low lower lowest newer wider new " * 50 + ENDOFTEXT).encode()
    counts = native.count_words_in_buffer(data, [ENDOFTEXT])
    reported = []
    merges = counts.merge(30, progress=reported.append)
    merge_cpp = pytest.importorskip("cs336_basics.native._merge_cpp", reason="the bpe_v6 extension is not built")
    assert merges == merge_cpp.merge(counts.to_dict(), 30)
    assert sum(reported) == len(merges)
