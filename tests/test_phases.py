"""The phase contract (cs336_basics/phases.py): every version takes the same checked options,
reports its progress through the driver's callable, and draws nothing itself."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from cs336_basics import BPEInputError, train
from cs336_basics.phases import CountParallelism, MergeRules
from cs336_basics.rules.merge_limits import MergeLimits
from cs336_basics.trainers import REGISTRY, load_trainer

TEXT = "low lower lowest<|endoftext|> newer wider new\n" * 40


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"num_threads": 2}, TypeError),  # not an option of any version: refused by all alike
        ({"chunk_bytes": 100}, TypeError),
        ({"num_workers": 0}, ValueError),
        ({"num_workers": 1.5}, TypeError),
        ({"num_chunks": 0}, BPEInputError),
        ({"num_chunks": True}, BPEInputError),
    ],
)
def test_every_version_checks_options_the_same_way(trainer: str, corpus: Path, options: dict, error: type) -> None:
    with pytest.raises(error):
        train(corpus, 300, ["<|endoftext|>"], trainer=trainer, **options)


def test_phases_report_their_work(trainer: str, corpus: Path) -> None:
    version = load_trainer(trainer)
    counted: list[int] = []
    options = CountParallelism(num_workers=1)
    word_counts = version.pretokenize_and_count(corpus, ["<|endoftext|>"], options, counted.append)
    assert sum(counted) == corpus.stat().st_size
    merged: list[int] = []
    merges = version.merge(word_counts, 15, merged.append)
    assert len(merges) == 15 and sum(merged) == 15


def test_every_merge_takes_the_rules_as_one_value(trainer: str) -> None:
    version = load_trainer(trainer)
    parameters = inspect.signature(version.merge).parameters
    assert "rules" in parameters
    assert not {"tie_break", "start_from", "min_frequency", "max_token_length"} & set(parameters)
    words = {b"abcd": 3, b"abc": 2, b"dd": 2}
    rules = MergeRules("smallest-id", MergeLimits(min_frequency=2, max_token_length=4), [(b"a", b"b")])
    assert version.merge(dict(words), 10, rules=rules) == load_trainer("bpe_v1").merge(words, 10, rules=rules)
    with pytest.raises(TypeError, match="MergeRules"):
        version.merge(dict(words), 1, rules="smallest-id")


def test_the_result_counts_the_distinct_words(trainer: str, corpus: Path) -> None:
    # Read before the merge phase, which may free the counts (bpe_v7 frees its own once loaded).
    oracle = load_trainer("bpe_v1").pretokenize_and_count(corpus, ["<|endoftext|>"])
    assert train(corpus, 300, ["<|endoftext|>"], trainer=trainer).num_words == len(oracle) > 0


def test_progress_bars_belong_to_the_driver(trainer: str, corpus: Path, capsys: pytest.CaptureFixture) -> None:
    quiet = train(corpus, 300, ["<|endoftext|>"], trainer=trainer)
    assert capsys.readouterr().err == ""
    shown = train(corpus, 300, ["<|endoftext|>"], trainer=trainer, progress=True)
    bars = capsys.readouterr().err
    assert "pre-tokenize" in bars and "merges" in bars
    assert shown.merges == quiet.merges


def test_only_the_progress_module_draws_bars() -> None:
    # Versions, counting, the cluster path and the commands report through `report(n)`;
    # progress.py alone turns that into a bar.
    package = Path(__file__).resolve().parent.parent / "cs336_basics"
    assert sorted(REGISTRY) == [f"bpe_v{n}" for n in range(1, 8)]
    drawing = sorted(path.name for path in package.rglob("*.py") if "tqdm" in path.read_text(encoding="utf-8"))
    assert drawing == ["progress.py"]
