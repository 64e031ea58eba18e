"""The native scanner under GPT-4's split (cl100k, rustbpe) and GPT-4o's (o200k) against `regex` itself,
directly and through the native counter (files on one and several threads, small chunks, the stream
counter), and bpe_v7 trained with --like rustbpe and with o200k against the oracle bpe_v1.

Where the two patterns part: a whitespace run that reaches the end of a text and holds a newline is one
pre-token under cl100k (`\\s++$`), cut after its last newline under rustbpe. The end of a text is the end
of each piece between special tokens, never a chunk's cut inside one (a cut follows a letter or digit,
never whitespace or the punctuation that takes newlines after it).

o200k's words are case runs: its upper-case class (Lu, Lt, Lm, Lo and the marks) then its lower-case one
(Ll, Lm, Lo, marks), contractions only after them, and punctuation takes \r \n and '/' after it."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import regex
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cs336_basics import Tokenizer, train_bpe
from cs336_basics.ingest.text_ranges import count_tasks, plan_count_tasks
from cs336_basics.native.backend import pure_python_forced
from cs336_basics.rules.pattern import LINE_END_CUTS, PATTERN_ROWS, resolve_pattern
from cs336_basics.rules.splitting import count_words_in_text, find_chunk_boundaries

if pure_python_forced():
    pytest.skip("CS336_PURE_PYTHON is set: the native scanner is not loaded", allow_module_level=True)
native = pytest.importorskip(
    "cs336_basics.native._count_cpp", reason="the native extension is not built (pip install -e . with a C++ compiler)"
)

ENDOFTEXT = "<|endoftext|>"


@pytest.fixture(scope="module", autouse=True, params=native.SCANNER_PATHS)
def scanner_path(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test once per path: the 64-byte block path (SSE2 or NEON, SWAR) and the state machine alone."""
    previous = native.use_scanner_path(request.param)
    yield request.param
    native.use_scanner_path(previous)


# Every row's native scanner but GPT-2's (tests/test_pretokenizer.py holds it to its regex), by its row.
GPT4_PATTERNS = [row.name for row in PATTERN_ROWS if row.scanner is not None and row.name != "gpt2"]
SCANNERS = {row.name: row.scanner for row in PATTERN_ROWS}
COMPILED = {row.name: regex.compile(row.regex) for row in PATTERN_ROWS}

# Where GPT-4's alternatives meet: contractions in any case (and U+017F, which folds to s), a non-letter
# before letters (a tab, punctuation, an apostrophe), digit runs cut in threes, punctuation followed by
# newlines, \r\n runs and every kind of whitespace, marks, other scripts and planes.
# fmt: off
TRICKY = [
    " ", "  ", "\n", "\r\n", "\r", "\n\n", " \n ", "\t", "\x0b", "\x0c", "\u3000", "\x85", "\xa0", "\u2028",
    "\u1680", "\x1c", "\x00", "'", "'s", "'S", "'t", "'T", "'d", "'D", "'m", "'M", "'ll", "'LL", "'lL",
    "'ve", "'VE", "'Re", "'re", "'\u017f", "\u017f", "'l", "'v", "'x", "DON'T", "We'RE", "a", "Z", "ab",
    "é", "e\u0301", "\u0301", "ß", "я", "中", "\U00020000", "0", "7", "123", "1234", "12345", "²", "½",
    "٣", "\U0001d7ce", "!", "?", ".", "!\n", "?\r\n", "/", "$", "€", "\U0001f600", "\u200d", "<|", "|>",
    "A", "HELLO", "Hello", "hELLO", "\u01c5", "\u02b0", "\u3005", "\u0903", "\u20dd", "\U0001d400", "É", "\u0130",
    "\u0915\u094d", "ग", "\u0e01\u0e34", "߁", "\u0f20", "Ⅻ", "\n/", "/\r\n/", "!/\n", "//", "'s'S", "A's",
]
# fmt: on

# Valid characters beside truncated ones, a surrogate, stray continuation and lead bytes.
# fmt: off
BYTE_PIECES = [
    b"a", b" ", b"\n", b"'", b"!", b"1", b"\xff", b"\xc3", b"\xc3\xa9", b"\xed\xa0\x80", b"\xc5\xbf", b"\x80",
    b"\xe4\xb8",
]
# fmt: on

code_points = st.characters(codec="utf-8")
runs = st.builds(lambda text, times: text * times, st.sampled_from(TRICKY), st.integers(1, 40))
texts = st.lists(st.one_of(st.sampled_from(TRICKY), st.text(code_points, max_size=6), runs), max_size=40).map("".join)


def test_the_native_patterns_are_named():
    for name in ("gpt2", *GPT4_PATTERNS):
        assert resolve_pattern(name).native
    assert resolve_pattern("gpt2").native_encoding
    assert not resolve_pattern(r"\S+|\s+").native
    with pytest.raises(ValueError, match="the native scanner runs the patterns"):
        native.pretokenize("text", r"\S+")


@pytest.mark.parametrize("name", GPT4_PATTERNS)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts)
@example(text="ab\n  ")
@example(text="x \n\t \r\n  ")
@example(text="!!\n\nabc 'S 1234567 \tword  \u3000x")
@example(text="'\u017fup '\u017f")
@example(text="word, " * 12 + "!\n\n  \n " + "x" * 70 + "  \u2014abc \u2014\u2014abc")
@example(text="HelloWorld HELLOworld helloWORLD don't DON'T a's's !\n/\n!x a/\n/b \u0301ABC A\u0301BC \u01c5abc")
@example(text="!!\u0301a \u0301x \u02b0ABC Ab\u0301Cd \u4e2d\u6587abc\u4e2dDEF ab\u02b0CD ab\u02b0cd" * 3)
@example(text="L'd\u4e2d\u042fd Ae't\u02b0Ba a's's\u4e2dB" * 4)  # a contraction ends a word: no lower run goes on
def test_scanner_equals_regex(name: str, text: str):
    assert native.pretokenize(text, SCANNERS[name]) == COMPILED[name].findall(text)


def test_the_patterns_differ_only_at_the_end():
    assert native.pretokenize("ab\n  ", "cl100k") == ["ab", "\n  "]
    assert native.pretokenize("ab\n  ", "rustbpe") == ["ab", "\n", "  "]
    assert native.pretokenize("ab\n  x", "cl100k") == native.pretokenize("ab\n  x", "rustbpe")


@pytest.mark.parametrize("name", GPT4_PATTERNS)
@settings(max_examples=300, deadline=None)
@given(data=st.lists(st.sampled_from(BYTE_PIECES), max_size=12).map(b"".join))
def test_invalid_utf8_names_the_decoders_offset(name: str, data: bytes):
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as error:
        with pytest.raises(ValueError, match=f"at byte offset {error.start}$"):
            native.pretoken_ends(data, SCANNERS[name])
    else:
        assert sum(1 for _ in native.pretoken_ends(data, SCANNERS[name])) == len(COMPILED[name].findall(data.decode()))


def as_dict(counts) -> dict[bytes, int]:
    return dict(counts.to_dict())


@pytest.mark.parametrize("name", GPT4_PATTERNS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(texts, min_size=1, max_size=6), repeat=st.integers(1, 30))
def test_counting_a_file_equals_regex(tmp_path: Path, name: str, parts: list[str], repeat: int):
    # Repeated so that small chunks cut inside pieces; pieces end in whitespace and punctuation often.
    text = ENDOFTEXT.join(parts) * repeat
    path = tmp_path / "corpus.txt"
    path.write_bytes(text.encode("utf-8"))
    expected = dict(count_words_in_text(text, [ENDOFTEXT], name))
    scanner = SCANNERS[name]
    assert as_dict(native.count_words(str(path), [ENDOFTEXT], 1, pattern=scanner)) == expected
    for threads, chunk_bytes in ((3, 64), (2, 1 << 10)):
        assert as_dict(native.count_words(str(path), [ENDOFTEXT], threads, chunk_bytes, pattern=scanner)) == expected
    assert as_dict(native.count_words_in_buffer(text.encode(), [ENDOFTEXT], 2, 97, pattern=scanner)) == expected


@pytest.mark.parametrize("name", GPT4_PATTERNS)
def test_chunks_do_not_cut_where_the_pattern_joins(name: str):
    # Punctuation takes the newlines after it, and a whitespace run at a piece's end is cl100k's one
    # pre-token: cuts there (whitespace after any non-space, GPT-2's rule) would split them.
    # Under o200k punctuation takes '/' with the newlines, and a word's case runs and marks decide its end.
    text = "".join(
        f"word{i}!\n\nnext, line\r\n  \t/x!\n/ HTTPServer's na\u0303o\n" + (ENDOFTEXT if i % 7 == 0 else "")
        for i in range(3000)
    )
    text += "tail \n \n "
    expected = dict(count_words_in_text(text, [ENDOFTEXT], name))
    for threads, chunk_bytes in ((1, None), (3, 50), (2, 333)):
        counts = native.count_words_in_buffer(text.encode(), [ENDOFTEXT], threads, chunk_bytes, pattern=SCANNERS[name])
        assert as_dict(counts) == expected


@pytest.mark.parametrize("name", GPT4_PATTERNS)
def test_the_stream_counter_takes_the_pattern(name: str):
    documents = ["A doc'S end  \n", "12345 and!\n\n", "tail \t"]
    counter = native.WordCounter([ENDOFTEXT], 2, pattern=SCANNERS[name])
    counter.count(ENDOFTEXT.join(documents).encode())
    kept, _ = counter.count_texts(documents, ENDOFTEXT)
    assert kept
    expected = count_words_in_text(ENDOFTEXT.join(documents), [ENDOFTEXT], name)
    expected.update(count_words_in_text(ENDOFTEXT.join(documents), [ENDOFTEXT], name))
    assert as_dict(counter.take(True)) == dict(expected)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_bpe_v7_with_o200k_equals_bpe_v1(tmp_path: Path, threads: int):
    words = ["The", "McDonald's", " DON'T", " 12345", "!!\n/", "\r\n", "  ", "\tkey", " \u00e9t\u00e9", " \u4e2d\u6587",
             "'LL", "\n \n", "HTTPServer", " na\u0303o", "\u01c5ab", " /path/to\n"]
    text = "".join(words[(i * 7 + i // 3) % len(words)] for i in range(4000))
    text = ENDOFTEXT.join([text[:9000] + "\n  ", text[9000:] + " \n"])
    path = tmp_path / "corpus.txt"
    path.write_text(text, encoding="utf-8")
    oracle = train_bpe(path, 400, [ENDOFTEXT], trainer="bpe_v1", pattern="o200k")
    assert train_bpe(path, 400, [ENDOFTEXT], trainer="bpe_v7", pattern="o200k", num_workers=threads) == oracle


def test_bpe_v7_like_rustbpe_equals_bpe_v1(tmp_path: Path):
    words = ["The", " cat's", " DON'T", " 12345", "!!\n", "\r\n", "  ", "\tkey", " été", " 中文", "'LL", "\n \n"]
    text = "".join(words[(i * 7 + i // 3) % len(words)] for i in range(4000))
    text = ENDOFTEXT.join([text[:9000] + "\n  ", text[9000:] + " \n"])
    path = tmp_path / "corpus.txt"
    path.write_text(text, encoding="utf-8")
    oracle = train_bpe(path, 400, [ENDOFTEXT], trainer="bpe_v1", like="rustbpe")
    assert train_bpe(path, 400, [ENDOFTEXT], trainer="bpe_v7", like="rustbpe") == oracle


def superword_lines(lines: int, seed: int) -> str:
    """Long lines (hundreds to thousands of bytes) of words, spaces, numbers and other scripts, ended by
    \\n, \\r\\n or blank lines, a special token now and then: superword's pre-tokens are whole lines."""
    rng = random.Random(seed)
    words = ["the", "cat", " ", "\t", "über", "中文", "x", "—", ",", "'s", "!?"]
    numbers = ["2024", "1234567", "٣٤٥", "½", "7"]
    out = []
    for index in range(lines):
        count = rng.randint(1, 900)
        out.append(" ".join(rng.choice(numbers if rng.random() < 0.01 else words) for _ in range(count)))
        out.append(rng.choice(["\n", "\r\n", "\n\n", "\n\r\n \n"]))
        if index % 9 == 8:
            out.append(ENDOFTEXT)
    return "".join(out)


def test_superword_chunks_cut_after_line_ends(tmp_path: Path):
    # A pre-token spans spaces, so a whitespace cut would split it: counting on threads, in chunks far
    # smaller than a line, the Python chunking (v3, planned tasks) and the stream counter all cut after
    # line ends, and count what one thread and `regex` count.
    text = superword_lines(60, 52)
    data = text.encode()
    expected = dict(count_words_in_text(text, [ENDOFTEXT], "superword"))
    assert max(len(word) for word in expected) > 1000
    assert as_dict(native.count_words_in_buffer(data, [ENDOFTEXT], 1, pattern="superword")) == expected
    for threads, chunk_bytes in ((2, 64), (3, 1000), (2, 1 << 20)):
        counts = native.count_words_in_buffer(data, [ENDOFTEXT], threads, chunk_bytes, pattern="superword")
        assert as_dict(counts) == expected, (threads, chunk_bytes)
    plain = text.replace(ENDOFTEXT, "\n")  # no special token to cut at: line ends only
    path = tmp_path / "lines.txt"
    path.write_bytes(plain.encode())
    plain_expected = dict(count_words_in_text(plain, [], "superword"))
    assert as_dict(native.count_words(str(path), [], 2, 64, pattern="superword")) == plain_expected
    boundaries = find_chunk_boundaries(plain.encode(), 40, [], cuts=LINE_END_CUTS)
    assert len(boundaries) > 20
    chunks: Counter[bytes] = Counter()
    for start, end in zip(boundaries[:-1], boundaries[1:]):
        assert plain.encode()[start - 1 : start] in (b"", b"\n")
        chunks.update(count_words_in_text(plain.encode()[start:end].decode(), [], "superword"))
    assert dict(chunks) == plain_expected
    tasks = plan_count_tasks([path], [], task_bytes=500, pattern="superword")
    assert len(tasks) > 20
    assert as_dict(count_tasks(tasks, [], 2, pattern="superword")) == plain_expected
    counter = native.WordCounter([ENDOFTEXT], 2, pattern="superword")
    counter.count(data)
    assert as_dict(counter.take(True)) == expected


def test_the_compiled_encoder_encodes_superword_lines_as_python_does(tmp_path: Path):
    # Superword pre-tokens are whole lines: words up to kShortWord bytes merge on an array
    # (merge_short), longer ones by blocks of ranks (merge_medium), from 2 KiB by buckets (merge_huge).
    path = tmp_path / "lines.txt"
    path.write_text(superword_lines(40, 7), encoding="utf-8")
    vocab, merges = train_bpe(path, 700, [ENDOFTEXT], pattern="superword")
    assert any(b" " in token.strip() for token in vocab.values())  # merges crossed words
    compiled = Tokenizer(vocab, merges, [ENDOFTEXT], pattern="superword", native=True)
    python = Tokenizer(vocab, merges, [ENDOFTEXT], pattern="superword", native=False)
    assert compiled.native and not python.native
    rng = random.Random(11)
    words = ["the", "cat", " ", "über", "中文", "x", "—", ",", "'s", "!?", "\t"]
    line = " ".join(rng.choice(words) for _ in range(1500))  # no number, no line end: one pre-token
    for size in (1, 47, 127, 128, 129, 160, 500, 1000, 2047, 2048, 2100, 3000):
        start = rng.randrange(max(1, len(line) - size))
        text = line[start : start + size]
        assert compiled.encode(text) == python.encode(text), size
    text = superword_lines(12, 13)
    expected = python.encode(text)
    assert compiled.encode(text) == expected
    # Encoding a file on threads cuts it into chunks, after line ends (whitespace cuts would split lines).
    path.write_text(text.replace(ENDOFTEXT, "\n"), encoding="utf-8")
    whole = python.encode(text.replace(ENDOFTEXT, "\n"))
    assert compiled.encode_file(path, num_threads=2, chunk_bytes=100).tolist() == whole
