"""Exports: HF `tokenizer.json` and tiktoken's rank file give our ids on real and generated text.
Each library's tests skip, with the reason, when it is not installed (CI installs the export extra)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cs336_basics import BPEInputError, Tokenizer, train_bpe
from cs336_basics.export import (
    hf_tokenizer_json,
    save_hf_tokenizer_json,
    save_tiktoken_ranks,
    tiktoken_encoding,
)
from tests.support import SHARED_CORPUS
from tests.test_equivalence import FRAGMENTS

SPECIALS = ["<|endoftext|>", "<|pad|>"]
REAL_MIX_BYTES = 1_500_000


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Tokenizer]:
    """A 2,000-token vocabulary trained on the first 1.5 MB of real_mix, its files, and held-out text."""
    corpus = SHARED_CORPUS / "real_mix.txt.gz"
    if not corpus.exists():
        pytest.skip(f"corpus {corpus} not found")
    with gzip.open(corpus, "rb") as file:
        data = file.read(2 * REAL_MIX_BYTES)
    data = data[: data.rfind(b"\n") + 1]
    directory = tmp_path_factory.mktemp("export")
    train_path = directory / "train.txt"
    train_path.write_bytes(data[:REAL_MIX_BYTES])
    vocab, merges = train_bpe(train_path, 2000, SPECIALS)
    save_hf_tokenizer_json(directory / "tokenizer.json", vocab, merges, SPECIALS)
    save_tiktoken_ranks(directory / "tokenizer.tiktoken", vocab, SPECIALS)
    held_out = data[REAL_MIX_BYTES:].decode("utf-8", errors="replace")
    held_out = held_out.replace("\n\n", "\n\n<|endoftext|>", 20).replace(" the ", " the<|pad|>", 20)
    return directory, held_out, Tokenizer(vocab, merges, SPECIALS)


# Fragments hit every pattern class, whitespace oddities, and special tokens glued to text.
texts = st.one_of(
    st.text(max_size=60),
    st.lists(st.sampled_from([*FRAGMENTS, *SPECIALS, "\x1c", "\x1f", "\u2028", "\x0b", " \u3000"]), max_size=40).map(
        "".join
    ),
)


@pytest.fixture(scope="module")
def hf_tokenizer(trained):
    tokenizers = pytest.importorskip("tokenizers", reason="HF tokenizers is optional: pip install -e '.[export]'")
    return tokenizers.Tokenizer.from_file(str(trained[0] / "tokenizer.json"))


@pytest.fixture(scope="module")
def tiktoken_enc(trained):
    pytest.importorskip("tiktoken", reason="tiktoken is optional: pip install -e '.[export]'")
    return tiktoken_encoding(trained[0] / "tokenizer.tiktoken", SPECIALS)


def test_hf_tokenizer_gives_our_ids_on_real_text(trained, hf_tokenizer) -> None:
    _, text, ours = trained
    expected = ours.encode(text)
    assert hf_tokenizer.encode(text).ids == expected
    assert hf_tokenizer.decode(expected, skip_special_tokens=False) == ours.decode(expected)
    assert hf_tokenizer.token_to_id("<|pad|>") == ours.encode("<|pad|>")[0] == 257


@settings(max_examples=300, deadline=None)
@given(text=texts)
def test_hf_tokenizer_gives_our_ids_on_generated_text(trained, hf_tokenizer, text: str) -> None:
    assert hf_tokenizer.encode(text).ids == trained[2].encode(text)


def test_transformers_loads_tokenizer_json(trained) -> None:
    transformers = pytest.importorskip("transformers", reason="transformers is optional: pip install -e '.[export]'")
    directory, text, ours = trained
    fast = transformers.PreTrainedTokenizerFast(tokenizer_file=str(directory / "tokenizer.json"))
    assert fast(text[:20_000])["input_ids"] == ours.encode(text[:20_000])


def test_tiktoken_gives_our_ids_on_real_text(trained, tiktoken_enc) -> None:
    _, text, ours = trained
    expected = ours.encode(text)
    assert tiktoken_enc.encode(text, allowed_special="all") == expected
    assert tiktoken_enc.decode_bytes(expected) == ours.decode_bytes(expected)


@settings(max_examples=300, deadline=None)
@given(text=texts)
def test_tiktoken_gives_our_ids_on_generated_text(trained, tiktoken_enc, text: str) -> None:
    assert tiktoken_enc.encode(text, allowed_special="all") == trained[2].encode(text)


def test_tiktoken_from_the_vocabulary_equals_from_the_rank_file(trained, tiktoken_enc) -> None:
    _, text, ours = trained
    from_vocab = tiktoken_encoding(ours.vocab, SPECIALS)
    assert from_vocab.encode(text[:5000], allowed_special="all") == tiktoken_enc.encode(
        text[:5000], allowed_special="all"
    )


def test_document_shape() -> None:
    vocab = {index: bytes([index]) for index in range(256)} | {256: b"<|endoftext|>", 257: b" a"}
    document = hf_tokenizer_json(vocab, [(b" ", b"a")], ["<|endoftext|>"])
    assert json.loads(json.dumps(document)) == document
    assert document["model"]["merges"] == ["Ġ a"]
    assert document["model"]["vocab"]["Ġa"] == 257
    assert document["added_tokens"][0]["id"] == 256


def test_repeated_token_bytes_are_refused() -> None:
    vocab = {index: bytes([index]) for index in range(256)} | {256: b"ab", 257: b"ab"}
    with pytest.raises(BPEInputError, match="both spell"):
        hf_tokenizer_json(vocab, [(b"a", b"b")])


def test_tiktoken_refuses_overlapping_special_tokens(trained) -> None:
    pytest.importorskip("tiktoken", reason="tiktoken is optional")
    vocab = trained[2].vocab
    with pytest.raises(BPEInputError, match="overlapping"):
        tiktoken_encoding(
            {**vocab, max(vocab) + 1: b"<|endoftext|><|endoftext|>"}, [*SPECIALS, "<|endoftext|><|endoftext|>"]
        )
