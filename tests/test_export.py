"""Exports: HF `tokenizer.json` and tiktoken's rank file give our ids on real and generated text;
`transformers.AutoTokenizer` loads a training run's `--export hf` directory with the special tokens'
roles, and the exports belong to the output set. Each library's tests skip, with the reason, when it
is not installed (CI installs the export extra)."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cs336_basics import BPEInputError, Tokenizer, train_bpe
from cs336_basics.commands.cli import main as cli_main
from cs336_basics.commands.demo import write_demo_corpus
from cs336_basics.outputs.export import (
    DEFAULT_MODEL_MAX_LENGTH,
    export_files,
    hf_special_tokens_map,
    hf_tokenizer_config,
    hf_tokenizer_json,
    save_hf_tokenizer,
    save_hf_tokenizer_json,
    save_tiktoken_ranks,
    tiktoken_encoding,
)
from cs336_basics.outputs.serialization import (
    EXPORT_FILES,
    OUTPUT_FILES,
    RUN_FILE,
    OutputDirectory,
    read_run_info,
    save_tokenizer,
)
from cs336_basics.rules.contract import ENDOFTEXT
from tests.support import SHARED_CORPUS
from tests.test_equivalence import FRAGMENTS

# Only local directories are loaded here; transformers must not try the Hub for them (read when
# huggingface_hub is first imported, so set before any test imports transformers).
os.environ["HF_HUB_OFFLINE"] = "1"

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


# ---------------------------------------------------------------------------------------------
# transformers: tokenizer_config.json and special_tokens_map.json beside tokenizer.json

HF_FILES = ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"]
SAMPLES = [
    "Once upon a time<|endoftext|>there was a cat.",
    "  hello\n\nworld's 123 ,  !  ",
    "<|endoftext|><|endoftext|>é€😀<|pad|>x<s>",
    "",
]


def additional_special_tokens(tokenizer) -> list[str]:
    # transformers 5 lists them as extra_special_tokens; 4.x as additional_special_tokens (its
    # extra_special_tokens is a dict of named tokens).
    found = getattr(tokenizer, "additional_special_tokens", None)
    return list(found if found is not None else tokenizer.extra_special_tokens)


def auto_tokenizer(directory: Path):
    transformers = pytest.importorskip("transformers", reason="transformers is optional: pip install -e '.[export]'")
    return transformers.AutoTokenizer.from_pretrained(str(directory))


def assert_same_ids(auto, ours: Tokenizer) -> None:
    for text in SAMPLES:
        ids = ours.encode(text)
        assert auto(text)["input_ids"] == ids, text
        assert auto.decode(ids) == text


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_corpus(tmp_path_factory.mktemp("demo") / "demo.txt", size_bytes=100_000)


def test_auto_tokenizer_loads_the_cli_export(demo: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert cli_main(["auto", str(out), "-d", str(demo), "-v", "400", "-q", "--export", "hf"]) == 0
    auto = auto_tokenizer(out)
    ours = Tokenizer.from_files(out / "vocab.json", out / "merges.txt")
    assert ours.special_tokens == [ENDOFTEXT]
    assert auto.eos_token == auto.bos_token == ENDOFTEXT
    assert auto.eos_token_id == auto.bos_token_id == ours.encode(ENDOFTEXT)[0] == 256
    assert auto.unk_token is None and auto.pad_token is None, "byte-level BPE has no unknown token"
    assert additional_special_tokens(auto) == []
    assert auto.model_max_length == DEFAULT_MODEL_MAX_LENGTH
    assert_same_ids(auto, ours)


def test_auto_tokenizer_takes_other_special_tokens_as_additional(demo: Path, tmp_path: Path) -> None:
    specials = [ENDOFTEXT, "<|pad|>", "<s>"]
    vocab, merges = train_bpe(demo, 400, specials)
    out = tmp_path / "out"
    save_tokenizer(out, vocab, merges, specials, exports=export_files(["hf"], vocab, merges, specials))
    auto = auto_tokenizer(out)
    ours = Tokenizer.from_files(out / "vocab.pkl", out / "merges.pkl")
    assert auto.eos_token == auto.bos_token == ENDOFTEXT
    assert additional_special_tokens(auto) == ["<|pad|>", "<s>"]
    assert [auto.convert_tokens_to_ids(token) for token in specials] == [256, 257, 258]
    assert_same_ids(auto, ours)
    # Outside an output set the same three files come from save_hf_tokenizer.
    paths = save_hf_tokenizer(tmp_path / "loose", vocab, merges, specials)
    assert {name: path.read_bytes() for name, path in paths.items()} == {
        name: (out / name).read_bytes() for name in HF_FILES
    }


def test_special_token_roles() -> None:
    assert hf_special_tokens_map([ENDOFTEXT]) == {"bos_token": ENDOFTEXT, "eos_token": ENDOFTEXT}
    assert hf_special_tokens_map(["<pad>"]) == {"additional_special_tokens": ["<pad>"]}, "no eos is guessed"
    assert hf_special_tokens_map([]) == {}
    config = hf_tokenizer_config(["<pad>", ENDOFTEXT], model_max_length=256)
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast" and config["model_max_length"] == 256
    assert config["eos_token"] == ENDOFTEXT and config["additional_special_tokens"] == ["<pad>"]
    with pytest.raises(BPEInputError, match="model_max_length"):
        hf_tokenizer_config([ENDOFTEXT], model_max_length=0)
    with pytest.raises(BPEInputError, match="unknown export"):
        export_files(["hf", "sentencepiece"], {}, [])


def test_exports_belong_to_the_output_set(demo: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert cli_main(["auto", str(out), "-d", str(demo), "-v", "300", "-q", "--export", "hf,tiktoken"]) == 0
    run = read_run_info(out)
    assert set(run["files"]) == {*OUTPUT_FILES, *EXPORT_FILES}
    for name in EXPORT_FILES:
        data = (out / name).read_bytes()
        assert run["files"][name] == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    Tokenizer.from_files(out / "vocab.json", out / "merges.txt")  # the loader's checks accept the larger set
    assert not [path.name for path in out.iterdir() if path.name.startswith(".")], "nothing staged is left"

    # A run without exports replaces the set; the old exports, which no longer match, go with it.
    assert cli_main(["auto", str(out), "-d", str(demo), "-v", "280", "-q"]) == 0
    assert sorted(path.name for path in out.iterdir()) == sorted([*OUTPUT_FILES, RUN_FILE])
    assert set(read_run_info(out)["files"]) == set(OUTPUT_FILES)


def test_an_export_that_fails_writes_nothing(tmp_path: Path) -> None:
    vocab = {index: bytes([index]) for index in range(256)} | {256: b"ab", 257: b"ab"}
    with pytest.raises(BPEInputError, match="both spell"):
        save_hf_tokenizer(tmp_path / "loose", vocab, [(b"a", b"b")])
    assert not (tmp_path / "loose").exists()
    with OutputDirectory(tmp_path / "set") as output, pytest.raises(ValueError, match="not an export"):
        output.save(vocab, [], exports={"model.safetensors": b""})
    assert not (tmp_path / "set").exists()  # made for the set, removed with nothing in it
