"""HF tokenizers' conventions against `tokenizers` itself: a `vocab_size` below the initial tokens
(HF trains it: `train(files)` from the bytes seen, `train_from_iterator` from all 256, no merges then),
and `like="hf-raw"`, HF's `train_from_iterator` fed documents that hold the special tokens as text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cs336_basics import train_bpe, train_bpe_from_iterator
from cs336_basics.commands.cli import main as cli_main
from cs336_basics.outputs.serialization import decode_token
from cs336_basics.rules.contract import Merges, Vocab

tokenizers = pytest.importorskip("tokenizers", reason="HF tokenizers is optional: pip install -e '.[export]'")

FIVE = ["<|endoftext|>", "<|a|>", "<|b|>", "<|c|>", "<|d|>"]
TEXT = "the cat sat on the mat, the cat's hat! 12 12\nand then <|endoftext|> more <|a|>text here\n" * 5
DOCUMENTS = [line + "<|endoftext|>" for line in TEXT.split("\n")]


def hf_train(vocab_size: int, path: Path | None = None, documents: list[str] | None = None) -> tuple[Vocab, Merges]:
    """HF's tokenizer: `train([path])` with a default trainer, or `train_from_iterator(documents)` with
    the byte alphabet and min_frequency=0 (the calls docs/REFERENCES.md names); the five special tokens."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    if path is not None:
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=FIVE, show_progress=False)
        tokenizer.train([str(path)], trainer)
    else:
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=FIVE,
            min_frequency=0,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        tokenizer.train_from_iterator(documents, trainer)
    model = json.loads(tokenizer.to_str())["model"]
    vocab = {token_id: decode_token(token, "hf") for token, token_id in model["vocab"].items()}
    pairs = [merge.split(" ") if isinstance(merge, str) else merge for merge in model["merges"]]
    return vocab, [(decode_token(left, "hf"), decode_token(right, "hf")) for left, right in pairs]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


@pytest.mark.parametrize("vocab_size", [3, 30, 260])
def test_small_sizes_train_as_hf_does(trainer: str, corpus: Path, vocab_size: int) -> None:
    # train(files) starts from the 23 bytes seen: 30 is the five special tokens, those bytes and 2 merges;
    # 3 is those 28 tokens alone; at 260 the text runs out of pairs.
    expected = hf_train(vocab_size, path=corpus)
    assert train_bpe(corpus, vocab_size, FIVE, trainer=trainer, like="hf-files") == expected
    assert len(set(TEXT.encode())) == 23 and len(expected[0]) == {3: 28, 30: 30, 260: 63}[vocab_size]
    # train_from_iterator starts from all 256 bytes: below 261 it returns them and the special tokens.
    documents = TEXT.split("<|endoftext|>")
    expected = hf_train(vocab_size, documents=[piece for piece in documents if piece])
    assert train_bpe(corpus, vocab_size, FIVE, trainer=trainer, like="hf") == expected
    assert len(expected[0]) == 261 and not expected[1]


def test_hf_raw_counts_the_special_tokens_as_text(trainer: str, corpus: Path) -> None:
    expected = hf_train(300, documents=DOCUMENTS)
    assert train_bpe_from_iterator(DOCUMENTS, 300, FIVE, trainer=trainer, like="hf-raw") == expected
    assert (b"<", b"|") in expected[1]  # the special tokens' text is counted, and merged
    assert train_bpe_from_iterator(DOCUMENTS, 300, FIVE, trainer=trainer, like="hf") != expected
    # A file is one document: HF fed its whole text.
    assert train_bpe(corpus, 300, FIVE, trainer=trainer, like="hf-raw") == hf_train(300, documents=[TEXT])


def test_the_command_trains_small_sizes_and_raw_text(tmp_path: Path, corpus: Path) -> None:
    runs = [("hf-files", 30, hf_train(30, path=corpus)), ("hf-raw", 280, hf_train(280, documents=[TEXT]))]
    for like, size, expected in runs:
        out = tmp_path / like
        assert cli_main(["auto", str(out), "-d", str(corpus), "-v", str(size), "--like", like, "-q",
                         "--special", *FIVE]) == 0  # fmt: skip
        vocab = json.loads((out / "vocab.json").read_text(encoding="utf-8"))
        assert len(vocab) == len(expected[0]) and vocab["<|d|>"] == 4
