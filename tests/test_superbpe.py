"""SuperBPE (`superbpe=T`, `--superbpe T`): every version equals a two-stage reference written here
(plain BPE to T on GPT-2's pre-tokens, then on from its merges on superword pre-tokens, each starting
as those merges encode it); a hand-checked answer; several sizes from one run; the command's record,
its tokenizer and its refusals."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cs336_basics import BPEInputError, Tokenizer, train_bpe
from cs336_basics.commands.cli import main as cli_main
from tests.support import greedy_merges, ranked_encoding
from tests.test_pattern_and_tie_break import write_corpus

EOT = "<|endoftext|>"
GPT2 = regex.compile(r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
SUPERWORD = regex.compile(r"""\p{N}{1,3}(?=(?:\p{N}{3})*(?!\p{N}))|[^\r\n\p{N}]+|[\r\n]+""")


def documents(text: str, specials: list[str]) -> list[str]:
    if not specials:
        return [text]
    alternatives = "|".join(regex.escape(token) for token in sorted(specials, key=len, reverse=True))
    return regex.split(alternatives, text)


def reference(text: str, specials: list[str], transition: int, vocab_size: int) -> tuple[dict, list]:
    """SuperBPE by its definition (docs/SUPERBPE.md), in CS336's layout: bytes, special tokens, merges."""
    first_words: Counter[tuple[bytes, ...]] = Counter()
    second_words: Counter[bytes] = Counter()
    for document in documents(text, specials):
        for piece in GPT2.findall(document):
            first_words[tuple(bytes([byte]) for byte in piece.encode())] += 1
        for piece in SUPERWORD.findall(document):
            second_words[piece.encode()] += 1
    initial = 256 + len(specials)
    merges = greedy_merges(first_words, transition - initial)
    ranks = {pair: rank for rank, pair in enumerate(merges)}
    encoded: Counter[tuple[bytes, ...]] = Counter()
    for word, count in second_words.items():
        encoded[ranked_encoding(word, ranks)] += count
    merges += greedy_merges(encoded, vocab_size - initial - len(merges))
    vocab = {byte: bytes([byte]) for byte in range(256)}
    vocab.update({256 + index: token.encode() for index, token in enumerate(specials)})
    vocab.update({initial + index: left + right for index, (left, right) in enumerate(merges)})
    return vocab, merges


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("superbpe")


# Words, spaces, numbers of every length, line ends of both kinds, other scripts, special tokens.
FRAGMENTS = [
    "the", " the", " cat", " sat", " on", " mat", ",", ".", " ", "  ", "\n", "\n\n", "\r\n", "1", "12",
    "1234", "1234567", " 42", "é", " día", "日本", "x\u0303", "'s", "!", "\t",
]


@st.composite
def superbpe_cases(draw: st.DrawFn) -> tuple[str, list[str], int, int]:
    specials = draw(st.sampled_from([[], [EOT], [EOT, "<pad>"]]))
    pieces = draw(st.lists(st.sampled_from(FRAGMENTS + specials), min_size=1, max_size=50))
    initial = 256 + len(specials)
    first = draw(st.integers(min_value=0, max_value=15))
    second = draw(st.integers(min_value=1, max_value=25))
    return "".join(pieces) or "a", specials, initial + first, initial + first + second


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=superbpe_cases(), num_chunks=st.integers(min_value=1, max_value=4))
def test_every_version_trains_superwords_as_the_reference(
    trainer: str, corpus_dir: Path, case: tuple[str, list[str], int, int], num_chunks: int
) -> None:
    text, specials, transition, vocab_size = case
    path = write_corpus(corpus_dir, text)
    options = {"num_workers": 1, "num_chunks": num_chunks}
    got = train_bpe(path, vocab_size, specials, trainer=trainer, superbpe=transition, **options)
    expected = reference(text, specials, transition, vocab_size)
    # A stage that runs dry stops early: the reference's merges are all there are.
    assert got[1] == expected[1]
    assert got[0] == {index: token for index, token in expected[0].items() if index < len(got[0])}


def test_a_hand_checked_answer(trainer: str, tmp_path: Path) -> None:
    # Stage 1 (to 258): GPT-2's pre-tokens ab, " ab", " ab": (a, b) 3 times. Stage 2: one superword,
    # ab ␣ ab ␣ ab: (ab, ␣) and (␣, ab) twice each, the greater bytes win: (ab, ␣); then ab␣ ab␣ ab:
    # (ab␣, ab␣) and (ab␣, ab) once each, and ab␣ > ab.
    path = tmp_path / "ab.txt"
    path.write_text("ab ab ab", encoding="utf-8")
    vocab, merges = train_bpe(path, 260, [EOT], trainer=trainer, superbpe=258)
    assert merges == [(b"a", b"b"), (b"ab", b" "), (b"ab ", b"ab ")]
    assert [vocab[257], vocab[258], vocab[259]] == [b"ab", b"ab ", b"ab ab "]
    assert vocab[256] == EOT.encode() and len(vocab) == 260


def test_the_first_stage_is_a_plain_run_and_the_second_goes_on_from_it(trainer: str, tmp_path: Path) -> None:
    path = tmp_path / "lines.txt"
    path.write_text(("the cat sat on the mat, 12345 times\n" * 3 + EOT + "on the mat\n") * 4, encoding="utf-8")
    plain = train_bpe(path, 270, [EOT], trainer=trainer)
    went_on = train_bpe(path, 290, [EOT], trainer=trainer, start_from=plain, pattern="superword")
    assert train_bpe(path, 290, [EOT], trainer=trainer, superbpe=270) == went_on
    assert went_on[1][:13] == plain[1]
    assert any(b" " in token.strip() for token in went_on[0].values())  # a merge crossed a space


def test_several_sizes_come_from_one_run(tmp_path: Path) -> None:
    path = tmp_path / "lines.txt"
    path.write_text("the cat sat on the mat\nthe dog sat on the log\n" * 5, encoding="utf-8")
    both = train_bpe(path, None, [EOT], vocab_sizes=[285, 300], superbpe=270)
    for size in (285, 300):
        assert both[size] == train_bpe(path, size, [EOT], superbpe=270)


def test_from_a_base_the_first_stage_goes_on_from_it(tmp_path: Path) -> None:
    path = tmp_path / "lines.txt"
    path.write_text("the cat sat on the mat\nthe dog sat on the log\n" * 5, encoding="utf-8")
    base = train_bpe(path, 262, [EOT])
    first = train_bpe(path, 270, [EOT], start_from=base)
    expected = train_bpe(path, 290, [EOT], start_from=first, pattern="superword")
    assert train_bpe(path, 290, [EOT], start_from=base, superbpe=270) == expected


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"superbpe": 300}, "every vocab_size must be above it"),
        ({"superbpe": 0}, "positive int"),
        ({"superbpe": "270"}, "positive int"),
    ],
)
def test_bad_transitions_are_refused(tmp_path: Path, keywords: dict, message: str) -> None:
    path = tmp_path / "a.txt"
    path.write_text("the cat sat on the mat\n", encoding="utf-8")
    with pytest.raises(BPEInputError, match=message):
        train_bpe(path, 290, [EOT], **keywords)
    with pytest.raises(BPEInputError, match=message):
        train_bpe(path, None, [EOT], vocab_sizes=[290, 300], **keywords)


def test_the_command_records_both_stages_and_its_tokenizer_encodes_superwords(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "lines.txt"
    data.write_text("the cat sat on the mat, 1234567 times\n" * 20 + EOT + "on the mat\n", encoding="utf-8")
    out = tmp_path / "out"
    assert cli_main(["bpe_v1", str(out), "-v", "280,300", "--superbpe", "270", "-d", str(data), "-q"]) == 0
    summary = capsys.readouterr().out
    assert "270 tokens by gpt2, then superwords" in summary
    run = json.loads((out / "v300" / "bpe_run.json").read_text(encoding="utf-8"))
    assert run["pattern"]["name"] == "superword"
    assert run["superbpe"]["transition"] == 270
    assert run["superbpe"]["first_stage"]["tokens"] == 270
    assert run["superbpe"]["first_stage"]["pattern"]["name"] == "gpt2"
    assert train_bpe(data, 300, [EOT], superbpe=270, trainer="bpe_v1")[1] == Tokenizer.from_files(
        out / "v300" / "vocab.json", out / "v300" / "merges.txt"
    ).merges
    tokenizer = Tokenizer.from_files(out / "v300" / "vocab.json", out / "v300" / "merges.txt")
    assert tokenizer.pattern.name == "superword"
    text = "the cat sat on the mat, 1234567 times\n"
    ids = tokenizer.encode(text)
    assert tokenizer.decode(ids) == text
    assert any(" " in tokenizer.decode([token]).strip() for token in ids)  # a superword in use


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--superbpe", "300"], "every vocab_size must be above it"),
    ],
)
def test_the_command_refuses_bad_transitions_before_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    data = tmp_path / "a.txt"
    data.write_text("the cat sat on the mat\n", encoding="utf-8")
    out = tmp_path / "out"
    assert cli_main(["bpe_v2", str(out), "-v", "290", "-d", str(data), "-q", *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (out / "vocab.json").exists()


def test_count_files_cannot_train_superwords(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli_main(["bpe_v2", str(tmp_path / "out"), "--counts", str(tmp_path / "c.bin"), "--superbpe", "270"])
    assert exited.value.code == 2
    assert "--superbpe counts text" in capsys.readouterr().err


def test_documents_train_superwords_as_their_joined_file(trainer: str, tmp_path: Path) -> None:
    from cs336_basics.trainers import train_bpe_from_iterator

    documents = ["the cat sat on the mat, 12345 times\nthe end", "on the mat\nthe cat sat\n"] * 4
    path = tmp_path / "joined.txt"
    path.write_text(EOT.join(documents), encoding="utf-8")
    got = train_bpe_from_iterator(documents, 300, [EOT], trainer=trainer, superbpe=270)
    assert got == train_bpe(path, 300, [EOT], trainer=trainer, superbpe=270)
    with pytest.raises(BPEInputError, match="one-pass iterator"):
        train_bpe_from_iterator(iter(documents), 300, [EOT], trainer=trainer, superbpe=270)


def test_hf_files_goes_on_by_lines_from_its_first_stage(trainer: str, tmp_path: Path) -> None:
    # HF's train(files) from a base, as the paper's trainer does it: by lines, the base's merges that
    # occur, the vocabulary from the bytes seen; every version as the oracle.
    path = tmp_path / "lines.txt"
    path.write_text(("the cat sat on the mat, 12345 times\n" * 3 + "on the mat\n") * 4, encoding="utf-8")
    got = train_bpe(path, 80, [EOT], trainer=trainer, like="hf-files", superbpe=60)
    assert got == train_bpe(path, 80, [EOT], trainer="bpe_v1", like="hf-files", superbpe=60)
    first_vocab, first = train_bpe(path, 60, [EOT], trainer=trainer, like="hf-files")
    kept = [merge for merge in first if merge in set(got[1])]  # those that occur in the lines, in order
    assert got[1][: len(kept)] == kept and len(kept) > len(first) // 2
    assert len(got[0]) > len(first_vocab) and any(b" " in token.strip() for token in got[0].values())
    assert (b" ", b"12") in first and (b" ", b"12") not in got[1]  # numbers stand apart from the space in stage 2


def test_the_limits_on_superwords_hold_in_the_second_stage_only(trainer: str, tmp_path: Path) -> None:
    # Whitespace runs of five "words" split on spaces (" \t \t \t \t \t") are GPT-2 pre-tokens: stage 1
    # merges them whatever max_words says; stage 2's new tokens hold at most two words and no ": ".
    path = tmp_path / "limits.txt"
    path.write_text(("a: b c d e f \t \t \t \t \t\n" * 6 + "x: y z\n") * 3, encoding="utf-8")
    plain = train_bpe(path, 280, [EOT], trainer=trainer)
    vocab, merges = train_bpe(path, 300, [EOT], trainer=trainer, superbpe=280, max_words=2, no_colon_space=True)
    assert merges[: len(plain[1])] == plain[1]
    new = [left + right for left, right in merges[len(plain[1]) :]]
    assert new and all(len([word for word in token.split(b" ") if word]) <= 2 for token in new)
    assert not any(b": " in token for token in new)
    assert any(len([word for word in token.split(b" ") if word]) > 2 for token in plain[0].values())
