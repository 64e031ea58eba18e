"""Custom patterns end to end: text a pattern does not match is encoded (each stretch a pre-token of its
own, as the exported tokenizer.json's Split does in HF) and noted at training, never lost; a pattern an
export cannot carry is translated (named groups, inline flags) or refused before training, naming what;
a runaway regex stops with an error naming it, and Ctrl-C still interrupts it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy
import pytest

from cs336_basics import BPEInputError, Tokenizer
from cs336_basics.commands.cli import main as cli_main
from cs336_basics.commands.encode_cli import main as encode_main
from cs336_basics.outputs.export import check_exportable, hf_split_regex, tiktoken_encoding
from cs336_basics.outputs.serialization import RUN_FILE
from cs336_basics.rules.contract import ENDOFTEXT
from cs336_basics.rules.pattern import Pattern, resolve_pattern
from cs336_basics.rules.splitting import count_words_in_text
from tests.support import REPO_ROOT

# Patterns that leave text unmatched: letters only; letters or nothing (empty matches between the
# rest); a lookbehind, so that what a gap holds depends on the text before it.
UNCOVERING = [r"[a-z]+", r"[a-z]*", r"(?<=[a-z])\d+|[A-Z][a-z]*"]
LINE = "hello, World 42! the cat sat on the mat; Ünïcödé 😀 a1b2\n"
TEXTS = [
    "hello, World 42!",
    "",
    "!!! ",
    "x",
    f"one{ENDOFTEXT}, Two 3{ENDOFTEXT}",
    "  ab,,c d\n\n\t  Zebra9q",
    LINE * 3,
]


def corpus(tmp_path: Path) -> Path:
    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / "corpus.txt"
    path.write_text((LINE * 40 + ENDOFTEXT) * 8, encoding="utf-8")
    return path


def trained_run(tmp_path: Path, pattern: str, *extra: str) -> Path:
    out = tmp_path / "run"
    argv = ["bpe_v2", str(out), "-d", str(corpus(tmp_path)), "-v", "300", "-q", "--pattern", pattern, *extra]
    assert cli_main(argv) == 0
    return out


@pytest.fixture
def tokenizers():
    return pytest.importorskip("tokenizers", reason="HF tokenizers is optional: pip install -e '.[export]'")


# ---------------------------------------------------------------------------------------------
# Text a pattern does not match


@pytest.mark.parametrize("pattern", UNCOVERING)
def test_unmatched_text_round_trips_on_every_encoding_path(pattern: str, tmp_path: Path) -> None:
    run = trained_run(tmp_path, pattern, "--special", ENDOFTEXT)
    for native in (None, False):
        tokenizer = Tokenizer.from_files(run / "vocab.json", run / "merges.txt", native=native)
        for text in TEXTS:
            ids = tokenizer.encode(text)
            assert tokenizer.decode(ids) == text, (pattern, text)
            assert list(tokenizer.encode_array(text)) == ids
            assert list(tokenizer.encode_iterable([text[:5], text[5:]])) == ids
            assert list(tokenizer.encode_batch([text])[0]) == ids
    text = "".join(TEXTS)
    data = tmp_path / "data.txt"
    data.write_text(text, encoding="utf-8")
    assert tokenizer.decode(tokenizer.encode_file(data)) == text
    assert encode_main([str(data), str(tmp_path / "ids.npy"), "--tokenizer", str(run), "-q"]) == 0
    assert tokenizer.decode(numpy.load(tmp_path / "ids.npy").tolist()) == text


@pytest.mark.parametrize("pattern", UNCOVERING)
def test_hf_export_gives_our_ids_where_the_pattern_leaves_text(pattern: str, tmp_path: Path, tokenizers) -> None:
    run = trained_run(tmp_path, pattern, "--special", ENDOFTEXT, "--export", "hf")
    ours = Tokenizer.from_files(run / "vocab.json", run / "merges.txt")
    hf = tokenizers.Tokenizer.from_file(str(run / "tokenizer.json"))
    for text in TEXTS:
        assert hf.encode(text).ids == ours.encode(text), (pattern, text)


def test_drop_unmatched_leaves_the_text_out_as_tiktoken_does(tmp_path: Path) -> None:
    pytest.importorskip("tiktoken", reason="tiktoken is optional: pip install -e '.[export]'")
    run = trained_run(tmp_path, "[a-z]+", "--special", ENDOFTEXT, "--export", "tiktoken")
    dropping = Tokenizer.from_files(run / "vocab.json", run / "merges.txt", drop_unmatched=True)
    encoding = tiktoken_encoding(run / "tokenizer.tiktoken", [ENDOFTEXT])
    for text in TEXTS:
        assert encoding.encode(text, allowed_special="all") == dropping.encode(text)
    assert dropping.decode(dropping.encode("hello, World 42!")) == "helloorld"
    with pytest.raises(BPEInputError, match="drop_unmatched"):
        Tokenizer({i: bytes([i]) for i in range(256)}, [], drop_unmatched="yes")  # type: ignore[arg-type]


def test_training_notes_how_much_text_the_pattern_leaves_unmatched(tmp_path: Path, capsys) -> None:
    # Per line: the letters a-z are 36 of 59 bytes (the emoji and three accented letters are 2-4 bytes each).
    line_bytes = len(LINE.encode("utf-8"))
    letters = sum(character in "abcdefghijklmnopqrstuvwxyz" for character in LINE)
    unmatched = (line_bytes - letters) * 40 * 8
    run = trained_run(tmp_path, "[a-z]+", "--special", ENDOFTEXT, "--export", "hf,tiktoken")
    err = capsys.readouterr().err
    share = unmatched / (line_bytes * 40 * 8)
    assert f"matches no part of {unmatched:,} bytes ({share:.1%}) of the training text" in err
    assert "--export tiktoken: tiktoken leaves out the text" in err
    recorded = json.loads((run / RUN_FILE).read_text())["unmatched_text"]
    assert recorded == {"bytes": unmatched, "of_bytes": line_bytes * 40 * 8}
    # A custom pattern that matches everything says nothing.
    covering = trained_run(tmp_path / "covering", r"[a-z]+|[^a-z]+", "--special", ENDOFTEXT)
    assert "matches no part" not in capsys.readouterr().err
    assert "unmatched_text" not in json.loads((covering / RUN_FILE).read_text())


def test_training_counts_only_the_matches_as_before() -> None:
    # The training contract is unchanged: counting takes the matches, encoding adds the gaps.
    assert count_words_in_text("ab, cd!", [], "[a-z]+") == {b"ab": 1, b"cd": 1}
    assert resolve_pattern("[a-z]+").pretokens("ab, cd!") == ["ab", ", ", "cd", "!"]
    assert resolve_pattern("[a-z]+").pretokens("ab, cd!", keep_gaps=False) == ["ab", "cd"]


# ---------------------------------------------------------------------------------------------
# Exports of custom regexes: translated where possible, refused before training where not

# Named groups (and a named back-reference), inline flags at the start and scoped ones.
TRANSLATED = [
    r"(?P<word>\p{L}+)|(?P<number>\p{N})|\s+|[^\s\p{L}\p{N}]+",
    r"(?s)\p{L}+|\p{N}|.",
    r"(?i)[a-z]+|(?s:.)",
    r"(?P<q>[!;,])(?P=q)|(?<l>[a-z])\1|\p{L}+|(?s:.)",
    r"(?m)^\p{L}+|\p{L}+$|\s+|.",
    r"(?si-x:[A-Z].)|\p{L}+|\s|.",
]


@pytest.mark.parametrize("pattern", TRANSLATED)
def test_named_groups_and_inline_flags_export_so_that_hf_and_tiktoken_load_them(
    pattern: str, tmp_path: Path, tokenizers
) -> None:
    pytest.importorskip("tiktoken", reason="tiktoken is optional: pip install -e '.[export]'")
    transformers = pytest.importorskip("transformers", reason="transformers is optional")
    run = trained_run(tmp_path, pattern, "--special", ENDOFTEXT, "--export", "hf,tiktoken")
    ours = Tokenizer.from_files(run / "vocab.json", run / "merges.txt")
    hf = tokenizers.Tokenizer.from_file(str(run / "tokenizer.json"))
    fast = transformers.PreTrainedTokenizerFast(tokenizer_file=str(run / "tokenizer.json"))
    encoding = tiktoken_encoding(run / "tokenizer.tiktoken", [ENDOFTEXT])
    for text in [*TEXTS, "!!;;,, aa bb\nLine\nend  \n", "AB\nc", "Ab Cd ef\n"]:
        expected = ours.encode(text)
        assert hf.encode(text).ids == expected, (pattern, text)
        assert fast.encode(text) == expected, (pattern, text)
        assert encoding.encode(text, allowed_special="all") == expected, (pattern, text)


@pytest.mark.parametrize(
    ("pattern", "formats", "named"),
    [
        (r"\X|\s+", "tiktoken", r"the grapheme cluster \X"),
        (r"(?x) \p{L}+ | .", "hf", "VERBOSE (?x)"),
        (r"(?a)\w+|.", "hf", "ASCII (?a)"),
        (r"(?a)\w+|.", "tiktoken", "ASCII (?a)"),
        (r"\p{L}+(?i)x|.", "hf", "the inline flag group (?i) after the start"),
        (r"[a-z]+(?R)?|.", "hf,tiktoken", "a recursive call (?R)"),
        (r"(?:cat){e<=1}|.", "hf", "fuzzy matching {e<=1}"),
        (r"(?<l>[a-z])\g<l>|.", "tiktoken", r"the back-reference \g<l>"),
    ],
)
def test_a_pattern_an_export_cannot_carry_is_refused_before_training(
    pattern: str, formats: str, named: str, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "run"
    argv = ["bpe_v2", str(out), "-d", str(corpus(tmp_path)), "-v", "300", "-q", "--pattern", pattern]
    assert cli_main([*argv, "--export", formats]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: cannot export pattern"), err
    assert named in err
    assert not (out / "vocab.json").exists()  # refused before training: nothing written
    with pytest.raises(BPEInputError, match="cannot export"):
        check_exportable(formats.split(","), pattern)


def test_the_oniguruma_translation_of_each_construct() -> None:
    assert hf_split_regex(r"(?P<w>a)(?P=w)|(?<v>b)\g<v>|\g<1>") == r"(a)\k<1>|(b)\k<2>|\k<1>"
    assert hf_split_regex(r"(?si)a.|(?-s:.)(?#note)") == r"(?mi)a.|(?-m:.)"
    assert hf_split_regex(r"(?m)^a$|(?<=x)b$") == r"^a$|(?<=x)b$"
    assert hf_split_regex(r"(?u)(?V0)^a") == r"\Aa"


# ---------------------------------------------------------------------------------------------
# A runaway regex


RUNAWAY = r"(a+)+$|."
RUNAWAY_TEXT = "a" * 1000 + "!"  # seconds of backtracking in `regex`, without end at 40 KB


def test_a_runaway_pattern_stops_with_an_error_naming_it(monkeypatch, tmp_path: Path, capsys) -> None:
    monkeypatch.setenv("CS336_REGEX_TIMEOUT", "0.001")
    tokenizer = Tokenizer({i: bytes([i]) for i in range(256)}, [], pattern=RUNAWAY)
    with pytest.raises(BPEInputError, match=r"pattern '\(a\+\)\+\$\|\.' ran past its time bound"):
        tokenizer.encode(RUNAWAY_TEXT)
    with pytest.raises(BPEInputError, match="CS336_REGEX_TIMEOUT"):
        count_words_in_text(RUNAWAY_TEXT, [], RUNAWAY)
    data = tmp_path / "runaway.txt"
    data.write_text(RUNAWAY_TEXT, encoding="utf-8")
    assert cli_main(["bpe_v1", str(tmp_path / "run"), "-d", str(data), "-v", "260", "-q", "--pattern", RUNAWAY]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ran past its time bound" in err, err
    monkeypatch.setenv("CS336_REGEX_TIMEOUT", "soon")
    with pytest.raises(BPEInputError, match="CS336_REGEX_TIMEOUT must be a positive number of seconds"):
        tokenizer.encode("a!")


def test_named_patterns_take_no_time_bound(monkeypatch) -> None:
    # Their pre-tokenization never backtracks without end: the bound is a custom regex's alone.
    monkeypatch.setenv("CS336_REGEX_TIMEOUT", "soon")
    assert resolve_pattern("gpt2").pretokens("ab, cd") == ["ab", ",", " cd"]


def test_ctrl_c_interrupts_a_runaway_pattern(monkeypatch) -> None:
    def interrupted(self: Pattern, text: str, *, keep_gaps: bool = True) -> list[str]:
        raise KeyboardInterrupt

    monkeypatch.setattr(Pattern, "pretokens", interrupted)
    with pytest.raises(KeyboardInterrupt):
        Tokenizer({i: bytes([i]) for i in range(256)}, [], pattern=RUNAWAY).encode("a!")


def test_sigint_during_a_runaway_encode_ends_the_script(tmp_path: Path) -> None:
    code = textwrap.dedent(
        f"""
        from cs336_basics import Tokenizer
        tokenizer = Tokenizer({{i: bytes([i]) for i in range(256)}}, [], pattern={RUNAWAY!r})
        print("encoding", flush=True)
        tokenizer.encode("a" * 40_000 + "!")
        print("finished")
        """
    )
    env = {**os.environ, "CS336_REGEX_TIMEOUT": "3600"}
    child = subprocess.Popen(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "encoding\n"
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=120)
    finally:
        child.kill()
    assert child.returncode != 0 and "finished" not in out
    assert "KeyboardInterrupt" in err
