"""The tokenizer against tiktoken's GPT-2, by construction, and the pure path against the native one.

tiktoken is built here from the fixtures' GPT-2 files (it cannot download anything): its ranks are
the GPT-2 token ids, which is right because GPT-2's merged tokens are numbered in merge order
(checked below), so "lowest rank first" means the same thing to both.
"""

from __future__ import annotations

import gzip
import itertools
import os
import pickle
import subprocess
import sys
import textwrap
import threading
from array import array
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cs336_basics.tokenizer as tokenizer_module
from cs336_basics import BPEInputError, train_bpe
from cs336_basics.outputs.serialization import load_merges, load_vocab, save_tokenizer
from cs336_basics.rules.contract import ENDOFTEXT
from cs336_basics.rules.pattern import GPT2_SPLIT_PATTERN
from cs336_basics.tokenizer import Tokenizer, native_available
from tests.support import FIXTURES, REPO_ROOT, SHARED_CORPUS, TOKENIZER_MEMORY_CHILD_PRELUDE, require_fixture

DOUBLE = ENDOFTEXT * 2
TEXT_FIXTURES = [
    "tinystories_sample.txt",
    "address.txt",
    "german.txt",
    "special_token_double_newlines_non_whitespace.txt",
    "special_token_trailing_newlines.txt",
    "corpus.en",
]
BACKENDS = ["pure", "native"]
NATIVE_MISSING = "the compiled encoder cs336_basics.native._encode is not built (or CS336_PURE_PYTHON is set)"
MEMORY_TEST_BYTES = 5_000_000

# Pieces that exercise every alternative of the GPT-2 pattern, every whitespace the pattern knows
# (\x1c..\x1f and \x85 are whitespace to it), contractions split across pieces, and special tokens
# whole and in halves.
FRAGMENTS = [
    "a", "b", "ab", "the", " the", "é", "ü", "中文", "😀", "e\u0301", "Ω", "ки",
    " ", "  ", "\n", "\n\n", "\t", "\r\n", "\u3000", "\xa0", "\x85", "\x1c",
    "0", "42", "١٢", "'", "'s", "'ll", "l", "ve", "'re", ".", "!?", "<", "|", ">",
    ENDOFTEXT, "<|endo", "ftext|>", "<|", "|>",
]
fragment_text = st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join)
any_text = st.text(st.characters(codec="utf-8"), max_size=200)


# ---------------------------------------------------------------------------------------------
# Shared objects (loading GPT-2 takes a moment, so each is built once)


@cache
def gpt2_tables() -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    # Every test that reads GPT-2's tables comes through here, so each skips, saying why, without them.
    return load_vocab(require_fixture("gpt2_vocab.json")), load_merges(require_fixture("gpt2_merges.txt"))


@cache
def gpt2_tokenizer(backend: str, special_tokens: tuple[str, ...] = (ENDOFTEXT,)) -> Tokenizer:
    vocab, merges = gpt2_tables()
    return Tokenizer(vocab, merges, list(special_tokens), native=backend == "native")


@cache
def tiktoken_gpt2():
    tiktoken = pytest.importorskip("tiktoken")
    vocab, _ = gpt2_tables()
    ranks = {token: token_id for token_id, token in vocab.items() if token != ENDOFTEXT.encode()}
    return tiktoken.Encoding(
        name="gpt2-from-fixtures",
        pat_str=GPT2_SPLIT_PATTERN,
        mergeable_ranks=ranks,
        special_tokens={ENDOFTEXT: 50256},
    )


def reference_ids(text: str) -> list[int]:
    return tiktoken_gpt2().encode(text, allowed_special="all")


@pytest.fixture(scope="module")
def gpt2() -> None:
    require_fixture("gpt2_vocab.json")
    require_fixture("gpt2_merges.txt")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, gpt2: None) -> str:
    if request.param == "native" and not native_available():
        pytest.skip(NATIVE_MISSING)
    return request.param


@pytest.fixture
def tok(backend: str) -> Tokenizer:
    """GPT-2 with <|endoftext|>, on the pure or the native path."""
    tokenizer = gpt2_tokenizer(backend)
    assert tokenizer.native == (backend == "native")
    return tokenizer


@pytest.fixture
def native_tok(gpt2: None) -> Tokenizer:
    if not native_available():
        pytest.skip(NATIVE_MISSING)
    return gpt2_tokenizer("native")


# ---------------------------------------------------------------------------------------------
# Against tiktoken


def test_gpt2_ranks_follow_merge_order(gpt2: None) -> None:
    """tiktoken ranks tokens by id; that equals our merge order only if merged ids increase."""
    vocab, merges = gpt2_tables()
    ids = {token: token_id for token_id, token in vocab.items()}
    merged_ids = [ids[left + right] for left, right in merges]
    assert merged_ids == sorted(merged_ids)
    assert sorted(ids[bytes([byte])] for byte in range(256)) == list(range(256))
    assert len(vocab) == 256 + len(merges) + 1 and vocab[50256] == ENDOFTEXT.encode()


@pytest.mark.parametrize(
    "text",
    [
        "",
        "a",
        " ",
        "\n",
        "é",
        "😀",
        "s",
        "'",
        "Héllò hôw are ü? 🙃",
        "日本語のテキストと English mixed, 123 numbers!",
        "don't we'll they've I'm she'd you're it's",
        "   leading and trailing spaces   ",
        "tabs\tand\nnewlines\n\n\nand\r\nCRLF",
        "Hello, how <|endoftext|><|endoftext|> are you?<|endoftext|>",
        "<|endoftext|>",
        "a\n\nb",
    ],
)
def test_matches_tiktoken(tok: Tokenizer, text: str) -> None:
    ids = tok.encode(text)
    assert ids == reference_ids(text)
    assert tok.decode(ids) == text


@pytest.mark.parametrize("name", TEXT_FIXTURES)
def test_fixture_texts_match_tiktoken(tok: Tokenizer, name: str) -> None:
    text = require_fixture(name).read_text(encoding="utf-8")
    ids = tok.encode(text)
    assert ids == reference_ids(text)
    assert tok.decode(ids) == text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.one_of(any_text, fragment_text))
def test_generated_text_matches_tiktoken(tok: Tokenizer, text: str) -> None:
    ids = tok.encode(text)
    assert ids == reference_ids(text)
    assert tok.decode(ids) == text


# ---------------------------------------------------------------------------------------------
# Special tokens


def test_overlapping_special_tokens_longest_wins(backend: str) -> None:
    tokenizer = gpt2_tokenizer(backend, (ENDOFTEXT, DOUBLE))
    plain = gpt2_tokenizer(backend, ())
    single = 50256
    double = tokenizer.encode(DOUBLE)
    assert double == [50257], "the missing special token gets the next free id"
    text = f"Hello{DOUBLE} world{ENDOFTEXT * 3}!"  # three in a row: the pair first, then one
    expected = [*plain.encode("Hello"), 50257, *plain.encode(" world"), 50257, single, *plain.encode("!")]
    assert tokenizer.encode(text) == expected
    assert tokenizer.decode(expected) == text
    assert tokenizer.decode([50257]) == DOUBLE


def test_special_token_order_does_not_matter(backend: str) -> None:
    text = f"x{ENDOFTEXT * 3}y"
    forward = gpt2_tokenizer(backend, (ENDOFTEXT, DOUBLE)).encode(text)
    backward = gpt2_tokenizer(backend, (DOUBLE, ENDOFTEXT)).encode(text)
    assert forward == backward
    assert forward[1:-1] == [50257, 50256]


def test_without_special_tokens_they_are_text(tok: Tokenizer, backend: str) -> None:
    plain = gpt2_tokenizer(backend, ())
    assert plain.encode(ENDOFTEXT) == tiktoken_gpt2().encode_ordinary(ENDOFTEXT)
    assert 50256 not in plain.encode(f"a{ENDOFTEXT}b")
    assert tok.encode(f"a{ENDOFTEXT}b")[1] == 50256


def test_special_token_already_in_vocab_keeps_its_id(tok: Tokenizer) -> None:
    assert tok.encode(ENDOFTEXT) == [50256]
    assert len(tok.vocab) == 50257


# ---------------------------------------------------------------------------------------------
# Decoding


def test_decode_replaces_invalid_utf8(tok: Tokenizer) -> None:
    lead_byte = next(token_id for token_id, token in tok.vocab.items() if token == b"\xc3")
    assert tok.decode([lead_byte]) == "\ufffd"
    assert tok.decode([*tok.encode("a"), lead_byte, *tok.encode("b")]) == "a\ufffdb"


def test_decode_unknown_id(tok: Tokenizer) -> None:
    with pytest.raises(BPEInputError, match="token id 999999 is not in the vocabulary"):
        tok.decode([1, 999_999])


# ---------------------------------------------------------------------------------------------
# encode_iterable


@pytest.mark.parametrize("name", TEXT_FIXTURES)
def test_encode_iterable_over_a_file(tok: Tokenizer, name: str) -> None:
    path = require_fixture(name)
    with path.open(encoding="utf-8") as file:
        ids = list(tok.encode_iterable(file))
    assert ids == tok.encode(path.read_text(encoding="utf-8"))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=fragment_text, cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_encode_iterable_any_split(backend: str, text: str, cuts: list[int]) -> None:
    """Items cut anywhere (inside pre-tokens, special tokens and whitespace runs) give the ids of
    the joined text; the buffer is flushed at every item to exercise every cut."""
    tokenizer = gpt2_tokenizer(backend, (ENDOFTEXT, DOUBLE))
    offsets = sorted({min(cut, len(text)) for cut in cuts})
    items = [text[start:end] for start, end in zip([0, *offsets], [*offsets, len(text)])]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tokenizer_module, "_MIN_PIECE_CHARS", 1)
        pieces = list(tokenizer.split_stream(items))
        ids = list(tokenizer.encode_iterable(items))
    assert "".join(pieces) == text
    assert ids == tokenizer.encode(text)


def test_encode_iterable_lines_with_blank_lines(tok: Tokenizer, monkeypatch: pytest.MonkeyPatch) -> None:
    """`\\s+(?!\\S)` spans lines: "a\\n\\nb" must not be encoded line by line."""
    monkeypatch.setattr(tokenizer_module, "_MIN_PIECE_CHARS", 1)
    lines = ["a\n", "\n", "b", "  \n", " \n", "c<|endo", "ftext|>", "\n"]
    assert list(tok.encode_iterable(lines)) == tok.encode("".join(lines))


def test_encode_iterable_is_lazy(tok: Tokenizer) -> None:
    def endless() -> Iterator[str]:
        pieces = itertools.cycle(["Once upon a time, ", "there was a tokenizer.\n", ENDOFTEXT])
        for count, piece in enumerate(pieces):
            # Fails instead of hanging if encode_iterable reads everything before yielding.
            assert count < 100_000, "encode_iterable read far past the ids asked for"
            yield piece

    first = list(itertools.islice(tok.encode_iterable(endless()), 50))
    assert len(first) == 50


def test_split_stream_cuts_often(tok: Tokenizer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokenizer_module, "_MIN_PIECE_CHARS", 64)
    text = require_fixture("tinystories_sample.txt").read_text(encoding="utf-8")
    pieces = list(tok.split_stream(text.splitlines(keepends=True)))
    assert "".join(pieces) == text
    assert len(pieces) > len(text) // 200


def test_encode_iterable_rejects_bytes(tok: Tokenizer) -> None:
    with pytest.raises(BPEInputError, match="text mode"):
        list(tok.encode_iterable([b"bytes"]))


MEMORY_CHILD = TOKENIZER_MEMORY_CHILD_PRELUDE + textwrap.dedent(
    """
    headroom = sys.argv[5]
    count = checksum = 0
    with open(text_path, encoding="utf-8") as file:
        # Python's own text I/O grows the heap by megabytes on a first pass over a file, whoever
        # reads it; let it settle so that the limit below measures the tokenizer.
        for _ in file:
            pass
        file.seek(0)
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (address_space() + int(headroom), hard))
        try:
            for token_id in tokenizer.encode_iterable(file):
                count += 1
                checksum = (checksum * 1_000_003 + token_id) % (1 << 61)
        finally:
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))

    expected = 0
    with open(text_path, encoding="utf-8") as file:
        ids = tokenizer.encode(file.read())
    for token_id in ids:
        expected = (expected * 1_000_003 + token_id) % (1 << 61)
    assert (count, checksum) == (len(ids), expected), "encode_iterable differs from encode"
    print(count)
    """
)


@pytest.fixture(scope="module")
def five_megabytes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    corpus = SHARED_CORPUS / "real_mix.txt.gz"
    if not corpus.exists():
        pytest.skip(f"corpus {corpus} not found")
    with gzip.open(corpus, "rb") as file:
        data = file.read(MEMORY_TEST_BYTES)
    data = data[: data.rfind(b"\n") + 1]  # whole lines, so no character is cut
    path = tmp_path_factory.mktemp("memory") / "real_mix_5mb.txt"
    path.write_bytes(data)
    return path


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc/self/status are Linux-only")
def test_encode_iterable_constant_memory(backend: str, five_megabytes: Path) -> None:
    """As the assignment's test: the address-space limit is what the process has now plus 1 MB
    (the address space, not the RSS: RLIMIT_AS counts the former). Reading the 5 MB at once, or
    starting a thread (8 MB of stack), fails; so would an unbounded cache."""
    if backend == "pure" and native_available():
        pytest.skip("the pure path's memory is checked when it is the default (CS336_PURE_PYTHON=1)")
    args = [FIXTURES / "gpt2_vocab.json", FIXTURES / "gpt2_merges.txt", five_megabytes, backend, 1_000_000]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [sys.executable, "-c", MEMORY_CHILD, *map(str, args)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert int(result.stdout) > 1_000_000


# ---------------------------------------------------------------------------------------------
# A vocabulary from our own trainer


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, bytes], list[tuple[bytes, bytes]]]:
    text = require_fixture("tinystories_sample.txt").read_text(encoding="utf-8")
    text += "\nÜber naïve café — 日本語 😀 <|endoftext|> 12,345.67 don't  \t\n"
    path = tmp_path_factory.mktemp("trained") / "train.txt"
    path.write_text(text, encoding="utf-8")
    vocab, merges = train_bpe(path, 1000, [ENDOFTEXT], trainer="bpe_v4")
    return path, vocab, merges


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_trained_vocabulary_round_trips(trained, backend_name: str, tmp_path: Path) -> None:
    if backend_name == "native" and not native_available():
        pytest.skip(NATIVE_MISSING)
    path, vocab, merges = trained
    text = path.read_text(encoding="utf-8")
    tokenizer = Tokenizer(vocab, merges, [ENDOFTEXT], native=backend_name == "native")
    ids = tokenizer.encode(text)
    assert tokenizer.decode(ids) == text
    assert ids.count(256) == text.count(ENDOFTEXT), "the special token is id 256 in a trained vocabulary"
    assert len(ids) < len(text.encode("utf-8")) / 2, "1000 tokens should compress the training text"

    paths = save_tokenizer(tmp_path, vocab, merges)
    for vocab_file, merges_file in (("vocab.pkl", "merges.pkl"), ("vocab.json", "merges.txt")):
        loaded = Tokenizer.from_files(paths[vocab_file], paths[merges_file], [ENDOFTEXT])
        assert loaded.encode(text) == ids


# ---------------------------------------------------------------------------------------------
# Native == pure


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.one_of(any_text, fragment_text))
def test_native_matches_pure(native_tok: Tokenizer, text: str) -> None:
    assert native_tok.encode(text) == gpt2_tokenizer("pure").encode(text)


@pytest.mark.parametrize(
    "text",
    [
        "ab" * 3000,  # one long pre-token: the heap-based merge loop
        " " * 5000 + "x",
        "\n" * 4000,
        "é" * 2500 + "a",
        "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(3000)),
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" * 3 + " " + "0123456789" * 100,
    ],
)
def test_native_matches_pure_on_long_words(native_tok: Tokenizer, text: str) -> None:
    assert native_tok.encode(text) == gpt2_tokenizer("pure").encode(text)


def test_native_matches_pure_on_trained_vocabulary(trained) -> None:
    if not native_available():
        pytest.skip(NATIVE_MISSING)
    path, vocab, merges = trained
    text = path.read_text(encoding="utf-8")
    for specials in ([ENDOFTEXT], [ENDOFTEXT, DOUBLE], []):
        native = Tokenizer(vocab, merges, specials, native=True)
        pure = Tokenizer(vocab, merges, specials, native=False)
        assert native.encode(text) == pure.encode(text)


def test_native_matches_pure_on_corpus_sample(native_tok: Tokenizer) -> None:
    corpus = SHARED_CORPUS / "real_mix.txt.gz"
    if not corpus.exists():
        pytest.skip(f"corpus {corpus} not found")
    with gzip.open(corpus, "rb") as file:
        text = file.read(600_000).decode("utf-8", errors="ignore")
    assert native_tok.encode(text) == gpt2_tokenizer("pure").encode(text)


# Cache sizes from none through sizes where almost every word evicts another (4 slots: one set) to
# a comfortable one; the arena for longer words is 4 words per slot and takes records of at most a
# sixteenth of that, so it refuses every record at 4 slots and empties itself often at 64.
CACHE_SLOTS = [0, 4, 64, 4096]
# Pre-tokens of more than 24 bytes, and short ones of many ids: the long-word arena's share.
LONG_WORDS = " ".join(
    [
        "internationalization" * 2,
        "١٢٣٤٥٦٧٨٩٠١",
        "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(40)),
        "😀🙃😀🙃😀🙃",
        "antidisestablishmentarianism",
        "0123456789" * 5,
    ]
)
long_word_text = st.lists(st.sampled_from([*FRAGMENTS, *LONG_WORDS.split(), " "]), max_size=30).map("".join)


def test_encode_list_counts_the_shared_ints_references(gpt2: None) -> None:
    """encode's list shares one int object per id and adds its references once per id per call:
    each id's reference count grows by its occurrences while the list lives, and back after."""
    if not native_available():
        pytest.skip(NATIVE_MISSING)
    tokenizer = gpt2_tokenizer("native")
    text = "the cat sat on the mat, the end. " * 40 + "antidisestablishmentarianism"
    ids = tokenizer.encode(text)
    distinct = sorted(set(ids))
    before = [sys.getrefcount(ids[ids.index(token)]) for token in distinct]
    again = [tokenizer.encode(text) for _ in range(3)]
    grown = [sys.getrefcount(ids[ids.index(token)]) for token in distinct]
    assert [after - start for after, start in zip(grown, before)] == [3 * ids.count(token) for token in distinct]
    del again
    assert [sys.getrefcount(ids[ids.index(token)]) for token in distinct] == before


@cache
def cached_tokenizer(slots: int) -> Tokenizer:
    """One per size, kept across examples: its cache fills and evicts over a whole test."""
    vocab, merges = gpt2_tables()
    return Tokenizer(vocab, merges, [ENDOFTEXT], native=True, native_cache_slots=slots)


@pytest.fixture(params=CACHE_SLOTS, ids=[f"slots={slots}" for slots in CACHE_SLOTS])
def sized_tok(request: pytest.FixtureRequest, gpt2: None) -> Tokenizer:
    if not native_available():
        pytest.skip(NATIVE_MISSING)
    return cached_tokenizer(request.param)


def test_every_cache_size_matches_tiktoken_on_fixtures(sized_tok: Tokenizer) -> None:
    texts = [require_fixture(name).read_text(encoding="utf-8") for name in TEXT_FIXTURES]
    text = "\n".join(texts) + LONG_WORDS
    expected = reference_ids(text)
    assert sized_tok.encode(text) == expected
    assert sized_tok.encode(text) == expected, "a second pass, answered from the cache"
    assert sized_tok.encode_array(text).tolist() == expected


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.one_of(any_text, fragment_text, long_word_text))
def test_every_cache_size_matches_tiktoken_on_generated_text(sized_tok: Tokenizer, text: str) -> None:
    assert sized_tok.encode(text) == reference_ids(text)


# Words of 4 to 8 GPT-2 tokens in at most 15 bytes: held in the cache's slot up to 6 (16-bit ids),
# past that in its arena.
MANY_TOKEN_WORDS = ["xqzv", "qzxvjk", " zxqvjkw", "jqxzvkwf", "éèêë", "😀🙃", "ЖЖЖЖ"]


@pytest.mark.parametrize("word", MANY_TOKEN_WORDS)
def test_words_of_many_tokens_at_the_end_match_tiktoken(sized_tok: Tokenizer, word: str) -> None:
    """A cached word's ids are copied with its slot's spare room: at the very end of the text too."""
    for text in (word, f"a{word}", f"{word}{ENDOFTEXT}{word}", f"{word} {word}"):
        assert sized_tok.encode(text) == reference_ids(text)
        assert sized_tok.encode_array(text).tolist() == reference_ids(text), "from the cache"


def _random_run(alphabet: str, length: int, seed: int) -> str:
    state, chars = seed, []
    for _ in range(length):
        state = (state * 1103515245 + 12345) % 2**31
        chars.append(alphabet[(state >> 16) % len(alphabet)])
    return "".join(chars)


# One pre-token each: from 2 KiB (Encoder::kHugeWord) the native path merges by buckets of merge
# numbers (merge_huge), below that on a heap (merge_long); both sides of the switch are here.
HUGE_WORDS = {
    "letters below the switch": _random_run("abcdefghijklmnopqrstuvwxyz", 2047, 1),
    "letters at the switch": _random_run("abcdefghijklmnopqrstuvwxyz", 2048, 1),
    "letters": _random_run("etaoinshrdlucmfwypvbgkjqxz", 30000, 2),
    "one letter": "a" * 40000,
    "digits": _random_run("0123456789", 20000, 3),
    "cyrillic": _random_run("абвгдежзийклмнопрст", 10000, 4),
    "spaces": " " * 20000 + "x",
    "punctuation": _random_run("!#$%&*+-./:;<=>?@^_~", 20000, 5),
}


@pytest.mark.parametrize("name", HUGE_WORDS)
def test_huge_pretokens_match_tiktoken(native_tok: Tokenizer, name: str) -> None:
    text = HUGE_WORDS[name]
    assert native_tok.encode(text) == reference_ids(text)
    assert native_tok.encode(f"{text} {text}") == reference_ids(f"{text} {text}"), "from the cache"


def test_huge_pretokens_with_ids_past_16_bits_match_tiktoken(gpt2: None) -> None:
    """merge_huge numbers its buckets from the wide pair table's ranks as from the narrow one's."""
    if not native_available():
        pytest.skip(NATIVE_MISSING)
    vocab, merges = gpt2_tables()
    wide = Tokenizer({**vocab, 70_000: b"\xff\xfe\xfd-unused"}, merges, [ENDOFTEXT], native=True)
    for text in HUGE_WORDS.values():
        assert wide.encode(text) == reference_ids(text)


def many_merges(count: int, seed: int) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """`count` merges over eight letters, each of a token and one of the first 64 (a new token each)."""
    state = seed
    vocab = {byte: bytes([byte]) for byte in range(256)}
    tokens = [bytes([byte]) for byte in b"abcdefgh"]
    seen, merges = set(tokens), []
    while len(merges) < count:
        state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
        left, right = tokens[(state >> 20) % len(tokens)], tokens[(state >> 40) % min(64, len(tokens))]
        if left + right in seen:
            continue
        seen.add(left + right)
        tokens.append(left + right)
        vocab[len(vocab)] = left + right
        merges.append((left, right))
    return vocab, merges


def test_words_of_every_merge_loop_encode_as_the_pure_path() -> None:
    """Past 64K merges merge_huge starts further on (Encoder::huge_word_), and merge_long's heap takes
    the words between merge_medium's (up to 2 KiB) and it; each loop's words against the pure path."""
    if not native_available():
        pytest.skip(NATIVE_MISSING)
    vocab, merges = many_merges(70_000, 5)
    native = Tokenizer(vocab, merges, native=True, pattern="superword")
    pure = Tokenizer(vocab, merges, native=False, pattern="superword")
    assert native.native and not pure.native
    for size in (100, 128, 129, 1000, 2048, 2049, 2186, 3000):  # short, medium, long (to 2,187), huge
        word = _random_run("abcdefgh", size, size)  # one superword pre-token
        assert native.encode(word) == pure.encode(word), size


SPECIALS = (ENDOFTEXT, "<|a|>", "<|b|>")


@pytest.mark.parametrize("slots", CACHE_SLOTS, ids=[f"slots={slots}" for slots in CACHE_SLOTS])
@pytest.mark.parametrize(
    "unit",
    ["".join(SPECIALS), "a<|a|>", f"<|b|> x{ENDOFTEXT}yz\n<|a|>", "é<|b|>'s<|a|>"],
    ids=["specials only", "one byte between", "mixed", "non-ASCII"],
)
def test_runs_of_special_tokens_match_the_pure_path(gpt2: None, slots: int, unit: str) -> None:
    """More special tokens, of different ids, than the batched lookup holds in flight (a few hundred),
    among short words: the native ids equal the pure path's, cold and from the cache."""
    if not native_available():
        pytest.skip(NATIVE_MISSING)
    vocab, merges = gpt2_tables()
    native = Tokenizer(vocab, merges, list(SPECIALS), native=True, native_cache_slots=slots)
    text = unit * 700 + "end"
    expected = gpt2_tokenizer("pure", SPECIALS).encode(text)
    assert native.encode(text) == expected
    assert native.encode(text) == expected, "a second pass, answered from the cache"


@pytest.mark.parametrize("widest", ["é", "ж", "😀"], ids=["latin-1", "two-byte", "four-byte"])
def test_long_text_of_each_str_width_matches_tiktoken(sized_tok: Tokenizer, widest: str) -> None:
    """Past a megabyte (encode goes in pieces) and in each of CPython's str layouts (one, two or four
    bytes per character, set by the widest: each is transcoded to UTF-8 its own way)."""
    texts = [require_fixture(name).read_text(encoding="utf-8") for name in TEXT_FIXTURES]
    text = "".join(char for char in "\n".join(texts) + LONG_WORDS if ord(char) <= ord(widest))
    text = f" {widest}{widest} <|endoftext|>".join([text] * 3)
    text = f"{widest} " + text * (1_200_000 // len(text.encode("utf-8")) + 1)
    fresh = (text + ".")[:-1]  # an equal str without the UTF-8 copy tiktoken leaves in the one it encodes
    expected = reference_ids(text)
    assert sized_tok.encode(text) == expected
    assert sized_tok.encode_array(text).tolist() == expected
    assert sized_tok.encode(fresh) == expected


@pytest.mark.parametrize("slots", [0, 4096], ids=["uncached", "cached"])
def test_ids_past_16_bits_match_tiktoken_on_fixtures(gpt2: None, slots: int) -> None:
    """An id past 2**16 - 2 makes the native pair table check a hash of the pair, verified in the rule,
    instead of the pair itself: the same ids either way."""
    if not native_available():
        pytest.skip(NATIVE_MISSING)
    vocab, merges = gpt2_tables()
    vocab = {**vocab, 70_000: b"\xff\xfe\xfd-unused"}
    wide = Tokenizer(vocab, merges, [ENDOFTEXT], native=True, native_cache_slots=slots)
    texts = [require_fixture(name).read_text(encoding="utf-8") for name in TEXT_FIXTURES]
    text = "\n".join(texts) + LONG_WORDS
    assert wide.encode(text) == reference_ids(text)


def test_cache_slots_are_rounded_up() -> None:
    if not native_available():
        pytest.skip(NATIVE_MISSING)
    assert [cached_tokenizer(slots)._native.cache_slots for slots in CACHE_SLOTS] == [0, 4, 64, 4096]
    vocab, merges = gpt2_tables()
    assert Tokenizer(vocab, merges, native=True, native_cache_slots=5)._native.cache_slots == 8


def test_native_concurrent_threads(native_tok: Tokenizer) -> None:
    """The GIL is released: threads share one encoder (one gets the cache, others run uncached)."""
    texts = [require_fixture(name).read_text(encoding="utf-8") * 3 for name in TEXT_FIXTURES]
    expected = [native_tok.encode(text) for text in texts]
    results: dict[int, list[list[int]]] = {}
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            results[worker] = [native_tok.encode(text) for text in texts * 3]
        except BaseException as error:  # a thread's exception would otherwise vanish
            errors.append(error)

    threads = [threading.Thread(target=work, args=(worker,)) for worker in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(results) == [0, 1, 2, 3]
    assert all(result == expected * 3 for result in results.values())


def test_encode_array(tok: Tokenizer) -> None:
    text = "Hello<|endoftext|> world"
    array_ids = tok.encode_array(text)
    assert array_ids.typecode == "I" and array_ids.itemsize == 4
    assert array_ids.tolist() == tok.encode(text)


# ---------------------------------------------------------------------------------------------
# encode_batch, encode_file: the same ids at every thread count and chunk size


@pytest.mark.parametrize("threads", [1, 2, None])
def test_encode_batch_equals_encode(tok: Tokenizer, threads: int | None) -> None:
    texts = [require_fixture(name).read_text(encoding="utf-8") for name in TEXT_FIXTURES]
    texts += ["", "a", ENDOFTEXT, LONG_WORDS, "Héllò 🙃" * 50]
    batch = tok.encode_batch(texts, num_threads=threads)
    assert [ids.typecode for ids in batch] == ["I"] * len(texts)
    assert [ids.tolist() for ids in batch] == [tok.encode(text) for text in texts]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.one_of(any_text, fragment_text, long_word_text), max_size=8))
def test_encode_batch_on_generated_texts(native_tok: Tokenizer, texts: list[str]) -> None:
    expected = [reference_ids(text) for text in texts]
    for threads in (1, 2):
        assert [ids.tolist() for ids in native_tok.encode_batch(texts, num_threads=threads)] == expected


def test_encode_batch_rejects_bytes_and_lone_surrogates(tok: Tokenizer) -> None:
    with pytest.raises(BPEInputError, match="expects strings"):
        tok.encode_batch(["fine", b"bytes"])
    with pytest.raises(BPEInputError, match="lone surrogates"):
        tok.encode_batch(["fine", "bad \ud800"])


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Fixture texts and long words, 400 KB or so, with special tokens between documents."""
    return _encode_file_corpus(tmp_path_factory, copies=8)


@pytest.fixture(scope="module")
def corpus_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same texts once (50 KB): every kind of place a cut can fall, for cutting at each of them."""
    return _encode_file_corpus(tmp_path_factory, copies=1)


def _encode_file_corpus(tmp_path_factory: pytest.TempPathFactory, copies: int) -> Path:
    texts = [require_fixture(name).read_text(encoding="utf-8") for name in TEXT_FIXTURES]
    path = tmp_path_factory.mktemp("encode_file") / "corpus.txt"
    path.write_text((ENDOFTEXT.join(texts) + LONG_WORDS + "\n") * copies, encoding="utf-8")
    return path


@pytest.mark.parametrize(("threads", "chunk_bytes"), [(1, None), (2, None), (2, 977), (3, 65536)])
def test_encode_file_equals_encode(tok: Tokenizer, corpus_file: Path, threads: int, chunk_bytes: int | None) -> None:
    """977 cuts at odd places."""
    expected = tok.encode(corpus_file.read_text(encoding="utf-8"))
    ids = tok.encode_file(corpus_file, num_threads=threads, chunk_bytes=chunk_bytes)
    assert ids.typecode == tok.id_typecode == "H"
    assert ids.tolist() == expected


# Two threads cutting at every allowed place take four times one thread's time: the exhaustive tier.
@pytest.mark.parametrize("threads", [1, pytest.param(2, marks=pytest.mark.exhaustive)])
def test_encode_file_cut_wherever_cutting_is_allowed_equals_encode(
    tok: Tokenizer, corpus_once: Path, threads: int
) -> None:
    """chunk_bytes=1: a cut at every place cutting is allowed."""
    ids = tok.encode_file(corpus_once, num_threads=threads, chunk_bytes=1)
    assert ids.tolist() == tok.encode(corpus_once.read_text(encoding="utf-8"))


@pytest.mark.parametrize("threads", [1, 2])
def test_encode_file_to_writes_the_ids(tok: Tokenizer, corpus_file: Path, tmp_path: Path, threads: int) -> None:
    reported: list[int] = []
    out_path = tmp_path / "ids.bin"
    with out_path.open("wb") as out:
        out.write(b"header")  # written through Python's buffer before the ids
        count = tok.encode_file_to(corpus_file, out, num_threads=threads, chunk_bytes=4096, progress=reported.append)
    data = out_path.read_bytes()
    assert data.startswith(b"header")
    ids = array("H")
    ids.frombytes(data[len(b"header") :])
    assert ids.tolist() == tok.encode(corpus_file.read_text(encoding="utf-8"))
    assert count == len(ids)
    assert sum(reported) == corpus_file.stat().st_size


def test_encode_file_uint32_beyond_65536_ids(gpt2: None, tmp_path: Path, backend: str) -> None:
    vocab, merges = gpt2_tables()
    # An id past 2**16 makes the arrays 32-bit; the special token gets the next one.
    big = Tokenizer({**vocab, 70_000: b"\xff\xfe\xfd-unused"}, merges, ["<|big|>"], native=backend == "native")
    path = tmp_path / "text.txt"
    path.write_text("hi <|big|> there", encoding="utf-8")
    ids = big.encode_file(path)
    assert big.id_typecode == ids.typecode == "I"
    assert ids.tolist() == big.encode("hi <|big|> there") and 70_001 in ids


@pytest.mark.parametrize("offset", [0, 5, 5000])
def test_encode_file_names_the_invalid_byte(tok: Tokenizer, tmp_path: Path, offset: int) -> None:
    path = tmp_path / "bad.txt"
    path.write_bytes((b"ab " * 2000)[:offset] + b"\xff tail")  # many chunks before the bad byte
    for threads in (1, 2):
        with pytest.raises(BPEInputError, match=f"not valid UTF-8: invalid UTF-8 at byte offset {offset}\\b"):
            tok.encode_file(path, num_threads=threads, chunk_bytes=64)


def test_encode_file_empty_and_missing(tok: Tokenizer, tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    assert tok.encode_file(empty).tolist() == []
    with pytest.raises(BPEInputError, match="not found"):
        tok.encode_file(tmp_path / "missing.txt")
    with pytest.raises(BPEInputError, match="chunk_bytes"):
        tok.encode_file(empty, chunk_bytes=0)


def test_pickle_round_trip(tok: Tokenizer) -> None:
    """Tokenizers go to multiprocessing workers by pickle; the compiled encoder is rebuilt there."""
    copy = pickle.loads(pickle.dumps(tok))
    text = "Hello<|endoftext|> wörld"
    assert copy.native == tok.native
    assert copy.encode(text) == tok.encode(text)


def test_pure_python_env_var_forces_pure(gpt2: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CS336_PURE_PYTHON", "1")
    vocab, merges = gpt2_tables()
    assert not Tokenizer(vocab, merges).native
    with pytest.raises(BPEInputError, match="not available"):
        Tokenizer(vocab, merges, native=True)


# ---------------------------------------------------------------------------------------------
# Bad input


def small_vocab() -> dict[int, bytes]:
    return {byte: bytes([byte]) for byte in range(256)} | {256: b"ab"}


def test_merge_with_unknown_token() -> None:
    with pytest.raises(BPEInputError, match=r"merge 1 .*b'abc'.* not in the vocabulary"):
        Tokenizer(small_vocab(), [(b"a", b"b"), (b"ab", b"c")])


def test_merge_that_is_not_a_pair_of_bytes() -> None:
    with pytest.raises(BPEInputError, match="merge 0 must be a pair of bytes"):
        Tokenizer(small_vocab(), [("a", "b")])


def test_special_token_not_a_string() -> None:
    with pytest.raises(BPEInputError, match="special tokens must be strings"):
        Tokenizer(small_vocab(), [(b"a", b"b")], [b"<|endoftext|>"])


def test_special_tokens_as_one_string() -> None:
    with pytest.raises(BPEInputError, match="wrap '<s>' in a list"):
        Tokenizer(small_vocab(), [(b"a", b"b")], "<s>")  # type: ignore[arg-type]


def test_merges_as_lists_are_accepted() -> None:
    assert Tokenizer(small_vocab(), [[b"a", b"b"]]).encode("ab") == [256]  # type: ignore[list-item]


def test_decode_non_integer(tok: Tokenizer) -> None:
    with pytest.raises(BPEInputError, match="must be integers"):
        tok.decode([[1]])  # type: ignore[list-item]


def test_vocab_missing_a_byte() -> None:
    vocab = small_vocab()
    del vocab[0]
    with pytest.raises(BPEInputError, match="lacks 1 of the 256 single bytes"):
        Tokenizer(vocab, [])


@pytest.mark.parametrize("vocab", [{"0": b"a"}, {0: "a"}, {-1: b"a"}, {}, [b"a"]])
def test_malformed_vocab(vocab: object) -> None:
    with pytest.raises(BPEInputError, match="vocab"):
        Tokenizer(vocab, [])  # type: ignore[arg-type]


def test_encode_bytes_or_surrogates(tok: Tokenizer) -> None:
    with pytest.raises(BPEInputError, match="expects a str"):
        tok.encode(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(BPEInputError, match="lone surrogate"):
        tok.encode("ok \ud800 not ok")


def test_tiny_vocab_encodes_everything() -> None:
    """Only bytes and one merge: every text still encodes and round-trips, on both paths."""
    for native in [False] + ([True] if native_available() else []):
        tokenizer = Tokenizer(small_vocab(), [(b"a", b"b")], ["<s>"], native=native)
        assert tokenizer.encode("abab<s>é") == [256, 256, 257, 0xC3, 0xA9]
        assert tokenizer.decode(tokenizer.encode("zabé<s>")) == "zabé<s>"


# ---------------------------------------------------------------------------------------------
# scripts/encode_dataset.py, the shim of cs336-encode-dataset (encode_cli; more in test_encode_cli)


WITHOUT_NUMPY_CHILD = textwrap.dedent(
    """
    import runpy, sys
    sys.modules["numpy"] = None  # importing numpy now fails
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")
    """
)


@pytest.mark.parametrize("options", [["--threads", "1"], ["--threads", "2", "--block-mb", "0.002"], ["--pure"]])
def test_encode_dataset_without_numpy(gpt2: None, tmp_path: Path, options: list[str]) -> None:
    """The script writes the .npy itself; numpy is only needed to read it. Read here by hand."""
    data = require_fixture("tinystories_sample.txt")
    out = tmp_path / "ids.npy"
    script = REPO_ROOT / "scripts" / "encode_dataset.py"
    arguments = [str(data), str(out), "--vocab", str(FIXTURES / "gpt2_vocab.json")]
    arguments += ["--merges", str(FIXTURES / "gpt2_merges.txt"), "--special-token", ENDOFTEXT, "--quiet", *options]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_NUMPY_CHILD, str(script), *arguments],
        capture_output=True, text=True, env=environment, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    contents = out.read_bytes()
    header_size = int.from_bytes(contents[8:10], "little")
    header = contents[10 : 10 + header_size].decode("latin1")
    ids = array("H")
    ids.frombytes(contents[10 + header_size :])
    expected = gpt2_tokenizer("pure").encode(data.read_text(encoding="utf-8"))
    order = "<" if sys.byteorder == "little" else ">"
    assert contents.startswith(b"\x93NUMPY\x01\x00") and f"'descr': '{order}u2'" in header
    assert f"'shape': ({len(expected)},)" in header
    assert ids.tolist() == expected


def test_encode_dataset_script(gpt2: None, tmp_path: Path) -> None:
    np = pytest.importorskip("numpy")
    pytest.importorskip("tqdm")
    data = require_fixture("tinystories_sample.txt")
    out = tmp_path / "ids.npy"
    result = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "scripts" / "encode_dataset.py"),
            str(data),
            str(out),
            "--vocab",
            str(FIXTURES / "gpt2_vocab.json"),
            "--merges",
            str(FIXTURES / "gpt2_merges.txt"),
            "--special-token",
            ENDOFTEXT,
            "--block-mb",
            "0.001",  # many blocks, so pieces are cut and joined many times
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "bytes/token" in result.stdout and "MB/s" in result.stdout and "peak RSS" in result.stdout
    ids = np.load(out)
    assert ids.dtype == np.uint16
    assert ids.tolist() == gpt2_tokenizer("pure").encode(data.read_text(encoding="utf-8"))
    assert [path.name for path in tmp_path.iterdir()] == ["ids.npy"], "no temporary file is left behind"
