"""A superword tokenizer (SuperBPE: stage 1 plain BPE, stage 2 continued from it with the `superword`
pattern, pre-tokens that run across spaces up to a line end) exports loadably: tokenizer.json's Split
carries the pattern with its digit-grouping lookahead, so stock HF `tokenizers`, `transformers` and
tiktoken (`pat_str`, read from the run's bpe_run.json) give our ids on held-out text: numbers of 1 to
12 digits, runs of newlines, \\r\\n, trailing spaces, CJK, punctuation. The tokenizer is trained by the
command (`--superbpe`, `--export hf,tiktoken`) on a few KB of
text made here. Each library's tests skip, with the reason, when it is not installed."""

from __future__ import annotations

import importlib.util
import json
import random
import re
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cs336_basics.commands.cli import main as train_main
from cs336_basics.commands.report import load_tokenizer_dir
from cs336_basics.outputs.export import hf_split_regex, hf_tokenizer_json, tiktoken_encoding
from cs336_basics.rules.contract import ENDOFTEXT
from cs336_basics.rules.pattern import NAMED_PATTERNS, SUPERWORD, resolve_pattern
from cs336_basics.tokenizer import Tokenizer

SPECIALS = [ENDOFTEXT]
SUPERWORD_REGEX = NAMED_PATTERNS[SUPERWORD]
STAGE_1_SIZE = 320
VOCAB_SIZE = 600

WORDS = [
    "the", "cat", "sat", "on", "a", "mat", "and", "of", "in", "to", "is", "it", "was", "that", "for",
    "Zürich", "naïve", "café", "über", "The", "It", "Hello", "world", "中文", "字符", "東京", "テスト",
    "한국어", "ки", "😀", "e\u0301",
]
PHRASES = ["of the", "in the", "it was", "on the mat", "and the cat", "for a while", "東京 の 字符"]
PUNCTUATION = [",", ".", "!", "?", "(", ")", "--", "'s", '"', ":", ";", "...", "$", "%", "/"]
BREAKS = ["\n", "\n\n", "\r\n", "\r\n\r\n", "  \n", "\n\n\n", " \t", "\t\n", "\r"]


def mixed_text(seed: int, pieces: int) -> str:
    """Letters (Latin with accents, CJK, Korean, Cyrillic, an emoji, a combining mark) and phrases that
    recur (stage 2's superwords), numbers of 1 to 12 digits, punctuation, line ends of every kind and
    spaces, drawn by `random.Random(seed)`."""
    rng = random.Random(seed)
    out = []
    for _ in range(pieces):
        draw = rng.random()
        if draw < 0.4:
            out.append(rng.choice(WORDS))
        elif draw < 0.55:
            out.append(rng.choice(PHRASES))
        elif draw < 0.7:
            out.append("".join(rng.choice("0123456789") for _ in range(rng.randint(1, 12))))
        elif draw < 0.82:
            out.append(rng.choice(PUNCTUATION))
        elif draw < 0.92:
            out.append(rng.choice(BREAKS))
        out.append(rng.choice([" ", " ", " ", "  ", ""]))
    return "".join(out)


# Held out: other seeds than training's, and the edges the pattern decides, each a document.
EDGES = [
    *("".join(str(digit % 10) for digit in range(1, length + 1)) for length in range(1, 11)),
    *(f"x {'9' * length} y" for length in range(1, 11)),
    "a1b22c333d4444e55555f666666g7777777h88888888i999999999j0123456789",
    "line one\n\n\nline two\r\n\r\nline three\r\rend",
    "trailing spaces   ",
    "trailing newline and spaces \n  ",
    "  leading spaces",
    "\n",
    "\r\n",
    " ",
    "   \n\n   ",
    "東京 2024年3月15日 12,345,678.90 円",
    "١٢٣٤٥ and ١٢٣ (Arabic-Indic digits) ²³ ½",
    "the cat sat on the mat and the cat sat on the mat",
    "",
]
HELD_OUT = [mixed_text(1000 + seed, 400) for seed in range(8)] + EDGES

FRAGMENTS = [*WORDS, *PUNCTUATION, *BREAKS, " ", "  ", "0", "12", "123", "1234", "1234567", "٣", ENDOFTEXT]
HAVE_TIKTOKEN = importlib.util.find_spec("tiktoken") is not None
fragment_text = st.lists(st.sampled_from(FRAGMENTS), max_size=50).map("".join)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The superword run's directory, as the command writes it: stage 1 to STAGE_1_SIZE, then stage 2
    on from it with the superword pattern to VOCAB_SIZE (`--superbpe`), exported both ways."""
    root = tmp_path_factory.mktemp("superword-export")
    corpus = root / "train.txt"
    corpus.write_text(ENDOFTEXT.join(mixed_text(seed, 1200) for seed in range(6)), encoding="utf-8")
    argv = ["auto", str(root / "run"), "-d", str(corpus), "-v", str(VOCAB_SIZE), "--superbpe", str(STAGE_1_SIZE)]
    argv += ["--export", "hf,tiktoken", "-q"]
    assert train_main(argv) == 0
    return root / "run"


@pytest.fixture(scope="module")
def ours(run: Path) -> Tokenizer:
    tokenizer = load_tokenizer_dir(run)
    assert tokenizer.pattern.name == SUPERWORD  # the run's pattern, read from its bpe_run.json
    return tokenizer


@pytest.fixture(scope="module")
def tokenizers():
    return pytest.importorskip("tokenizers", reason="HF tokenizers is optional: pip install -e '.[export]'")


@pytest.fixture(scope="module")
def transformers():
    return pytest.importorskip("transformers", reason="transformers is optional: pip install -e '.[export]'")


@pytest.fixture(scope="module")
def tiktoken():
    return pytest.importorskip("tiktoken", reason="tiktoken is optional: pip install -e '.[export]'")


def test_the_run_learned_superwords(run: Path, ours: Tokenizer) -> None:
    # Not a vacuous check: stage 2 made tokens that span a space between two non-spaces.
    info = json.loads((run / "bpe_run.json").read_text(encoding="utf-8"))
    assert info["pattern"]["name"] == SUPERWORD and info["superbpe"]["first_stage"]["tokens"] == STAGE_1_SIZE
    assert len(ours.vocab) == VOCAB_SIZE
    spanning = [token for token in ours.vocab.values() if re.search(rb"\S \S", token)]
    assert len(spanning) >= 10, spanning


def test_the_split_keeps_the_digit_lookahead(run: Path) -> None:
    # Oniguruma reads the pattern as `regex` does: nothing to translate, the lookahead kept whole.
    assert hf_split_regex(SUPERWORD_REGEX) == SUPERWORD_REGEX
    assert r"(?=(?:\p{N}{3})*(?!\p{N}))" in SUPERWORD_REGEX
    document = json.loads((run / "tokenizer.json").read_text(encoding="utf-8"))
    split, byte_level = document["pre_tokenizer"]["pretokenizers"]
    assert split == {"type": "Split", "pattern": {"Regex": SUPERWORD_REGEX}, "behavior": "Isolated", "invert": False}
    assert byte_level["type"] == "ByteLevel" and byte_level["use_regex"] is False


@pytest.mark.parametrize("text", HELD_OUT[-len(EDGES) :] + ["1 22 333 4444 55555 666666 7777777 12345678901"])
def test_hf_split_finds_our_superword_pre_tokens(text: str, tokenizers) -> None:
    split = tokenizers.pre_tokenizers.Split(tokenizers.Regex(hf_split_regex(SUPERWORD_REGEX)), behavior="isolated")
    expected = [match.group() for match in resolve_pattern(SUPERWORD).compiled.finditer(text)]
    assert [piece for piece, _ in split.pre_tokenize_str(text)] == expected


def test_numbers_group_in_threes_from_the_right(tokenizers) -> None:
    split = tokenizers.pre_tokenizers.Split(tokenizers.Regex(hf_split_regex(SUPERWORD_REGEX)), behavior="isolated")
    pieces = [piece for piece, _ in split.pre_tokenize_str("x 1234567 y\n12")]
    assert pieces == ["x ", "1", "234", "567", " y", "\n", "12"]


def test_tokenizers_gives_our_ids_on_held_out_text(run: Path, ours: Tokenizer, tokenizers) -> None:
    hf = tokenizers.Tokenizer.from_file(str(run / "tokenizer.json"))
    for text in [*HELD_OUT, ENDOFTEXT.join(HELD_OUT)]:
        expected = ours.encode(text)
        assert hf.encode(text).ids == expected, text
        assert hf.decode(expected, skip_special_tokens=False) == text


def test_transformers_gives_our_ids_on_held_out_text(run: Path, ours: Tokenizer, transformers) -> None:
    fast = transformers.PreTrainedTokenizerFast(tokenizer_file=str(run / "tokenizer.json"))
    auto = transformers.AutoTokenizer.from_pretrained(str(run))
    assert auto.eos_token == ENDOFTEXT
    for text in [*HELD_OUT, ENDOFTEXT.join(HELD_OUT)]:
        expected = ours.encode(text)
        assert fast.encode(text, add_special_tokens=False) == expected, text
        assert auto.encode(text, add_special_tokens=False) == expected, text
        assert auto.decode(expected) == text


def test_tiktoken_gives_our_ids_on_held_out_text(run: Path, ours: Tokenizer, tiktoken) -> None:
    # The rank file holds no pattern: tiktoken_encoding takes the run's from its bpe_run.json, and
    # fancy-regex reads the lookahead as `regex` does.
    encoding = tiktoken_encoding(run / "tokenizer.tiktoken", SPECIALS)
    assert encoding._pat_str == SUPERWORD_REGEX
    for text in [*HELD_OUT, ENDOFTEXT.join(HELD_OUT)]:
        expected = ours.encode(text)
        assert encoding.encode(text, allowed_special="all") == expected, text
        assert encoding.decode(expected) == text


def test_the_python_export_writes_the_same_tokenizer_json(run: Path, ours: Tokenizer) -> None:
    # What the command wrote is what `hf_tokenizer_json(..., pattern="superword")` builds.
    document = hf_tokenizer_json(ours.vocab, ours.merges, SPECIALS, pattern=SUPERWORD)
    assert json.loads((run / "tokenizer.json").read_text(encoding="utf-8")) == document


@cache
def loaded(run: Path) -> tuple:
    """HF's tokenizer and tiktoken's encoding (None where tiktoken is not installed) of the run."""
    import tokenizers

    encoding = tiktoken_encoding(run / "tokenizer.tiktoken", SPECIALS) if HAVE_TIKTOKEN else None
    return tokenizers.Tokenizer.from_file(str(run / "tokenizer.json")), encoding


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=fragment_text)
def test_every_library_gives_our_ids_on_generated_text(run: Path, ours: Tokenizer, tokenizers, text: str) -> None:
    hf, encoding = loaded(run)
    expected = ours.encode(text)
    assert hf.encode(text).ids == expected
    if encoding is not None:  # without tiktoken, HF alone is checked here
        assert encoding.encode(text, allowed_special="all") == expected
