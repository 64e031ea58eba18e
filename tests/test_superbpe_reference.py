"""The SuperBPE paper's pre-tokenizers against HF tokenizers itself. The paper's training script gives HF
`Digits(individual_digits=False)`, a `Split` (behavior "isolated") and `ByteLevel(add_prefix_space=False,
use_regex=False)`; its Split's regex is a three-digit lookahead with GPT-2's letter, punctuation and space
alternatives in the first stage, the lookahead alone in the second. The rows `superbpe` and `superbpe-stage2`
are one `regex` expression each: their pre-tokens, as bytes, are that sequence's, on edge cases, generated
text, every number HF's Digits knows in a few contexts, and real text. With HF's `train(files)` rules
(`like="hf-files"`'s) and the first stage's row, training gives stock HF's vocabulary and merges, on every
version; so does the second stage's row, whose pre-tokens are whole lines but for numbers."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from cs336_basics.outputs.serialization import decode_token
from cs336_basics.rules.byte_level import gpt2_bytes_to_unicode
from cs336_basics.rules.contract import Merges, Vocab
from cs336_basics.rules.pattern import (
    _DIGITS_NEWER,
    SUPERBPE,
    SUPERBPE_STAGE2,
    TOOLS_UNICODE,
    Pattern,
    classes_as,
    resolve_pattern,
)
from cs336_basics.rules.presets import TrainingRules, resolve_rules
from cs336_basics.trainers import train, train_bpe
from tests.support import merge_pair
from tests.test_references import corpus_text

tokenizers = pytest.importorskip("tokenizers", reason="HF tokenizers is optional: pip install -e '.[export]'")

# The Split regex of each stage, as the paper's utils.py builds it (do_whitespace_pretokenization true, then false).
PAPER_SPLITS = {
    SUPERBPE: r"(?=(\d{3})+(?!\d))| ?\p{L}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
    SUPERBPE_STAGE2: r"(?=(\d{3})+(?!\d))",
}
STAGES = list(PAPER_SPLITS)
SPECIAL = ["<|endoftext|>"]

EDGES = [
    "hello world, 1234567 foo!!  bar\n\nbaz",
    "héllo  wörld ½²3 12345 ١٢٣٤٥ ٣٤٥٦٧٨٩",
    "1234² x ١٢٣4567 y ²³¹ 1²3 ١2٣4 Ⅻ 1Ⅻ234 12Ⅻ",
    "a  1 a \n 1 \t\n x abc   ",
    "12 345 6789 1234567890 0001 1,234,567.89",
    "\U00011de0\U00011de1 12\U00011de2345 a\U00016ff4 7\U00016ff5 \U00011de3\U00011de4\U00011de5\U00011de6",
    "don't it's x\u00a0\u2003 9\u0085 \r\n\r\n\u3000日本 語123",
    "",
    " ",
    "\n",
]
# Characters where the stages part: digits of several kinds, every kind of whitespace, letters, symbols.
PARTING = list(" \t\n\r0123456789²½Ⅻ١٢٣abZé.,!'\u00a0\u2003\u0085\u3000\u0301") + [
    "\U00011de0",
    "\U00016ff5",
    "\U0001d7ce",
]
parting_text = st.text(st.sampled_from(PARTING), max_size=40)
any_text = st.text(st.characters(codec="utf-8"), max_size=60)


def paper_sequence(stage: str) -> object:
    from tokenizers import Regex, pre_tokenizers

    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=False),
            pre_tokenizers.Split(pattern=Regex(PAPER_SPLITS[stage]), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
        ]
    )


def row(stage: str) -> Pattern:
    """The stage's row, classing characters as HF's Oniguruma does (Unicode 16.0)."""
    return replace(resolve_pattern(stage), unicode=TOOLS_UNICODE)


def ours(stage: str, text: str) -> list[str]:
    table = gpt2_bytes_to_unicode()
    return ["".join(table[byte] for byte in piece.encode("utf-8")) for piece in row(stage).pretokens(text)]


def hf_pieces(stage: str, text: str) -> list[str]:
    return [piece for piece, _ in paper_sequence(stage).pre_tokenize_str(text)]


# ---------------------------------------------------------------------------------------------
# Pre-tokens


def test_digits_takes_the_numbers_of_unicode_16_and_the_newer_digits() -> None:
    # What the rows assume of HF's Digits (Rust's char::is_numeric): \p{N} by Oniguruma's tables (16.0) and
    # _DIGITS_NEWER, numbers only since. Another HF build may class otherwise: this says so first.
    from tokenizers import pre_tokenizers

    everything = [chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
    pieces = pre_tokenizers.Digits(individual_digits=True).pre_tokenize_str("a".join(everything))
    numbers = {piece for piece, _ in pieces if len(piece) == 1 and piece != "a"}
    by_16 = set(regex.findall(classes_as(r"\p{N}", TOOLS_UNICODE), "".join(everything)))
    newer = set(regex.findall(_DIGITS_NEWER, "".join(everything)))
    assert numbers == by_16 | newer and not by_16 & newer and len(newer) == 13


@pytest.mark.parametrize("stage", STAGES)
def test_pre_tokens_are_the_papers_on_edge_cases(stage: str) -> None:
    for text in EDGES:
        assert ours(stage, text) == hf_pieces(stage, text), ascii(text)


@pytest.mark.parametrize("stage", STAGES)
@settings(max_examples=400, deadline=None)
@given(text=st.one_of(parting_text, any_text))
def test_pre_tokens_are_the_papers_on_any_text(stage: str, text: str) -> None:
    assert ours(stage, text) == hf_pieces(stage, text)


@pytest.mark.parametrize("stage", STAGES)
def test_pre_tokens_are_the_papers_around_every_number(stage: str) -> None:
    everything = "".join(chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF)
    numbers = regex.findall(classes_as(r"\p{N}", TOOLS_UNICODE), everything) + regex.findall(_DIGITS_NEWER, everything)
    spaces = regex.findall(r"\s", everything)
    for context in ("a{}b", "1{}23", " {}1", "{}  x", "12{}345", "x{}\n", "{}{}"):
        for chars in (numbers, spaces):
            text = "".join(context.replace("{}", char) for char in chars)
            assert ours(stage, text) == hf_pieces(stage, text), (context, stage)


@pytest.mark.parametrize("stage", STAGES)
def test_pre_tokens_are_the_papers_on_real_text(stage: str) -> None:
    text = corpus_text("real_mix_64k")
    for line in text.splitlines(keepends=True):
        assert ours(stage, line) == hf_pieces(stage, line), ascii(line[:200])
    assert ours(stage, text) == hf_pieces(stage, text)


# ---------------------------------------------------------------------------------------------
# Training: HF's train(files) with the paper's pre-tokenizer


def paper_rules(stage: str) -> TrainingRules:
    """HF's `train(files)` rules (`like="hf-files"`'s: lines pre-tokenized alone, the alphabet the bytes
    seen, HF's ties and ids) with the stage's row. The preset takes no other pattern (`resolve_rules`
    refuses one: it is HF's ByteLevel, whose regex is GPT-2's), so the rules are its with the row put in."""
    return replace(resolve_rules(like="hf-files"), pattern=row(stage))


def hf_train(stage: str, path: Path, vocab_size: int) -> tuple[Vocab, Merges]:
    """Stock HF: the paper's sequence, a default BpeTrainer of the special tokens, `train([path])`."""
    from tokenizers import Tokenizer, models, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = paper_sequence(stage)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL, show_progress=False)
    tokenizer.train([str(path)], trainer)
    model = json.loads(tokenizer.to_str())["model"]
    vocab = {token_id: decode_token(token, "hf") for token, token_id in model["vocab"].items()}
    pairs = [merge.split(" ") if isinstance(merge, str) else merge for merge in model["merges"]]
    return vocab, [(decode_token(left, "hf"), decode_token(right, "hf")) for left, right in pairs]


HAND = (
    "the cat sat on 1234567 mats, 12 345!!  ok\n\n x 99999 \n"
    "Über straße 42.5% — ١٢٣٤٥ 日本語 ²½ don't\r\n  \t indented 1000000 <|endoftext|> tail\n"
) * 20
CORPORA = {"hand": (HAND, 420), "real_mix_64k": (None, 1500)}


def corpus(tmp_path: Path, name: str) -> tuple[Path, int]:
    text, vocab_size = CORPORA[name]
    path = tmp_path / f"{name}.txt"
    path.write_bytes((corpus_text(name) if text is None else text).encode("utf-8"))
    return path, vocab_size


@pytest.mark.parametrize("name", list(CORPORA))
def test_the_first_stage_trains_as_hf(trainer: str, name: str, tmp_path: Path) -> None:
    path, vocab_size = corpus(tmp_path, name)
    expected = hf_train(SUPERBPE, path, vocab_size)
    result = train(path, vocab_size, SPECIAL, trainer=trainer, rules=paper_rules(SUPERBPE))
    assert (result.vocab, result.merges) == expected
    assert len(expected[1]) > 30
    # The preset is those rules: like="superbpe" trains the paper's first stage.
    assert train_bpe(path, vocab_size, SPECIAL, trainer=trainer, like="superbpe") == expected


@pytest.mark.parametrize("name", list(CORPORA))
def test_the_second_stages_pre_tokens_train_as_hf(trainer: str, name: str, tmp_path: Path) -> None:
    # From scratch (stock HF cannot go on from merges): words are whole lines, crossing spaces.
    path, vocab_size = corpus(tmp_path, name)
    expected = hf_train(SUPERBPE_STAGE2, path, vocab_size)
    result = train(path, vocab_size, SPECIAL, trainer=trainer, rules=paper_rules(SUPERBPE_STAGE2))
    assert (result.vocab, result.merges) == expected
    assert any(b" " in left + right and not (left + right).startswith(b" ") for left, right in expected[1])


# ---------------------------------------------------------------------------------------------
# The paper's second stage (like="superbpe", superbpe=T), against its trainer's steps written out here


def paper_second_stage(path: Path, first: tuple[Vocab, Merges], vocab_size: int) -> tuple[Vocab, Merges]:
    """The fork's `do_train_extend` as its code reads (docs/SUPERBPE.md), from stage 1's tokenizer
    `first` (stock HF's): the file's lines (each with its "\\n") pre-tokenized by HF's second-stage
    sequence; stage 1's merges replayed in order over every word, each one kept only if its pair has
    stood somewhere by its turn (the others dropped, the later ids moving down); then HF's loop (the
    most frequent pair, ties to the smaller pair of ids), never making a token of more than four
    space-separated words or holding ": ", until the vocabulary holds `vocab_size` tokens."""
    text = path.read_bytes().decode("utf-8")
    lines = [line + "\n" for line in text.split("\n")[:-1]] + ([text.split("\n")[-1]] if text.split("\n")[-1] else [])
    words: list[list[bytes]] = []
    counts: list[int] = []
    seen: dict[bytes, int] = {}
    for line in lines:
        for piece in hf_pieces(SUPERBPE_STAGE2, line):
            word = decode_token(piece, "hf")
            if word not in seen:
                seen[word] = len(words)
                words.append([bytes([byte]) for byte in word])
                counts.append(0)
            counts[seen[word]] += 1
    met = {pair for parts in words for pair in zip(parts, parts[1:])}
    kept = []
    for left, right in first[1]:
        if (left, right) not in met:
            continue  # never stood anywhere by its turn: dropped
        kept.append((left, right))
        for index, parts in enumerate(words):
            words[index] = merge_pair(parts, left, right)
            met.update(zip(words[index], words[index][1:]))
    characters = gpt2_bytes_to_unicode()
    alphabet = sorted({bytes([byte]) for word in seen for byte in word}, key=lambda b: characters[b[0]])
    order = [token.encode() for token in SPECIAL] + alphabet + [left + right for left, right in kept]
    ids = {token: index for index, token in reversed(list(enumerate(order)))}
    merges = list(kept)
    while len(order) < vocab_size:
        pairs: dict[tuple[bytes, bytes], int] = {}
        for parts, count in zip(words, counts):
            for pair in zip(parts, parts[1:]):
                pairs[pair] = pairs.get(pair, 0) + count
        allowed = [
            pair for pair in pairs
            if b": " not in pair[0] + pair[1] and len([w for w in (pair[0] + pair[1]).split(b" ") if w]) <= 4
        ]  # fmt: skip
        if not allowed:
            break
        left, right = min(allowed, key=lambda pair: (-pairs[pair], ids[pair[0]], ids[pair[1]]))
        merges.append((left, right))
        if left + right not in ids:
            ids[left + right] = len(order)
        order.append(left + right)
        words = [merge_pair(parts, left, right) for parts in words]
    return dict(enumerate(order)), merges


# "drops": stage 1 merges (" ", "bc") from " bc" after "a"'s space; in stage 2 "a  bc" takes
# (" ", " ") first (ranked before it: the three-space runs), so " " never stands before "bc": dropped.
SECOND_STAGE = {
    "hand": (HAND, 330, 420),
    "real_mix_64k": (None, 700, 900),
    "drops": ("x   y\n" * 20 + "a  bc\n" * 5, 12, 15),
}


@pytest.mark.parametrize("name", list(SECOND_STAGE))
def test_the_papers_second_stage_is_its_trainers(trainer: str, name: str, tmp_path: Path) -> None:
    text, transition, vocab_size = SECOND_STAGE[name]
    path = tmp_path / f"{name}.txt"
    path.write_bytes((corpus_text(name) if text is None else text).encode("utf-8"))
    first = hf_train(SUPERBPE, path, transition)
    expected = paper_second_stage(path, first, vocab_size)
    got = train_bpe(path, vocab_size, SPECIAL, trainer=trainer, like="superbpe", superbpe=transition)
    assert got == expected
    kept = [merge for merge in expected[1] if merge in set(first[1])]
    new = [left + right for left, right in expected[1][len(kept) :]]
    assert any(b" " in token.strip() for token in new)  # superwords, not a vacuous run
    if name == "drops":
        assert (b" ", b"bc") in first[1] and (b" ", b"bc") not in got[1] and len(got[0]) == vocab_size
