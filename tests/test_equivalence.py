"""Every version against the oracle bpe_v1 on generated corpora, and independence from parallelism."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cs336_basics import train_bpe
from cs336_basics.commands.demo import write_demo_corpus

# Few distinct letters make frequent ties; the rest covers every pre-token class of the pattern.
FRAGMENTS = [
    "a", "b", "ab", "ba", "aa", "é", "ü", "ß", "中文", "😀", "e\u0301", "Ω",
    " ", "  ", "   ", "\n", "\n\n", "\t", "\r\n", "\u3000", "\xa0", "\x85",
    "0", "7", "42", "١٢",
    "'", "'s", "'t", "'ll", "'ve", "'re", "'d", "'m", "'S", "''",
    ".", ",", "!", "?", "...", "--", "<", "|", ">", "<|", "|>", "\x00",
]
SPECIAL_TOKEN_SETS = [
    [],
    ["<|endoftext|>"],
    ["<|endoftext|>", "<|endoftext|><|endoftext|>"],
    ["<s>", "</s>"],
    ["ab"],
    ["é!", "a b"],
]


@st.composite
def corpora(draw: st.DrawFn) -> tuple[str, list[str], int]:
    special_tokens = draw(st.sampled_from(SPECIAL_TOKEN_SETS))
    pieces = draw(st.lists(st.sampled_from(FRAGMENTS + special_tokens), min_size=1, max_size=80))
    if draw(st.booleans()):
        pieces.append(draw(st.text(min_size=0, max_size=20)))
    text = "".join(pieces)
    if not text.encode("utf-8"):
        text = "a"
    extra_merges = draw(st.integers(min_value=0, max_value=60))
    return text, special_tokens, 256 + len(special_tokens) + extra_merges


@lru_cache(maxsize=256)
def oracle(directory: Path, text: str, special_tokens: tuple[str, ...], vocab_size: int):
    return train_bpe(write_corpus(directory, text), vocab_size, list(special_tokens), trainer="bpe_v1")


def write_corpus(directory: Path, text: str) -> Path:
    """One file per distinct text, named by its hash, in pytest's temporary directory for the module
    (hypothesis reruns a test body many times, so a function-scoped tmp_path cannot be used)."""
    data = text.encode("utf-8")
    path = directory / f"{hashlib.sha1(data).hexdigest()}.txt"
    if not path.exists():
        path.write_bytes(data)
    return path


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("equivalence")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=corpora(), num_chunks=st.integers(min_value=1, max_value=9))
def test_every_version_matches_the_oracle(
    trainer: str, corpus_dir: Path, case: tuple[str, list[str], int], num_chunks: int
) -> None:
    text, special_tokens, vocab_size = case
    expected = oracle(corpus_dir, text, tuple(special_tokens), vocab_size)
    # One worker keeps examples fast; many chunks still exercise the chunk boundaries.
    path = write_corpus(corpus_dir, text)
    got = train_bpe(path, vocab_size, special_tokens, trainer=trainer, num_workers=1, num_chunks=num_chunks)
    assert got == expected


@pytest.fixture(scope="module")
def demo_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_corpus(tmp_path_factory.mktemp("demo") / "demo.txt", size_bytes=300_000)


@pytest.mark.parametrize("num_workers", [1, 2, 7])
def test_worker_count_does_not_change_the_result(trainer: str, demo_corpus: Path, num_workers: int) -> None:
    expected = train_bpe(demo_corpus, 600, ["<|endoftext|>"], trainer="bpe_v2")
    got = train_bpe(demo_corpus, 600, ["<|endoftext|>"], trainer=trainer, num_workers=num_workers, num_chunks=13)
    assert got == expected


def test_file_without_special_tokens_is_still_split(trainer: str, demo_corpus: Path, tmp_path: Path) -> None:
    text = demo_corpus.read_text(encoding="utf-8").replace("<|endoftext|>", "")
    path = tmp_path / "plain.txt"
    path.write_text(text, encoding="utf-8")
    expected = train_bpe(path, 500, [], trainer="bpe_v2")
    assert train_bpe(path, 500, [], trainer=trainer, num_workers=2, num_chunks=17) == expected
