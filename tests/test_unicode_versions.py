"""Each Unicode version's character classes (`pattern.UNICODE_VERSIONS`): the native scanners and the
pure-Python path (`pattern.classes_as`) class alike under every table; the installed `regex`'s table is
the one detected; the tools' presets class as rustbpe and HF tokenizers do on recently assigned code
points; the option is checked, recorded and read back; and bpe_v1 equals bpe_v7 under the oldest
`regex` the package accepts (pyproject.toml's `regex>=2023.0`: 2023.3.22, Unicode 15.0)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import regex

from cs336_basics import Tokenizer, train_bpe, train_bpe_from_iterator
from cs336_basics.commands.cli import main as cli_main
from cs336_basics.errors import BPEInputError
from cs336_basics.native.backend import pure_python_forced
from cs336_basics.outputs.serialization import decode_token
from cs336_basics.rules.pattern import (
    NAMED_PATTERNS,
    NATIVE_PATTERNS,
    TOOLS_UNICODE,
    UNICODE_VERSIONS,
    classes_as,
    installed_unicode,
)
from cs336_basics.rules.unicode_classes import DIFFERING_CLASSES
from tests.support import REPO_ROOT

# The oldest regex release pyproject.toml's `regex>=2023.0` takes, and the Unicode version it has.
OLDEST_REGEX = "2023.3.22"
OLDEST_REGEX_UNICODE = "15.0"
ASCII_PIECES = ["a", "b", "Z", "q", "1", "7", " ", " ", "'s", "'T", "\n", "\t", ".", ",", "!", "/", "\r"]


def code_points_where(unicode: str, other: str) -> list[str]:
    """The characters two tables class differently."""
    values = {
        version: [value for first, last, value in DIFFERING_CLASSES[version] for _ in range(first, last + 1)]
        for version in (unicode, other)
    }
    everything = [chr(cp) for first, last, _ in DIFFERING_CLASSES[unicode] for cp in range(first, last + 1)]
    return [char for char, a, b in zip(everything, values[unicode], values[other]) if a != b]


def mixed_text(rng: random.Random, pool: list[str], length: int) -> str:
    """ASCII pieces and characters of `pool`, about half each."""
    return "".join(rng.choice(pool) if rng.random() < 0.5 else rng.choice(ASCII_PIECES) for _ in range(length))


def recent_documents(seed: int) -> list[str]:
    """Documents of words that hold characters Unicode 16.0 and the newest table class differently
    (letters and numbers assigned since), each word often enough for merges to run across them."""
    rng = random.Random(seed)
    pool = code_points_where(TOOLS_UNICODE, UNICODE_VERSIONS[0])
    words = [
        "".join(rng.choice(pool) if rng.random() < 0.4 else rng.choice("abcdexyz12") for _ in range(rng.randint(2, 6)))
        for _ in range(12)
    ]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) for _ in range(150)]


def native_or_skip():
    if pure_python_forced():
        pytest.skip("CS336_PURE_PYTHON is set: the native scanner is not loaded")
    return pytest.importorskip(
        "cs336_basics.native._count_cpp",
        reason="the native extension is not built (pip install -e . with a C++ compiler)",
    )


# ---------------------------------------------------------------------------------------------
# The tables, natively and through regex


@pytest.mark.parametrize("unicode", UNICODE_VERSIONS)
@pytest.mark.parametrize("name", NATIVE_PATTERNS)
@pytest.mark.parametrize("spelled", ["named", "custom"])
def test_regex_path_classes_as_the_native_table(unicode: str, name: str, spelled: str) -> None:
    native = native_or_skip()
    # A named pattern's classes become version 1 sets; any other regex's (here the same one with an
    # alternative that never matches) lookaheads and alternatives.
    expression = NAMED_PATTERNS[name] + ("" if spelled == "named" else "|(?!)")
    compiled = regex.compile(classes_as(expression, unicode))
    rng = random.Random(f"{unicode} {name}")
    pool = sorted({char for other in UNICODE_VERSIONS for char in code_points_where(unicode, other)})
    for _ in range(150):
        text = mixed_text(rng, pool, rng.randint(1, 40))
        assert compiled.findall(text) == native.pretokenize(text, name, unicode), ascii(text)


def test_the_installed_regex_table_is_detected() -> None:
    native = native_or_skip()
    # scripts/unicode_versions.json lists the regex releases each table was probed from.
    probed = json.loads((REPO_ROOT / "scripts" / "unicode_versions.json").read_text(encoding="utf-8"))
    releases = {release: probed["base"]["unicode"] for release in probed["base"]["regex"]}
    releases.update({release: unicode for unicode, entry in probed["tables"].items() for release in entry["regex"]})
    version = importlib.metadata.version("regex")
    if version not in releases:
        pytest.skip(f"regex {version} was not probed (scripts/probe_unicode_classes.py)")
    assert installed_unicode() == releases[version]
    assert native.regex_unicode_version() == releases[version]
    assert native.UNICODE_VERSIONS == UNICODE_VERSIONS


@pytest.mark.parametrize("unicode", UNICODE_VERSIONS)
def test_bpe_v1_is_bpe_v7_under_each_table(tmp_path: Path, unicode: str) -> None:
    native_or_skip()
    rng = random.Random(unicode)
    pool = sorted({char for other in UNICODE_VERSIONS for char in code_points_where(unicode, other)})
    words = [mixed_text(rng, pool, rng.randint(1, 5)) for _ in range(40)]
    path = tmp_path / "recent.txt"
    path.write_text("".join(rng.choice(words) for _ in range(3000)), encoding="utf-8")
    for pattern in ("gpt2", "cl100k", "o200k"):
        expected = train_bpe(path, 420, [], trainer="bpe_v1", pattern=pattern, unicode=unicode)
        assert train_bpe(path, 420, [], trainer="bpe_v7", pattern=pattern, unicode=unicode) == expected, pattern


# ---------------------------------------------------------------------------------------------
# The tools' own classes


@pytest.mark.parametrize("seed", range(3))
def test_like_rustbpe_is_rustbpe_on_recent_code_points(seed: int) -> None:
    rustbpe = pytest.importorskip("rustbpe", reason="rustbpe is optional: pip install rustbpe (the bench extra)")
    documents = recent_documents(seed)
    tool = rustbpe.Tokenizer()
    tool.train_from_iterator(iter(documents), 400)
    expected = {rank: bytes(token) for token, rank in tool.get_mergeable_ranks()}
    vocab, _ = train_bpe_from_iterator(documents, 400, [], like="rustbpe")
    assert vocab == expected


@pytest.mark.parametrize("seed", range(3))
def test_like_hf_is_hf_on_recent_code_points(seed: int) -> None:
    pytest.importorskip("tokenizers", reason="HF tokenizers is optional: pip install -e '.[export]'")
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import models, pre_tokenizers, trainers

    documents = recent_documents(seed)
    tool = HFTokenizer(models.BPE())
    tool.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tool.train_from_iterator(
        documents,
        trainers.BpeTrainer(
            vocab_size=400, min_frequency=0, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
        ),
    )
    model = json.loads(tool.to_str())["model"]
    expected = {token_id: decode_token(token, "hf") for token, token_id in model["vocab"].items()}
    vocab, _ = train_bpe_from_iterator(documents, 400, [], like="hf")
    assert vocab == expected


def test_tiktoken_patterns_encode_as_tiktoken_on_recent_code_points() -> None:
    tiktoken = pytest.importorskip("tiktoken", reason="tiktoken is optional: pip install -e '.[export]'")
    documents = recent_documents(7)
    text = "\n".join(documents[:40])
    for name in ("cl100k", "o200k"):
        vocab, merges = train_bpe_from_iterator(documents, 400, [], like="rustbpe", pattern=name)
        encoding = tiktoken.Encoding(
            name,
            pat_str=NAMED_PATTERNS[name],
            mergeable_ranks={token: rank for rank, token in vocab.items()},
            special_tokens={},
        )
        expected = encoding.encode_ordinary(text)
        for native in (None, False):
            assert Tokenizer(vocab, merges, pattern=name, native=native).encode(text) == expected, (name, native)


# ---------------------------------------------------------------------------------------------
# The option


def test_an_unknown_or_contradicting_version_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "text.txt"
    path.write_text("some text\n", encoding="utf-8")
    with pytest.raises(BPEInputError, match=", ".join(UNICODE_VERSIONS)):
        train_bpe(path, 260, [], unicode="14.0")
    other = next(version for version in UNICODE_VERSIONS if version != TOOLS_UNICODE)
    with pytest.raises(BPEInputError, match="contradicts like='rustbpe'"):
        train_bpe(path, 260, [], like="rustbpe", unicode=other)
    with pytest.raises(SystemExit) as stopped:
        cli_main(["auto", str(tmp_path / "out"), "-d", str(path), "-v", "260", "--unicode", "14.0"])
    assert stopped.value.code == 2
    assert ", ".join(f"'{version}'" for version in UNICODE_VERSIONS) in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    assert (
        cli_main(["auto", str(tmp_path / "out"), "-d", str(path), "-v", "260", "--like", "hf", "--unicode", other]) == 2
    )
    assert "contradicts like='hf'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("options", "recorded"), [(["--like", "rustbpe"], TOOLS_UNICODE), (["--unicode", "15.0"], "15.0")]
)
def test_the_run_records_its_version_and_the_tokenizer_reads_it(
    tmp_path: Path, options: list[str], recorded: str
) -> None:
    documents = recent_documents(3)
    path = tmp_path / "text.txt"
    path.write_text("".join(documents), encoding="utf-8")
    out = tmp_path / "out"
    assert cli_main(["auto", str(out), "-d", str(path), "-v", "400", "--special", "-q", *options]) == 0
    run = json.loads((out / "bpe_run.json").read_text(encoding="utf-8"))
    assert run["pattern"]["unicode"] == recorded
    files = (out / "vocab.json", out / "merges.txt")
    tokenizer = Tokenizer.from_files(*files)
    assert tokenizer.pattern.unicode == recorded
    # The compiled encoder and the pure-Python path encode by the recorded table alike.
    assert tokenizer.encode(documents[0]) == Tokenizer.from_files(*files, native=False).encode(documents[0])


# ---------------------------------------------------------------------------------------------
# The oldest regex the package accepts


def oldest_regex(tmp_path: Path) -> Path:
    """A directory holding regex 2023.3.22: $CS336_OLD_REGEX, else installed there by pip (its cache
    or the index); skipped, saying so, where neither works."""
    given = os.environ.get("CS336_OLD_REGEX")
    if given:
        return Path(given)
    target = tmp_path / "old_regex"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(target),
            f"regex=={OLDEST_REGEX}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        # A constraints file (CI pins the regex the tables were generated from) would refuse this one.
        env={name: value for name, value in os.environ.items() if name != "PIP_CONSTRAINT"},
    )
    if result.returncode != 0:
        said = (result.stderr.strip().splitlines() or ["no message"])[-1]
        pytest.skip(
            f"regex {OLDEST_REGEX} could not be installed ({said}); set CS336_OLD_REGEX to a directory with it"
        )
    return target


def test_bpe_v1_is_bpe_v7_under_the_oldest_regex(tmp_path: Path) -> None:
    native_or_skip()
    directory = oldest_regex(tmp_path)
    child = textwrap.dedent(
        f"""
        import importlib.metadata, random, sys
        sys.path.insert(0, {str(directory)!r})
        import regex
        assert importlib.metadata.version("regex") == {OLDEST_REGEX!r}, importlib.metadata.version("regex")
        from cs336_basics import train_bpe
        from cs336_basics.native import _count_cpp
        from cs336_basics.rules.pattern import installed_unicode
        from cs336_basics.rules.unicode_classes import DIFFERING_CLASSES
        assert installed_unicode() == _count_cpp.regex_unicode_version() == {OLDEST_REGEX_UNICODE!r}
        rng = random.Random(0)
        pool = [chr(cp) for first, last, _ in DIFFERING_CLASSES["15.0"] for cp in range(first, last + 1)]
        words = ["".join(rng.choice(pool + list("ab1 ")) for _ in range(rng.randint(1, 5))) for _ in range(40)]
        path = sys.argv[1]
        with open(path, "w", encoding="utf-8") as file:
            file.write("".join(rng.choice(words) for _ in range(3000)))
        for rules in ({{}}, {{"pattern": "o200k"}}, {{"like": "rustbpe"}}, {{"like": "hf"}}):
            assert train_bpe(path, 400, [], trainer="bpe_v1", **rules) == train_bpe(
                path, 400, [], trainer="bpe_v7", **rules
            ), rules
        print("equal")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", child, str(tmp_path / "recent.txt")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["equal"]
