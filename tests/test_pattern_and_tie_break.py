"""The pattern, the tie-break and the presets through every path: every version equals the oracle
bpe_v1 for every pattern and rule; presets set what they should; count files, bpe_run.json and the
commands carry them; contradictions and bad regexes are refused in one line."""

from __future__ import annotations

import gzip
import hashlib
import json
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cs336_basics import BPEInputError, train_bpe, train_bpe_from_counts, trainer_status
from cs336_basics.commands.cli import main as cli_main
from cs336_basics.commands.count_cli import main as count_main
from cs336_basics.ingest.counting import count_words, count_words_from_iterator
from cs336_basics.ingest.word_counts import WordCounts
from cs336_basics.outputs.serialization import run_pattern
from cs336_basics.phases import CountParallelism
from cs336_basics.rules.pattern import NAMED_PATTERNS, Pattern, installed_unicode, resolve_pattern
from cs336_basics.rules.presets import resolve_rules
from cs336_basics.rules.splitting import count_words_in_text
from cs336_basics.rules.tie_break import TIE_BREAKS
from cs336_basics.rules.vocab_layout import assemble_vocab
from cs336_basics.trainers import load_trainer, train, train_bpe_from_iterator
from tests.test_equivalence import FRAGMENTS, SPECIAL_TOKEN_SETS

SPECIALS = ["<|endoftext|>"]
CUSTOM = r"\S+|\s+"
PATTERNS = ["gpt2", "cl100k", "o200k", CUSTOM]
# A regex whose matches run across whitespace: only special tokens may cut its text.
LINES = r"[^\n]*\n|[^\n]+"
# Upper case, digit runs, contractions in capitals and slashes reach the alternatives GPT-2 lacks.
MORE_FRAGMENTS = ["A", "AB", "Ab", "aB", "DON'T", "We'RE", "1234", "12345", "/", "\r", "!\n", "x\u0303", "ǅ"]
V7 = trainer_status()["bpe_v7"]


@st.composite
def corpora(draw: st.DrawFn) -> tuple[str, list[str], int]:
    special_tokens = draw(st.sampled_from(SPECIAL_TOKEN_SETS))
    pieces = draw(st.lists(st.sampled_from(FRAGMENTS + MORE_FRAGMENTS + special_tokens), min_size=1, max_size=60))
    text = "".join(pieces) or "a"
    extra_merges = draw(st.integers(min_value=0, max_value=40))
    return text, special_tokens, 256 + len(special_tokens) + extra_merges


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pattern_and_tie_break")


def write_corpus(directory: Path, text: str) -> Path:
    """One file per distinct text (hypothesis reruns a body many times; tmp_path is per test)."""
    data = text.encode("utf-8")
    path = directory / f"{hashlib.sha1(data).hexdigest()}.txt"
    if not path.exists():
        path.write_bytes(data)
    return path


@lru_cache(maxsize=512)
def oracle(directory: Path, text: str, specials: tuple[str, ...], vocab_size: int, pattern: str, rule: str):
    path = write_corpus(directory, text)
    return train_bpe(path, vocab_size, list(specials), trainer="bpe_v1", pattern=pattern, tie_break=rule)


@pytest.mark.parametrize("rule", TIE_BREAKS)
@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=corpora(), num_chunks=st.integers(min_value=1, max_value=7))
def test_every_version_matches_the_oracle_for_every_pattern_and_rule(
    trainer: str, corpus_dir: Path, pattern: str, rule: str, case: tuple[str, list[str], int], num_chunks: int
) -> None:
    text, specials, vocab_size = case
    expected = oracle(corpus_dir, text, tuple(specials), vocab_size, pattern, rule)
    path = write_corpus(corpus_dir, text)
    options = {"num_workers": 1, "num_chunks": num_chunks}
    got = train_bpe(path, vocab_size, specials, trainer=trainer, pattern=pattern, tie_break=rule, **options)
    assert got == expected


@pytest.mark.skipif(not V7.available, reason=V7.reason)
@pytest.mark.parametrize("workers", [1, 2, 3, 7])
@pytest.mark.parametrize("rule", TIE_BREAKS)
@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=corpora())
def test_bpe_v7_on_any_number_of_workers(
    corpus_dir: Path, pattern: str, rule: str, workers: int, case: tuple[str, list[str], int]
) -> None:
    text, specials, vocab_size = case
    expected = oracle(corpus_dir, text, tuple(specials), vocab_size, pattern, rule)
    path = write_corpus(corpus_dir, text)
    # Chunks for every worker: another pattern than GPT-2's is counted on that many processes.
    options = {"num_workers": workers, "num_chunks": 2 * workers}
    got = train_bpe(path, vocab_size, specials, trainer="bpe_v7", pattern=pattern, tie_break=rule, **options)
    assert got == expected


def test_bpe_v7_says_once_that_another_pattern_runs_through_regex(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if not V7.available:
        pytest.skip(V7.reason)
    path = tmp_path / "corpus.txt"
    path.write_text("Hello world, it's 12345 o'clock\n" * 20, encoding="utf-8")
    for native_pattern in ("gpt2", "cl100k", "rustbpe", "o200k"):
        train_bpe(path, 300, [], trainer="bpe_v7", pattern=native_pattern)
        assert capsys.readouterr().err == ""
    train_bpe(path, 300, [], trainer="bpe_v7", pattern=r" ?\w+| ?[^\w\s]+|\s+")
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "regex module" in lines[0] and "slower" in lines[0]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lines=st.lists(st.sampled_from(["a b", "ab  c", "x\n", "\n", " ", "é z", "<|endoftext|>", "q"]), max_size=40),
    num_chunks=st.integers(min_value=2, max_value=9),
    task_bytes=st.integers(min_value=1, max_value=40),
)
def test_a_regex_across_whitespace_is_cut_at_special_tokens_only(
    corpus_dir: Path, lines: list[str], num_chunks: int, task_bytes: int
) -> None:
    text = "".join(lines) or "a b"
    path = write_corpus(corpus_dir, text)
    expected = dict(count_words_in_text(text, SPECIALS, LINES))
    options = CountParallelism(num_workers=1, num_chunks=num_chunks)
    v3 = load_trainer("bpe_v3").pretokenize_and_count(path, SPECIALS, options, pattern=resolve_pattern(LINES))
    assert v3 == expected
    assert count_words([path], SPECIALS, num_workers=1, task_bytes=task_bytes, pattern=LINES).counts == expected
    streamed = count_words_from_iterator([text], SPECIALS, batch_bytes=task_bytes, pattern=LINES)
    assert streamed.counts == expected


@pytest.mark.parametrize("pattern", ["cl100k", LINES])
def test_count_words_counts_another_pattern_on_worker_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pattern: str
) -> None:
    import cs336_basics.ingest.counting as counting

    monkeypatch.setattr(counting, "_PARALLEL_MIN_BYTES", 1)  # processes even for a small file
    text = "<|endoftext|>".join(f"Doc {index}: It's 2024, we'RE here/there.\n  ok" for index in range(300))
    path = tmp_path / "corpus.txt"
    path.write_text(text, encoding="utf-8")
    counts = count_words([path], SPECIALS, num_workers=2, pattern=pattern)
    assert counts.counts == dict(count_words_in_text(text, SPECIALS, pattern))
    assert counts.pattern == resolve_pattern(pattern).regex
    assert counts.source_bytes == len(text.encode("utf-8"))


@pytest.mark.parametrize("pattern", ["o200k", CUSTOM])
def test_streamed_inputs_and_documents_count_with_the_pattern(tmp_path: Path, trainer: str, pattern: str) -> None:
    documents = [f"Hello World {index}, DON'T stop/go 1234567\n\n" * (index % 4 + 1) for index in range(60)]
    text = SPECIALS[0].join(documents)
    plain = tmp_path / "corpus.txt"
    plain.write_text(text, encoding="utf-8")
    compressed = tmp_path / "corpus.txt.gz"
    compressed.write_bytes(gzip.compress(text.encode("utf-8")))
    lines = tmp_path / "corpus.jsonl"
    lines.write_text("".join(json.dumps({"text": document}) + "\n" for document in documents), encoding="utf-8")
    expected = train_bpe(plain, 400, SPECIALS, trainer=trainer, pattern=pattern)
    for source in (compressed, lines):
        assert train_bpe(source, 400, SPECIALS, trainer=trainer, pattern=pattern) == expected
    assert train_bpe_from_iterator(documents, 400, SPECIALS, trainer=trainer, pattern=pattern) == expected
    assert count_words([lines], SPECIALS, pattern=pattern).pattern == resolve_pattern(pattern).regex


def test_presets_set_the_pattern_the_rule_and_the_layout() -> None:
    assert resolve_rules() == resolve_rules(like="cs336")
    rules = resolve_rules()
    assert (rules.pattern.name, rules.tie_break, rules.layout) == ("gpt2", "cs336", "cs336")
    rules = resolve_rules(like="rustbpe")
    assert (rules.pattern.name, rules.tie_break, rules.layout) == ("rustbpe", "smallest-id", "rustbpe")
    rules = resolve_rules(like="hf")
    assert (rules.pattern.name, rules.tie_break, rules.layout) == ("gpt2", "hf", "hf")
    rules = resolve_rules(like="nanochat")
    assert (rules.pattern.name, rules.tie_break, rules.layout) == ("nanochat", "smallest-id", "rustbpe")
    # rustbpe takes a pattern, as its train_from_iterator(pattern=...) does: nanochat's is one.
    rules, nanochat = resolve_rules("nanochat", like="rustbpe"), resolve_rules(like="nanochat")
    assert (rules.pattern, rules.tie_break, rules.layout) == (nanochat.pattern, nanochat.tie_break, nanochat.layout)
    assert resolve_rules(CUSTOM, like="rustbpe").pattern.regex == CUSTOM
    # Saying again what the preset says is no contradiction; a regex equal to a named one is that one.
    assert resolve_rules(NAMED_PATTERNS["rustbpe"], "smallest-id", "rustbpe") == resolve_rules(like="rustbpe")
    # Without a preset the layout stays CS336's, whatever the rule.
    assert resolve_rules("o200k", "hf").layout == "cs336"


@pytest.mark.parametrize("like", ["cs336", "rustbpe", "hf"])
def test_a_preset_trains_by_its_rules_into_its_layout(tmp_path: Path, like: str) -> None:
    path = tmp_path / "corpus.txt"
    path.write_text("The cat's hat, THE CAT'S HATS 1234! " * 40 + "<|endoftext|>" + "a b c\n" * 30, encoding="utf-8")
    rules = resolve_rules(like=like)
    result = train(path, 330, SPECIALS, trainer="bpe_v1", like=like)
    assert (result.pattern, result.tie_break, result.layout) == (rules.pattern, rules.tie_break, rules.layout)
    alone = train(path, 330, SPECIALS, trainer="bpe_v1", pattern=rules.pattern, tie_break=rules.tie_break)
    assert result.merges == alone.merges
    assert result.vocab == assemble_vocab(SPECIALS, result.merges, rules.layout)
    # Every size of one run (-v a,b,c) numbers its tokens in the preset's layout, as its own run would.
    sizes = train_bpe(path, None, SPECIALS, trainer="bpe_v1", like=like, vocab_sizes=[290, 310])
    for size, (vocab, merges) in sizes.items():
        assert (vocab, merges) == train_bpe(path, size, SPECIALS, trainer="bpe_v1", like=like)
        assert vocab == assemble_vocab(SPECIALS, merges, rules.layout)


@pytest.mark.parametrize(
    ("keywords", "named"),
    [
        ({"like": "nanochat", "pattern": "rustbpe"}, ["rustbpe", "nanochat"]),
        ({"like": "hf", "pattern": CUSTOM}, [CUSTOM, "hf", "gpt2"]),
        ({"like": "hf", "tie_break": "cs336"}, ["cs336", "hf"]),
        ({"like": "rustbpe", "tie_break": "hf"}, ["hf", "rustbpe", "smallest-id"]),
    ],
)
def test_a_rule_that_contradicts_the_preset_is_refused_in_one_line(
    tmp_path: Path, keywords: dict[str, str], named: list[str]
) -> None:
    path = tmp_path / "corpus.txt"
    path.write_text("some text to train on\n", encoding="utf-8")
    specials = None if keywords.get("like") == "nanochat" else SPECIALS  # nanochat's own nine
    with pytest.raises(BPEInputError, match="contradicts") as refused:
        train_bpe(path, 300, specials, trainer="bpe_v1", **keywords)
    message = str(refused.value)
    assert "\n" not in message and all(name in message for name in named)


@pytest.mark.parametrize(
    ("keywords", "named"),
    [({"pattern": "(?<"}, "(?<"), ({"tie_break": "largest"}, "tie_break"), ({"like": "gpt4"}, "like")],
)
def test_bad_rules_are_refused_naming_them(tmp_path: Path, keywords: dict[str, str], named: str) -> None:
    path = tmp_path / "corpus.txt"
    path.write_text("some text to train on\n", encoding="utf-8")
    for call in (
        lambda: train_bpe(path, 300, SPECIALS, trainer="bpe_v1", **keywords),
        lambda: train_bpe_from_iterator(["some text"], 300, SPECIALS, trainer="bpe_v1", **keywords),
        lambda: train_bpe_from_counts({b"ab": 2}, 300, SPECIALS, trainer="bpe_v1", **keywords),
    ):
        with pytest.raises(BPEInputError) as refused:
            call()
        assert named in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize(
    ("given", "name"),
    [("GPT2", "gpt2"), ("Cl100K", "cl100k"), ("cl100k_base", "cl100k"), ("O200K_BASE", "o200k"),
     ("o200k_base", "o200k"), ("r50k_base", "gpt2"), ("gpt2", "gpt2"), ("NanoChat", "nanochat")],
)
def test_pattern_names_take_any_case_and_tiktoken_aliases(given: str, name: str) -> None:
    assert resolve_pattern(given) == resolve_pattern(name) == Pattern(NAMED_PATTERNS[name], name)


@pytest.mark.parametrize("given", ["gpt4", "GPT-4", "cl100", "p50k_base", "words"])
def test_a_name_like_pattern_that_is_no_name_is_refused_listing_the_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], given: str
) -> None:
    with pytest.raises(BPEInputError) as refused:
        resolve_pattern(given)
    message = str(refused.value)
    assert "\n" not in message and given in message
    assert all(name in message for name in [*NAMED_PATTERNS, "cl100k_base", "o200k_base", "r50k_base"])
    # The command refuses it before training, where it once trained on the word's matches alone.
    path = tmp_path / "corpus.txt"
    path.write_text(f"{given} and {given} again, words and gpt4\n" * 20, encoding="utf-8")
    assert cli_main(["bpe_v1", str(tmp_path / "out"), "-d", str(path), "-v", "300", "-q", "--pattern", given]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "cl100k_base" in err
    assert not (tmp_path / "out" / "bpe_run.json").exists()
    # A regex with a metacharacter is a regex; a recorded one (a run's, a count file's) is read as written.
    assert resolve_pattern(rf"{given}|\s+").name is None
    assert run_pattern({"pattern": {"name": None, "regex": given}}) == Pattern(given)


def test_count_files_record_their_pattern_and_refuse_another(tmp_path: Path, trainer: str) -> None:
    path = tmp_path / "corpus.txt"
    path.write_text("It's GPT-4's 12345 words\n" * 30 + "<|endoftext|>We'RE DONE\n", encoding="utf-8")
    cl100k = count_words([path], SPECIALS, pattern="cl100k")
    cl100k.save(tmp_path / "cl100k.bin")
    loaded = WordCounts.load(tmp_path / "cl100k.bin")
    assert loaded.pattern == NAMED_PATTERNS["cl100k"] and loaded == cl100k
    with pytest.raises(BPEInputError, match="cl100k.*gpt2") as refused:
        train_bpe_from_counts(tmp_path / "cl100k.bin", 300, trainer=trainer, pattern="gpt2")
    assert "\n" not in str(refused.value)
    with pytest.raises(BPEInputError, match="cl100k.*gpt2"):
        train_bpe_from_counts(loaded, 300, trainer=trainer, like="hf")
    with pytest.raises(BPEInputError, match="gpt2.*cl100k"):
        count_words([path], SPECIALS) + loaded  # tables of two patterns never add up
    # Without a pattern, training takes the counts' own, and equals training on the text with it.
    expected = train_bpe(path, 300, SPECIALS, trainer="bpe_v1", pattern="cl100k")
    assert train_bpe_from_counts(tmp_path / "cl100k.bin", 300, trainer=trainer) == expected
    assert train_bpe_from_counts(loaded, 300, trainer=trainer, pattern="cl100k") == expected


def read_run(directory: Path) -> dict:
    return json.loads((directory / "bpe_run.json").read_text(encoding="utf-8"))


def test_the_commands_take_the_rules_and_bpe_run_json_records_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "corpus.txt"
    path.write_text("The CAT's hat 2024/25, they'RE here\n" * 40 + "<|endoftext|>" + "x y\n" * 10, encoding="utf-8")

    assert cli_main(["bpe_v1", str(tmp_path / "plain"), "-d", str(path), "-v", "300", "-q"]) == 0
    out = capsys.readouterr().out
    assert "pattern" not in out and "tie-break" not in out  # the defaults go unsaid
    run = read_run(tmp_path / "plain")
    assert run["pattern"] == {"name": "gpt2", "regex": NAMED_PATTERNS["gpt2"], "unicode": installed_unicode()}
    assert (run["tie_break"], run["layout"]) == ("cs336", "cs336")

    assert cli_main(["bpe_v1", str(tmp_path / "hf"), "-d", str(path), "-v", "290,300", "--like", "hf", "-q"]) == 0
    out = capsys.readouterr().out
    assert "tie-break     hf" in out and "pattern" not in out
    for size in (290, 300):
        directory = tmp_path / "hf" / f"v{size}"
        run = read_run(directory)
        assert (run["pattern"]["name"], run["tie_break"], run["layout"]) == ("gpt2", "hf", "hf")
        vocab, merges = train_bpe(path, size, SPECIALS, trainer="bpe_v1", like="hf")
        assert json.loads((directory / "vocab.json").read_text(encoding="utf-8"))["Ġ"] == next(
            token_id for token_id, token in vocab.items() if token == b" "
        )

    assert cli_main(["bpe_v1", str(tmp_path / "re"), "-d", str(path), "-v", "300", "--pattern", CUSTOM, "-q"]) == 0
    assert f"pattern       '{CUSTOM}'" in capsys.readouterr().out
    assert read_run(tmp_path / "re")["pattern"] == {"name": None, "regex": CUSTOM, "unicode": installed_unicode()}

    # A count file made with cl100k trains with cl100k, and is refused for gpt2, naming both.
    assert count_main([str(path), "-o", str(tmp_path / "c.bin"), "--pattern", "cl100k", "-q"]) == 0
    assert "pattern  cl100k" in capsys.readouterr().out
    from_counts = ["bpe_v1", str(tmp_path / "from_counts"), "--counts", str(tmp_path / "c.bin"), "-v", "300", "-q"]
    assert cli_main([*from_counts, "--pattern", "gpt2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cl100k" in err and "gpt2" in err
    assert cli_main([*from_counts, "--tie-break", "smallest-id"]) == 0
    run = read_run(tmp_path / "from_counts")
    assert (run["pattern"]["name"], run["tie_break"], run["layout"]) == ("cl100k", "smallest-id", "cs336")


@pytest.mark.parametrize(
    "arguments",
    [
        ["--like", "nanochat", "--pattern", "gpt2"],
        ["--like", "nanochat", "--special", "<|endoftext|>"],
        ["--pattern", "[a-"],
        ["--like", "hf", "--tie-break", "smallest-id"],
    ],
)
def test_the_command_refuses_bad_rules_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], arguments: list[str]
) -> None:
    path = tmp_path / "corpus.txt"
    path.write_text("some text\n", encoding="utf-8")
    assert cli_main(["bpe_v1", str(tmp_path / "out"), "-d", str(path), "-v", "300", "-q", *arguments]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert not (tmp_path / "out" / "bpe_run.json").exists()


@pytest.mark.parametrize("arguments", [["--tie-break", "largest"], ["--like", "gpt4"]])
def test_unknown_choices_exit_2(tmp_path: Path, arguments: list[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        cli_main(["bpe_v1", str(tmp_path / "out"), "--demo", *arguments])
    assert stopped.value.code == 2


def test_the_report_shows_the_rules_of_the_run(tmp_path: Path) -> None:
    from cs336_basics.commands.report import REPORT_FILE
    from cs336_basics.commands.report import main as report_main

    path = tmp_path / "corpus.txt"
    path.write_text("Hello World, it's 2024\n" * 30, encoding="utf-8")
    assert cli_main(["bpe_v1", str(tmp_path / "tok"), "-d", str(path), "-v", "280", "--like", "hf", "-q"]) == 0
    assert report_main([str(tmp_path / "tok"), "--text", str(path), "-q"]) == 0
    (entry,) = json.loads((tmp_path / "tok" / REPORT_FILE).read_text(encoding="utf-8"))["tokenizers"]
    assert (entry["pattern"]["name"], entry["tie_break"], entry["layout"]) == ("gpt2", "hf", "hf")


def test_dask_counts_with_the_pattern(tmp_path: Path) -> None:
    pytest.importorskip("distributed", reason="Dask is an optional extra: pip install -e '.[cluster]'")
    from distributed import Client, LocalCluster

    from cs336_basics.ingest.cluster import count_words_on_cluster

    text = "<|endoftext|>".join(f"Doc {index}: It's 2024, we'RE here.\n" * 5 for index in range(200))
    data = text.encode("utf-8")
    parts = []
    for index, (start, end) in enumerate([(0, 3001), (3001, 3005), (3005, len(data))]):
        parts.append(tmp_path / f"part{index}.txt")
        parts[-1].write_bytes(data[start:end])
    lines = tmp_path / "docs.jsonl"
    lines.write_text("".join(json.dumps({"text": doc}) + "\n" for doc in text.split("<|endoftext|>")), encoding="utf-8")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster:
        with Client(cluster) as client:
            for pattern in ("cl100k", LINES):
                expected = dict(count_words_in_text(text, SPECIALS, pattern))
                for inputs in (parts, [lines]):
                    counts = count_words_on_cluster(client, inputs, SPECIALS, task_bytes=2_000, pattern=pattern)
                    assert counts.counts == expected and counts.pattern == resolve_pattern(pattern).regex
