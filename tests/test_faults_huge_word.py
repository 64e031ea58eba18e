"""One huge pre-token (a run of one letter, a blob with no space in it): exact in every version, in
memory linear and small in its length, and found in a compressed stream as fast as in a file.

Before: the merge loop reserved a listing per symbol of the word at every merge (8 bytes a symbol),
its token table was a string copied at each doubling, its merges held every token's bytes again, and
the vocabulary a copy of each; a 16 MB run of `a` peaked at 417 MB, 64 MB at 1.6 GB."""

from __future__ import annotations

import gzip
import random
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cs336_basics import count_words, train_bpe, trainer_status
from cs336_basics.rules.contract import ENDOFTEXT
from cs336_basics.rules.splitting import whitespace_cuts
from cs336_basics.rules.vocab_layout import assemble_vocab
from tests.support import REPO_ROOT


def long_words_corpus(path: Path) -> Path:
    """Words longer than the merge loop's listing reserve (65,536 symbols) beside ordinary ones."""
    rng = random.Random(7)
    blob = "".join(rng.choice("abcdefgh") for _ in range(70_000))
    ordinary = " ".join(rng.choice(["the", "cat", "sat", "on", "a", "mat", "aaa", "abab"]) for _ in range(3_000))
    documents = ["a" * 70_001, "ab" * 36_000, blob, ordinary, "a" * 1_000 + " " + "a" * 999]
    path.write_text(ENDOFTEXT.join(documents), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def long_words(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, tuple]:
    """The corpus and the oracle's merges on it, trained once for every version."""
    corpus = long_words_corpus(tmp_path_factory.mktemp("long_words") / "long.txt")
    return corpus, train_bpe(corpus, 330, [ENDOFTEXT], trainer="bpe_v1")


def test_long_words_give_the_oracles_merges(trainer: str, long_words: tuple[Path, tuple]) -> None:
    corpus, expected = long_words
    assert train_bpe(corpus, 330, [ENDOFTEXT], trainer=trainer) == expected


def test_a_compressed_long_word_counts_as_the_file_does(tmp_path: Path) -> None:
    text = ("a" * 3_000_000 + " end " + "b" * 2_000_000).encode()
    plain = tmp_path / "run.txt"
    plain.write_bytes(text)
    packed = tmp_path / "run.txt.gz"
    packed.write_bytes(gzip.compress(text, 1))
    assert count_words(packed, [ENDOFTEXT]) == count_words(plain, [ENDOFTEXT])


# A child that trains on a run of `a` under an address-space limit and prints its merges' shape.
_LIMITED_CHILD = textwrap.dedent(
    """
    import resource, sys
    sys.path.insert(0, sys.argv[1])
    from cs336_basics import train_bpe
    limit = int(sys.argv[4]) << 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    vocab, merges = train_bpe(sys.argv[2], 300, ["<|endoftext|>"], trainer=sys.argv[3], num_workers=1)
    print(len(merges), max(map(len, vocab.values())))
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS is enforced as the test needs on Linux")
@pytest.mark.parametrize("version", ["bpe_v6", "bpe_v7"])
def test_a_16_mb_word_trains_in_a_few_bytes_per_byte(version: str, tmp_path: Path) -> None:
    status = trainer_status()[version]
    if not status.available:
        pytest.skip(status.reason)
    run = tmp_path / "run.txt"
    run.write_bytes(b"a" * (16 << 20))
    # The vocabulary itself is 7 bytes per byte of the run (its tokens double up to the run's
    # length); 320 MB of address space held it with room to spare, and was 170 MB short before.
    result = subprocess.run(
        [sys.executable, "-c", _LIMITED_CHILD, str(REPO_ROOT), str(run), version, "320"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    num_merges, longest = map(int, result.stdout.split())
    assert longest == 16 << 20  # the whole run is one token in the end
    assert num_merges == 24  # tokens of 2, 4, ... 2**24 bytes: then the run is one token


def test_the_vocabulary_holds_each_long_token_once() -> None:
    long = b"x" * (1 << 17)
    merges = [(b"x", b"x")]
    token = b"xx"
    while len(token) < len(long):
        merges.append((token, token))
        token = token + token
    merges.append((token, b"y"))
    vocab = assemble_vocab([], merges)
    assert list(vocab.values())[256:] == [left + right for left, right in merges]
    # Each long token that a later merge names is the object that merge holds, not a copy of it.
    parts = {id(part) for pair in merges for part in pair}
    named = {part for pair in merges for part in pair if len(part) >= 1 << 16}
    long_named = [token for token in vocab.values() if token in named]
    assert len(long_named) == len(named) and all(id(token) in parts for token in long_named)


_REFERENCE_CUT = re.compile(rb"[0-9A-Za-z](?=[ \n])")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=60).map(lambda data: bytes(b"ab1 \n.\t\xc3"[byte % 8] for byte in data)),
       st.integers(0, 64), st.integers(0, 64))  # fmt: skip
def test_whitespace_cuts_are_the_reference_patterns_matches(data: bytes, start: int, end: int) -> None:
    expected = [match.end() for match in _REFERENCE_CUT.finditer(data, max(start - 1, 0), end)]
    assert list(whitespace_cuts(data, start, end)) == expected
    assert list(whitespace_cuts(data, start, end, backward=True)) == expected[::-1]


def test_a_runs_output_of_tokens_past_the_file_limit_loads_and_is_noted_before_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The 64 MB run of one letter, scaled down: the limit a tokenizer file may hold is lowered to
    64 KiB, and a run of 64 KB of `a` writes files past it, which must load all the same."""
    import cs336_basics.outputs.serialization as serialization
    from cs336_basics import BPEInputError, Tokenizer
    from cs336_basics.commands.cli import main as cli_main

    monkeypatch.setattr(serialization, "MAX_TOKENIZER_FILE_BYTES", 64 << 10)
    run = tmp_path / "run.txt"
    run.write_bytes(b"a" * (64 << 10))
    out = tmp_path / "out"
    assert cli_main(["bpe_v2", str(out), "-d", str(run), "-q", "-v", "300", "--special"]) == 0
    err = capsys.readouterr().err
    assert "note: the vocabulary's tokens total 0.1 MB, the longest 0.1 MB" in err
    assert "one over 0.0625 MiB loads only beside the bpe_run.json" in err
    assert (out / "vocab.json").stat().st_size > 64 << 10
    from_text = Tokenizer.from_files(out / "vocab.json", out / "merges.txt")
    from_pickles = Tokenizer.from_files(out / "vocab.pkl", out / "merges.pkl")
    assert from_text.vocab == from_pickles.vocab and from_text.merges == from_pickles.merges
    assert max(map(len, from_text.vocab.values())) == 64 << 10
    # Without the bpe_run.json that records it, a file past the limit is still some other file.
    (out / "bpe_run.json").unlink()
    with pytest.raises(BPEInputError, match="larger than a tokenizer file may be"):
        Tokenizer.from_files(out / "vocab.json", out / "merges.txt")
