"""nanochat's recipe, `like="nanochat"`: what nanochat's `RustBPETokenizer.train_from_iterator(documents,
vocab_size)` trains (rustbpe with nanochat's pattern, `vocab_size - 9` tokens, then its nine special
tokens at `len(ranks) + i`), every id; and the tiktoken export nanochat's wrapper loads as its own.
A hand-checked answer runs everywhere; the comparisons with rustbpe itself skip without it."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from cs336_basics import BPEInputError, Tokenizer, train_bpe, train_bpe_from_iterator
from cs336_basics.commands.cli import main as cli_main
from cs336_basics.outputs.export import load_tiktoken_ranks, tiktoken_encoding
from cs336_basics.rules.pattern import NAMED_PATTERNS
from cs336_basics.rules.presets import NANOCHAT_SPECIAL_TOKENS
from tests.test_references import SMALL_CORPORA, corpus_text, fixture_script

NINE = list(NANOCHAT_SPECIAL_TOKENS)
BYTES = {byte: bytes([byte]) for byte in range(256)}
# nanochat's words here: 12 34 5 (its numbers are one or two digits), the space alone, ab and " ab".
DOCUMENTS = ["12345 12345", "ab ab"]
# Every pair counts 2 but the last; ties go to the smallest ids: (1, 2), (3, 4), (a, b), then (" ", ab).
# (rustbpe's own pattern makes 123 and 45: (1, 2), then (4, 5) before (12, 3), whose left id is 256.)
HAND_CHECKED = {**BYTES, 256: b"12", 257: b"34", 258: b"ab", 259: b" ab"}
# Text where nanochat's numbers (two digits) and rustbpe's (three) split otherwise.
DIGITS = ["in 1999 and 2024 there were 12345 and 678 items, 90210 zips", "call 5551234 or 5559876 at 10:45"] * 6


def nanochat_vocab(merged: dict[int, bytes]) -> dict[int, bytes]:
    return {**merged, **{len(merged) + index: token.encode() for index, token in enumerate(NINE)}}


def test_the_hand_checked_answer(trainer: str, tmp_path: Path) -> None:
    expected = nanochat_vocab(HAND_CHECKED)
    assert train_bpe_from_iterator(DOCUMENTS, 269, trainer=trainer, like="nanochat")[0] == expected
    # A file whose documents each begin with <|bos|>, as nanochat feeds them to its model, trains alike.
    path = tmp_path / "documents.txt"
    path.write_text("".join("<|bos|>" + document for document in DOCUMENTS), encoding="utf-8")
    vocab, merges = train_bpe(path, 269, trainer=trainer, like="nanochat")
    assert vocab == expected and merges == [(b"1", b"2"), (b"3", b"4"), (b"a", b"b"), (b" ", b"ab")]
    # The same merges as rustbpe with nanochat's pattern, special tokens given; rustbpe's own pattern differs.
    assert train_bpe(path, 269, NINE, trainer=trainer, like="rustbpe", pattern="nanochat") == (vocab, merges)
    assert train_bpe(path, 269, NINE, trainer=trainer, like="rustbpe")[1][1] == (b"4", b"5")  # 123 45


def test_other_special_tokens_are_refused_in_one_line() -> None:
    for specials in (["<|endoftext|>"], [], NINE[::-1]):
        with pytest.raises(BPEInputError, match="nanochat") as refused:
            train_bpe_from_iterator(DOCUMENTS, 269, specials, like="nanochat")
        assert "<|bos|>" in str(refused.value) and "\n" not in str(refused.value)
    assert train_bpe_from_iterator(DOCUMENTS, 269, NINE, like="nanochat")[0] == nanochat_vocab(HAND_CHECKED)


def nanochat_encoding(directory: Path):
    """What nanochat builds from a rank file: its ranks, then the nine at len(ranks) + i, its pattern."""
    tiktoken = pytest.importorskip("tiktoken", reason="tiktoken is optional: pip install -e '.[export]'")
    ranks = load_tiktoken_ranks(directory / "tokenizer.tiktoken")
    specials = {token: len(ranks) + index for index, token in enumerate(NINE)}
    return tiktoken.Encoding("nanochat", pat_str=NAMED_PATTERNS["nanochat"], mergeable_ranks=ranks,
                             special_tokens=specials)  # fmt: skip


def test_the_command_and_the_export_nanochat_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "documents.txt"
    path.write_text("".join("<|bos|>" + document for document in DIGITS), encoding="utf-8")
    out = tmp_path / "out"
    assert cli_main(["auto", str(out), "-d", str(path), "-v", "300", "--like", "nanochat", "-q",
                     "--export", "tiktoken"]) == 0  # fmt: skip
    assert "never occur" not in capsys.readouterr().err  # nanochat's special tokens are for chats, not the text
    run = json.loads((out / "bpe_run.json").read_text(encoding="utf-8"))
    assert run["special_tokens"] == NINE and run["pattern"]["name"] == "nanochat" and run["layout"] == "rustbpe"
    vocab, merges = train_bpe(path, 300, like="nanochat")
    ranks = load_tiktoken_ranks(out / "tokenizer.tiktoken")
    assert sorted(ranks.values()) == list(range(291))  # no gap: the nine follow the ranks
    encoding = nanochat_encoding(out)
    tokenizer = Tokenizer.from_files(out / "vocab.json", out / "merges.txt")
    text = "".join(DIGITS) + "<|bos|>new 31415926 text<|assistant_end|>"
    expected = tokenizer.encode(text)
    assert encoding.encode(text, allowed_special="all") == expected
    assert tiktoken_encoding(out / "tokenizer.tiktoken", NINE).encode(text, allowed_special="all") == expected
    assert [vocab[token_id] for token_id in range(291, 300)] == [token.encode() for token in NINE]
    assert len(merges) == 300 - 9 - 256


# ---------------------------------------------------------------------------------------------
# Against rustbpe itself


def rustbpe_ranks(documents: list[str], vocab_size: int, pattern: str | None) -> dict[int, bytes]:
    rustbpe = pytest.importorskip("rustbpe", reason="rustbpe is optional: pip install rustbpe (the bench extra)")
    tokenizer = rustbpe.Tokenizer()
    tokenizer.train_from_iterator(iter(documents), vocab_size, pattern=pattern)
    return {rank: bytes(token) for token, rank in tokenizer.get_mergeable_ranks()}


def corpus_documents(corpus: str) -> list[str]:
    return DIGITS if corpus == "digits" else fixture_script.documents(corpus_text(corpus))


@pytest.mark.parametrize("corpus", ["digits", *SMALL_CORPORA])
def test_like_nanochat_is_nanochats_trainer(corpus: str) -> None:
    documents = corpus_documents(corpus)
    vocab_size = 256 + 9 + (60 if corpus == "digits" else 300)
    # nanochat: rustbpe to vocab_size - 9 with its SPLIT_PATTERN, then its special tokens after the ranks.
    merged = rustbpe_ranks(documents, vocab_size - 9, NAMED_PATTERNS["nanochat"])
    vocab, _ = train_bpe_from_iterator(documents, vocab_size, like="nanochat")
    assert vocab == nanochat_vocab(merged)


@pytest.mark.parametrize("pattern", ["cl100k", "o200k", r"\S+|\s+"])
def test_like_rustbpe_with_a_pattern_is_rustbpe_given_it(pattern: str) -> None:
    documents = corpus_documents("real_mix_64k")
    expression = NAMED_PATTERNS.get(pattern, pattern)
    merged = rustbpe_ranks(documents, 556, expression)
    vocab, _ = train_bpe_from_iterator(documents, 556, [], like="rustbpe", pattern=pattern)
    assert vocab == merged


def test_the_export_encodes_as_nanochats_tokenizer(tmp_path: Path) -> None:
    tiktoken = pytest.importorskip("tiktoken", reason="tiktoken is optional: pip install -e '.[export]'")
    documents = corpus_documents("real_mix_64k")
    merged = rustbpe_ranks(documents, 600 - 9, NAMED_PATTERNS["nanochat"])
    theirs = tiktoken.Encoding(
        "rustbpe",
        pat_str=NAMED_PATTERNS["nanochat"],
        mergeable_ranks={token: rank for rank, token in merged.items()},
        special_tokens={token: len(merged) + index for index, token in enumerate(NINE)},
    )
    path = tmp_path / "documents.txt"
    path.write_text("".join("<|bos|>" + document for document in documents), encoding="utf-8")
    assert cli_main(["auto", str(tmp_path / "out"), "-d", str(path), "-v", "600", "--like", "nanochat", "-q",
                     "--export", "tiktoken"]) == 0  # fmt: skip
    ours = nanochat_encoding(tmp_path / "out")
    lines = [line for document in documents[-80:] for line in document.splitlines() if line][-200:]
    assert len(lines) == 200
    for line in lines:
        assert ours.encode_ordinary(line) == theirs.encode_ordinary(line)
    assert ours.encode_single_token("<|bos|>") == theirs.encode_single_token("<|bos|>") == 591
    assert base64.b64encode(merged[590]).decode() in (tmp_path / "out" / "tokenizer.tiktoken").read_text()


def test_no_rank_file_leaves_a_gap_where_a_loaders_special_token_could_land(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "documents.txt"
    path.write_text("<|endoftext|>".join(DIGITS), encoding="utf-8")
    common = ["-d", str(path), "-v", "300", "-q", "--export", "tiktoken"]
    # CS336's layout puts <|endoftext|> at 256, among the ranks: the file lists it there, so the ranks run
    # 0 .. len - 1 and a loader's special token at len(ranks) + i lands on no merged token.
    rules = ["--pattern", "nanochat", "--tie-break", "smallest-id"]
    assert cli_main(["auto", str(tmp_path / "cs336"), *common, *rules]) == 0
    assert "tiktoken" not in capsys.readouterr().err
    ranks = load_tiktoken_ranks(tmp_path / "cs336" / "tokenizer.tiktoken")
    vocab = json.loads((tmp_path / "cs336" / "vocab.json").read_text(encoding="utf-8"))
    assert sorted(ranks.values()) == list(range(len(ranks))) == list(range(len(vocab)))
    assert ranks[b"<|endoftext|>"] == vocab["<|endoftext|>"] == 256
    # Loaded with its special token it gives our ids; loaded as a base, the token stays special at 256.
    encoding = tiktoken_encoding(tmp_path / "cs336" / "tokenizer.tiktoken", ["<|endoftext|>"])
    ours = Tokenizer.from_files(tmp_path / "cs336" / "vocab.json", tmp_path / "cs336" / "merges.txt", ["<|endoftext|>"])
    text = "<|endoftext|>".join(DIGITS[:2])
    assert encoding.encode(text, allowed_special="all") == ours.encode(text)
    grown, _ = train_bpe(path, 310, ["<|endoftext|>"], start_from=tmp_path / "cs336" / "tokenizer.tiktoken")
    assert grown[256] == b"<|endoftext|>" and len(grown) == 310
    # rustbpe's rules with nanochat's pattern and any special tokens: the ranks run on, the tokens follow.
    assert cli_main(["auto", str(tmp_path / "none"), *common, "--like", "rustbpe", "--pattern", "nanochat"]) == 0
    assert "tiktoken" not in capsys.readouterr().err
    ranks = load_tiktoken_ranks(tmp_path / "none" / "tokenizer.tiktoken")
    assert sorted(ranks.values()) == list(range(len(ranks)))
    vocab = json.loads((tmp_path / "none" / "vocab.json").read_text(encoding="utf-8"))
    assert vocab["<|endoftext|>"] == len(ranks) > 280
