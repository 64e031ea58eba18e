"""Several vocabularies from one run: BPE's merges to a smaller size are the first merges of a run to a
larger one, so one run to the largest size gives every size's tokenizer, each identical to a
separate run of that size (API `vocab_sizes=`, CLI `-v 8000,16000,32000`)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from cs336_basics import train_bpe, train_bpe_from_counts, trainer_status
from cs336_basics.commands.cli import main as train_main
from cs336_basics.commands.demo import write_demo_corpus
from cs336_basics.ingest.counting import count_words
from cs336_basics.outputs.serialization import OutputDirectory
from cs336_basics.trainers import TrainerStatus

SPECIALS = ["<|endoftext|>"]
SIZES = [270, 300, 420]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_corpus(tmp_path_factory.mktemp("sizes") / "demo.txt", size_bytes=60_000)


def test_each_size_equals_its_own_run(trainer: str, corpus: Path) -> None:
    tokenizers = train_bpe(corpus, None, SPECIALS, trainer=trainer, vocab_sizes=[420, 270, 300, 300])
    assert sorted(tokenizers) == SIZES
    for size in SIZES:
        assert tokenizers[size] == train_bpe(corpus, size, SPECIALS, trainer="bpe_v1")


def test_from_counts_too(corpus: Path) -> None:
    counts = count_words([corpus], SPECIALS)
    tokenizers = train_bpe_from_counts(counts, 420, vocab_sizes=[270])
    assert tokenizers == {size: train_bpe(corpus, size, SPECIALS, trainer="bpe_v1") for size in (270, 420)}


def test_a_size_past_where_the_run_stopped_stops_there_too(tmp_path: Path) -> None:
    tiny = tmp_path / "tiny.txt"
    tiny.write_text("ab ab abc", encoding="utf-8")
    tokenizers = train_bpe(tiny, None, SPECIALS, vocab_sizes=[259, 400])
    assert tokenizers[400] == train_bpe(tiny, 400, SPECIALS, trainer="bpe_v1")
    assert len(tokenizers[400][1]) < 400 - 257 and len(tokenizers[259][1]) == 2


def test_bad_sizes_are_refused(corpus: Path) -> None:
    with pytest.raises(ValueError, match="too small"):
        train_bpe(corpus, None, SPECIALS, vocab_sizes=[100, 300])
    with pytest.raises(ValueError, match="vocab_sizes"):
        train_bpe(corpus, None, SPECIALS, vocab_sizes=[])


def test_cli_writes_one_complete_set_per_size(corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "out"
    assert train_main(["auto", str(out), "-d", str(corpus), "-v", "420,270,300", "-q", "--export", "hf"]) == 0
    assert sorted(path.name for path in out.iterdir()) == [f"v{size}" for size in SIZES]
    for size in SIZES:
        single = tmp_path / f"single{size}"
        assert train_main(["bpe_v1", str(single), "-d", str(corpus), "-v", str(size), "-q", "--export", "hf"]) == 0
        for name in ["vocab.json", "merges.txt", "tokenizer.json"]:
            assert (out / f"v{size}" / name).read_bytes() == (single / name).read_bytes(), (size, name)
        for name in ["vocab.pkl", "merges.pkl"]:  # equal objects; pickle's sharing of them may differ
            assert pickle.loads((out / f"v{size}" / name).read_bytes()) == pickle.loads((single / name).read_bytes())
    assert "(270 tokens)" in capsys.readouterr().out


def test_cli_refuses_sizes_that_are_not_numbers(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exited:
        train_main(["auto", str(tmp_path / "out"), "--demo", "-v", "300,lots"])
    assert exited.value.code == 2 and "comma-separated sizes" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_failed_run_into_a_new_directory_leaves_no_empty_directory(tmp_path: Path) -> None:
    broken = tmp_path / "broken.txt"
    broken.write_bytes(b"valid text \xff not UTF-8")
    out = tmp_path / "new" / "deeper"
    assert train_main(["auto", str(out), "-d", str(broken), "-v", "300,400", "-q"]) == 2
    assert not (tmp_path / "new").exists()


def test_an_interrupted_output_directory_is_removed_only_when_it_made_it_and_it_is_empty(tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt), OutputDirectory(tmp_path / "a" / "b"):
        raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []
    existing = tmp_path / "kept"
    existing.mkdir()
    with pytest.raises(KeyboardInterrupt), OutputDirectory(existing):
        raise KeyboardInterrupt
    assert existing.is_dir()


def test_trainer_status_says_available_in_words() -> None:
    status = trainer_status()
    assert status["bpe_v1"] == TrainerStatus(True) and status["bpe_v1"].available
    assert str(status["bpe_v1"]) == "available"
    for entry in status.values():
        assert bool(entry) == entry.available and (entry.available == (entry.reason == ""))
