"""Starting from an existing tokenizer (`start_from`, `--start-from`): the prefix property on every
version, rule, pattern and layout; GPT-2 kept whole with new merges equal to a reference written
here; known answers for every base format; bad bases refused naming their file."""

from __future__ import annotations

import base64
import json
import os
import pickle
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cs336_basics import BPEInputError, Tokenizer, train_bpe, train_bpe_from_counts
from cs336_basics.commands.cli import main as cli_main
from cs336_basics.outputs.export import hf_tokenizer_json, save_tiktoken_ranks
from cs336_basics.outputs.serialization import encode_token
from cs336_basics.rules.contract import MAX_TOKEN_ID
from cs336_basics.rules.splitting import count_words_in_text
from cs336_basics.rules.start_from import load_base
from cs336_basics.rules.tie_break import TIE_BREAKS
from cs336_basics.trainers import train_bpe_from_iterator
from tests.support import greedy_merges, ranked_encoding, require_fixture
from tests.test_pattern_and_tie_break import corpora, oracle, write_corpus

SPECIALS = ["<|endoftext|>"]
EOT = "<|endoftext|>"


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("start_from")


def sizes_for(trainer: str) -> tuple[int, int]:
    """1,000 then 3,000; the oracle recounts every pair at every merge, so it goes 300 then 500."""
    return (300, 500) if trainer == "bpe_v1" else (1000, 3000)


# ---------------------------------------------------------------------------------------------
# The prefix property: N tokens, then on from them to M, is M at once


@pytest.mark.parametrize("rule", TIE_BREAKS)
@pytest.mark.parametrize("pattern", ["gpt2", "cl100k"])
def test_going_on_from_a_run_equals_training_at_once(trainer: str, rule: str, pattern: str) -> None:
    corpus = require_fixture("corpus.en")
    small, large = sizes_for(trainer)
    rules = {"trainer": trainer, "tie_break": rule, "pattern": pattern}
    at_once = train_bpe(corpus, large, SPECIALS, **rules)
    first = train_bpe(corpus, small, SPECIALS, **rules)
    went_on = train_bpe(corpus, large, SPECIALS, start_from=first, **rules)
    assert went_on == at_once
    assert len(at_once[0]) == large  # the property is tested on full runs, not on runs that ran dry


@pytest.mark.parametrize("like", ["hf", "rustbpe"])
def test_each_layout_keeps_the_base_ids_and_continues_after_them(trainer: str, like: str) -> None:
    corpus = require_fixture("corpus.en")
    small, large = sizes_for(trainer)
    at_once = train_bpe(corpus, large, SPECIALS, trainer=trainer, like=like)
    first = train_bpe(corpus, small, SPECIALS, trainer=trainer, like=like)
    vocab, merges = train_bpe(corpus, large, SPECIALS, trainer=trainer, like=like, start_from=first)
    assert merges == at_once[1]
    assert all(vocab[token_id] == token for token_id, token in first[0].items())
    if like == "hf":  # special tokens first: every id as at once
        assert vocab == at_once[0]
    else:
        # rustbpe's special tokens follow the merges: the base's keeps its id (small - 1), the new
        # merges fill from `small` on; without special tokens it is the run at once.
        assert vocab[small - 1] == EOT.encode() and at_once[0][large - 1] == EOT.encode()
        regular = {token_id: token for token_id, token in vocab.items() if token != EOT.encode()}
        assert sorted(regular.values()) == sorted(token for token in at_once[0].values() if token != EOT.encode())
        assert [regular[token_id] for token_id in range(small, large)] == [a + b for a, b in merges[small - 257 :]]


@pytest.mark.parametrize("rule", TIE_BREAKS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=corpora(), split=st.floats(min_value=0, max_value=1))
def test_every_version_goes_on_as_the_oracle_trains_at_once(
    trainer: str, corpus_dir: Path, rule: str, case: tuple[str, list[str], int], split: float
) -> None:
    text, specials, vocab_size = case
    smallest = 256 + len(specials)
    base_size = smallest + int(split * (vocab_size - smallest))
    base = oracle(corpus_dir, text, tuple(specials), base_size, "gpt2", rule)
    expected = oracle(corpus_dir, text, tuple(specials), vocab_size, "gpt2", rule)
    if len(base[0]) < base_size:  # the base ran dry: it has every merge there is
        expected = base
    path = write_corpus(corpus_dir, text)
    got = train_bpe(path, vocab_size, specials, trainer=trainer, tie_break=rule, start_from=base, num_workers=1)
    assert got == expected


# ---------------------------------------------------------------------------------------------
# GPT-2 plus 200 merges, against a reference written here


def gpt2_base() -> tuple[Path, Path]:
    return require_fixture("gpt2_vocab.json"), require_fixture("gpt2_merges.txt")


def reference_new_merges(text: str, merges: list[tuple[bytes, bytes]], num_merges: int) -> list[tuple[bytes, bytes]]:
    """Words encoded by GPT-2 (the lowest-ranked pair first, until none is ranked), then greedy
    merges by the assignment's rule: the most frequent pair, ties to the greatest bytes."""
    rank = {pair: index for index, pair in enumerate(merges)}
    words: Counter[tuple[bytes, ...]] = Counter()
    for word, count in count_words_in_text(text, SPECIALS).items():
        words[ranked_encoding(word, rank)] += count
    return greedy_merges(words, num_merges)


@pytest.fixture(scope="module")
def gpt2_plus_200() -> tuple[dict, list, list]:
    vocab_path, merges_path = gpt2_base()
    corpus = require_fixture("corpus.en")
    base = load_base((vocab_path, merges_path), SPECIALS)
    expected = reference_new_merges(corpus.read_text(encoding="utf-8"), base.merges, 200)
    return base.vocab, base.merges, expected


def test_gpt2_plus_200_keeps_gpt2_whole_and_adds_the_reference_merges(trainer: str, gpt2_plus_200) -> None:
    gpt2_vocab, gpt2_merges, expected = gpt2_plus_200
    corpus = require_fixture("corpus.en")
    vocab, merges = train_bpe(corpus, 50_257 + 200, SPECIALS, trainer=trainer, start_from=gpt2_base())
    assert len(gpt2_vocab) == 50_257 and len(expected) == 200
    assert merges[:50_000] == gpt2_merges and merges[50_000:] == expected
    assert {token_id: vocab[token_id] for token_id in gpt2_vocab} == gpt2_vocab
    assert vocab[50_256] == EOT.encode()
    assert [vocab[50_257 + index] for index in range(200)] == [a + b for a, b in expected]
    assert len(vocab) == 50_457


def test_the_tokenizer_and_the_exports_work_on_the_result(tmp_path: Path, gpt2_plus_200) -> None:
    corpus = require_fixture("corpus.en")
    vocab, merges = train_bpe(corpus, 50_257 + 200, SPECIALS, start_from=gpt2_base())
    tokenizer = Tokenizer(vocab, merges, SPECIALS)
    text = corpus.read_text(encoding="utf-8")[:5000] + EOT + " the end"
    ids = tokenizer.encode(text)
    assert tokenizer.decode(ids) == text
    assert 50_256 in ids and max(ids) >= 50_257  # GPT-2's special token, and new tokens in use
    gpt2 = Tokenizer.from_files(*gpt2_base(), SPECIALS)
    assert len(ids) < len(gpt2.encode(text))
    document = hf_tokenizer_json(vocab, merges, SPECIALS)
    assert document["model"]["vocab"][encode_token(vocab[50_257])] == 50_257
    (tmp_path / "tokenizer.json").write_text(json.dumps(document), encoding="utf-8")
    save_tiktoken_ranks(tmp_path / "ranks.tiktoken", vocab, SPECIALS)
    # Each export is a base again, with the same merges.
    assert load_base(tmp_path / "tokenizer.json").merges == merges
    # The rank file lists GPT-2's special token at 50,256, among the ranks (no gap): named, it stays special.
    assert load_base(tmp_path / "ranks.tiktoken", SPECIALS).merges == merges
    # And the tools encode with it as our tokenizer does.
    tokenizers = pytest.importorskip("tokenizers", reason="HF tokenizers is optional: pip install -e '.[export]'")
    assert tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json")).encode(text).ids == ids
    pytest.importorskip("tiktoken", reason="tiktoken is optional: pip install -e '.[export]'")
    from cs336_basics.outputs.export import tiktoken_encoding

    assert tiktoken_encoding(vocab, SPECIALS).encode(text, allowed_special="all") == ids


# ---------------------------------------------------------------------------------------------
# Known answers, and every base format


def test_a_hand_computed_run_from_a_base(tmp_path: Path, trainer: str) -> None:
    # Words "aaa", " aaa", " ab"; by the base's (a, a): [aa, a], [" ", aa, a], [" ", a, b].
    # (aa, a) counts 2 and goes first; then (" ", aaa), (" ", a) and (a, b) tie at 1, and (a, b)
    # is the greatest bytes.
    path = tmp_path / "text.txt"
    path.write_text("aaa aaa ab", encoding="utf-8")
    vocab = {byte: bytes([byte]) for byte in range(256)} | {256: b"aa"}
    got_vocab, merges = train_bpe(path, 259, [], trainer=trainer, start_from=(vocab, [(b"a", b"a")]))
    assert merges == [(b"a", b"a"), (b"aa", b"a"), (b"a", b"b")]
    assert got_vocab == vocab | {257: b"aaa", 258: b"ab"}


def test_a_base_numbered_its_own_way_keeps_its_ids(tmp_path: Path, trainer: str) -> None:
    # Bytes at ids 1000-1255 in reverse, the merge at 7, a special token at 3: all kept; new ids from 1256.
    path = tmp_path / "text.txt"
    path.write_text("aaa aaa ab<s>ab", encoding="utf-8")
    vocab = {1000 + 255 - byte: bytes([byte]) for byte in range(256)} | {7: b"aa", 3: b"<s>"}
    got, merges = train_bpe(path, 262, ["<s>", "<t>"], trainer=trainer, start_from=(vocab, [(b"a", b"a")]))
    # (aa, a) and (a, b) count 2 (b"aa" > b"a"), then (" ", ab) beats (" ", aaa) (b"ab" > b"aaa").
    assert merges == [(b"a", b"a"), (b"aa", b"a"), (b"a", b"b"), (b" ", b"ab")]
    assert got == vocab | {1256: b"<t>", 1257: b"aaa", 1258: b"ab", 1259: b" ab"}


@pytest.fixture(scope="module")
def small_runs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """300 then 600 tokens on corpus.en, written by the command (a training directory and its exports)."""
    corpus = require_fixture("corpus.en")
    out = tmp_path_factory.mktemp("runs")
    for size in (300, 600):
        assert cli_main(["auto", str(out / str(size)), "-v", str(size), "-d", str(corpus), "-q",
                         "--export", "hf,tiktoken"]) == 0  # fmt: skip
    return {"corpus": corpus, "base": out / "300", "at_once": out / "600"}


def read_set(directory: Path) -> tuple[dict, list]:
    with open(directory / "vocab.pkl", "rb") as vocab, open(directory / "merges.pkl", "rb") as merges:
        return pickle.load(vocab), pickle.load(merges)


@pytest.mark.parametrize("form", ["directory", "vocab.json+merges.txt", "tokenizer.json", "pair in memory"])
def test_every_base_format_goes_on_as_at_once(trainer: str, small_runs: dict, form: str) -> None:
    base_dir = small_runs["base"]
    start = {
        "directory": base_dir,
        "vocab.json+merges.txt": (base_dir / "vocab.json", base_dir / "merges.txt"),
        "tokenizer.json": base_dir / "tokenizer.json",
        "pair in memory": read_set(base_dir),
    }[form]
    got = train_bpe(small_runs["corpus"], 600, SPECIALS, trainer=trainer, start_from=start)
    assert got == read_set(small_runs["at_once"])


def test_a_tiktoken_base_keeps_its_special_token_where_the_run_put_it(small_runs: dict) -> None:
    # The rank file lists the special token at 256, among the ranks (no gap): going on from it is the
    # run at once, every id.
    base = small_runs["base"] / "tokenizer.tiktoken"
    assert base.read_text(encoding="ascii").splitlines()[256] == f"{base64.b64encode(EOT.encode()).decode()} 256"
    assert train_bpe(small_runs["corpus"], 600, SPECIALS, start_from=base) == read_set(small_runs["at_once"])


def test_the_command_goes_on_from_a_training_directory(tmp_path: Path, small_runs: dict) -> None:
    out = tmp_path / "went_on"
    code = cli_main(["auto", str(out), "-v", "600", "-d", str(small_runs["corpus"]), "-q",
                     "--start-from", str(small_runs["base"])])  # fmt: skip
    assert code == 0
    assert read_set(out) == read_set(small_runs["at_once"])
    run = json.loads((out / "bpe_run.json").read_text(encoding="utf-8"))
    assert run["start_from"]["tokens"] == 300 and run["special_tokens"] == SPECIALS


def test_the_command_names_gpt2_files_and_writes_sizes_from_one_run(tmp_path: Path) -> None:
    corpus = require_fixture("corpus.en")
    vocab_path, merges_path = gpt2_base()
    out = tmp_path / "gpt2"
    code = cli_main(["auto", str(out), "-v", "50357,50457", "-d", str(corpus), "-q",
                     "--start-from", str(vocab_path), str(merges_path)])  # fmt: skip
    assert code == 0
    smaller, larger = read_set(out / "v50357"), read_set(out / "v50457")
    assert larger[1][:50_100] == smaller[1] and len(smaller[0]) == 50_357
    assert train_bpe(corpus, 50_357, SPECIALS, start_from=(vocab_path, merges_path)) == smaller


def test_count_files_and_documents_go_on_as_text_does(trainer: str, small_runs: dict) -> None:
    corpus = small_runs["corpus"]
    expected = read_set(small_runs["at_once"])
    counts = count_words_in_text(corpus.read_text(encoding="utf-8"), SPECIALS)
    base = small_runs["base"]
    assert train_bpe_from_counts(dict(counts), 600, SPECIALS, trainer=trainer, start_from=base) == expected
    documents = corpus.read_text(encoding="utf-8").split(EOT)
    assert train_bpe_from_iterator(documents, 600, SPECIALS, trainer=trainer, start_from=base) == expected
    sizes = train_bpe(corpus, None, SPECIALS, trainer=trainer, vocab_sizes=[400, 600], start_from=base)
    assert sizes[600] == expected and sizes[400] == train_bpe(corpus, 400, SPECIALS, trainer=trainer)


# ---------------------------------------------------------------------------------------------
# Bases that are refused, naming what is wrong


def byte_vocab() -> dict[int, bytes]:
    return {byte: bytes([byte]) for byte in range(256)}


@pytest.mark.parametrize(
    ("vocab", "merges", "named"),
    [
        ({byte: bytes([byte]) for byte in range(255)}, [], "not a byte-level BPE tokenizer"),
        (byte_vocab() | {256: b"abc"}, [(b"ab", b"c")], "joins b'ab', which no earlier merge makes"),
        (byte_vocab(), [(b"a", b"b")], "not in the vocabulary"),
        (byte_vocab() | {256: b"ab", 257: b"xyz"}, [(b"a", b"b")], r"b'xyz' \(id 257\) is made by no merge"),
        (byte_vocab() | {256: b"ab"}, [(b"a", b"b"), (b"a", b"b")], "already makes"),
        (byte_vocab() | {256: b"ab", 300: b"ab"}, [(b"a", b"b")], r"at ids \[256, 300\]"),
    ],
)
def test_a_base_whose_merges_do_not_build_its_vocabulary_is_refused(
    tmp_path: Path, vocab: dict, merges: list, named: str
) -> None:
    path = tmp_path / "text.txt"
    path.write_text("ab ab", encoding="utf-8")
    with pytest.raises(BPEInputError, match=named):
        train_bpe(path, 400, [], start_from=(vocab, merges))


def write_gpt2_pair(directory: Path, vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]]) -> None:
    directory.mkdir()
    text = {encode_token(token): token_id for token_id, token in vocab.items()}
    (directory / "vocab.json").write_text(json.dumps(text), encoding="utf-8")
    lines = [f"{encode_token(left)} {encode_token(right)}" for left, right in merges]
    (directory / "merges.txt").write_text("#version: 0.2\n" + "\n".join(lines) + "\n", encoding="utf-8")


def test_bad_files_are_refused_naming_them(tmp_path: Path) -> None:
    text = tmp_path / "text.txt"
    text.write_text("ab ab", encoding="utf-8")
    broken = tmp_path / "broken"
    write_gpt2_pair(broken, byte_vocab() | {256: b"ab", 257: b"abc"}, [(b"a", b"b")])
    with pytest.raises(BPEInputError, match=rf"{broken}.*b'abc' \(id 257\) is made by no merge"):
        train_bpe(text, 400, [], start_from=broken)
    # An HF tokenizer that is not byte-level: a WordPiece model, a Metaspace BPE.
    wordpiece = tmp_path / "wordpiece.json"
    wordpiece.write_text(json.dumps({"model": {"type": "WordPiece", "vocab": {"a": 0}}}), encoding="utf-8")
    with pytest.raises(BPEInputError, match=f"{wordpiece} is not a BPE tokenizer.json"):
        train_bpe(text, 400, [], start_from=wordpiece)
    metaspace = tmp_path / "metaspace.json"
    document = {"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "Metaspace"}}
    metaspace.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(BPEInputError, match=f"{metaspace} is not byte-level BPE"):
        train_bpe(text, 400, [], start_from=metaspace)
    # A rank file whose token is not two tokens ranked before it.
    ranks = tmp_path / "bad.tiktoken"
    save_tiktoken_ranks(ranks, byte_vocab() | {256: b"abc"})
    with pytest.raises(BPEInputError, match=rf"{ranks}.*b'abc' is not two tokens ranked before it"):
        train_bpe(text, 400, [], start_from=ranks)
    binary = tmp_path / "model.bin"
    binary.write_bytes(b"\xff\xfe\x00 weights")
    with pytest.raises(BPEInputError, match=f"{binary} is not a tokenizer"):
        train_bpe(text, 400, [], start_from=binary)
    malformed = tmp_path / "malformed.json"
    document = {"model": {"type": "BPE", "vocab": {}, "merges": [[1, 2]]}, "pre_tokenizer": {"type": "ByteLevel"}}
    malformed.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(BPEInputError, match=f"{malformed}: a merge must be two tokens"):
        train_bpe(text, 400, [], start_from=malformed)
    with pytest.raises(BPEInputError, match="no such file or directory"):
        train_bpe(text, 400, [], start_from=tmp_path / "missing")
    with pytest.raises(BPEInputError, match="holds no tokenizer"):
        train_bpe(text, 400, [], start_from=tmp_path)


def test_a_vocab_size_below_the_base_is_refused(tmp_path: Path) -> None:
    text = tmp_path / "text.txt"
    text.write_text("ab ab", encoding="utf-8")
    base = (byte_vocab() | {256: b"ab"}, [(b"a", b"b")])
    with pytest.raises(BPEInputError, match="it holds 257 tokens and 1 special token.s. are new, so the smallest"):
        train_bpe(text, 257, ["<s>"], start_from=base)
    assert train_bpe(text, 258, ["<s>"], start_from=base)[0][257] == b"<s>"


def test_the_command_refuses_a_bad_base_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = tmp_path / "text.txt"
    text.write_text("ab ab", encoding="utf-8")
    code = cli_main(["auto", str(tmp_path / "out"), "-d", str(text), "--start-from", str(tmp_path / "nothing")])
    assert code == 2
    error = capsys.readouterr().err
    assert error.startswith("error: start_from: no such file or directory") and error.count("\n") == 1
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------------------------
# Ids a base cannot keep, and start_from values that are no base


def hf_document(vocab: dict[int, bytes], merges: list, specials: list[str]) -> dict:
    return json.loads(json.dumps(hf_tokenizer_json(vocab, merges, specials)))


def test_an_hf_added_token_at_an_id_another_token_has_is_refused(tmp_path: Path) -> None:
    text = tmp_path / "text.txt"
    text.write_text("ab ab<s>", encoding="utf-8")
    vocab, merges = byte_vocab() | {256: b"ab", 257: b"<s>"}, [(b"a", b"b")]
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(hf_document(vocab, merges, ["<s>"])), encoding="utf-8")
    assert load_base(path).vocab[257] == b"<s>"  # as written, the ids are kept
    # added_tokens puts <s> at 97, the byte a's id: with <s> in model.vocab too, and without it (where
    # it used to move to the next free id).
    for keep_model_entry in (True, False):
        document = hf_document(vocab, merges, ["<s>"])
        document["added_tokens"][0]["id"] = 97
        if not keep_model_entry:
            del document["model"]["vocab"]["<s>"]
        path.write_text(json.dumps(document), encoding="utf-8")
        with pytest.raises(BPEInputError, match=rf"{path}: the added token '<s>' has id 97, which b'a' has too"):
            train_bpe(text, 300, ["<s>"], start_from=path)
    document = hf_document(vocab, merges, ["<s>"])
    document["model"]["vocab"][encode_token(b"ab")] = 98
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(BPEInputError, match=r"model.vocab gives id 98 to two tokens, b'b' and b'ab'"):
        load_base(path)


def test_a_rank_file_listing_a_token_twice_is_refused_naming_both_ranks(tmp_path: Path) -> None:
    text = tmp_path / "text.txt"
    text.write_text("ab ab abc", encoding="utf-8")
    ranks = tmp_path / "base.tiktoken"
    save_tiktoken_ranks(ranks, byte_vocab() | {256: b"ab", 257: b"abc"})
    assert load_base(ranks).merges == [(b"a", b"b"), (b"ab", b"c")]
    lines = ranks.read_text(encoding="ascii").splitlines(keepends=True)
    ranks.write_text("".join(lines) + lines[256].replace(" 256", " 258"), encoding="ascii")
    with pytest.raises(BPEInputError, match=rf"{ranks}:259: the token b'ab' is listed twice, at ranks 256 and 258"):
        train_bpe(text, 300, [], start_from=ranks)


def test_ids_past_what_a_tokenizer_loads_are_refused_at_the_base(tmp_path: Path) -> None:
    text = tmp_path / "text.txt"
    text.write_text("ab ab<s>", encoding="utf-8")
    merges = [(b"a", b"b")]
    # The largest id Tokenizer loads: a base may hold it, and its new tokens may end there.
    below = byte_vocab() | {256: b"ab", MAX_TOKEN_ID - 1: b"<s>"}
    vocab, new_merges = train_bpe(text, len(below) + 1, ["<s>", "<t>"], start_from=(below, merges))
    assert vocab[MAX_TOKEN_ID] == b"<t>"
    assert Tokenizer(vocab, new_merges, ["<s>", "<t>"]).decode([MAX_TOKEN_ID - 1, 97]) == "<s>a"
    at_limit = byte_vocab() | {256: b"ab", MAX_TOKEN_ID: b"<s>"}
    assert train_bpe(text, len(at_limit), ["<s>"], start_from=(at_limit, merges))[0][MAX_TOKEN_ID] == b"<s>"
    with pytest.raises(BPEInputError, match=r"new tokens would take ids up to 4,294,967,295 .* \(4,294,967,294"):
        train_bpe(text, len(at_limit) + 1, ["<s>", "<t>"], start_from=(at_limit, merges))
    # A base token past it (2**40): refused when the base is read, not after training by the loader.
    past = byte_vocab() | {256: b"ab", 2**40: b"<s>"}
    with pytest.raises(BPEInputError, match=r"b'<s>' is at id 1,099,511,627,776, past the largest id"):
        train_bpe(text, 300, ["<s>"], start_from=(past, merges))
    base = tmp_path / "base"
    base.mkdir()
    (base / "vocab.pkl").write_bytes(pickle.dumps(past))
    (base / "merges.pkl").write_bytes(pickle.dumps(merges))
    out = tmp_path / "out"
    argv = ["auto", str(out), "-d", str(text), "-v", "300", "-q", "--special", "<s>"]
    assert cli_main([*argv, "--start-from", str(base / "vocab.pkl"), str(base / "merges.pkl")]) == 2
    assert not out.exists()


def test_start_from_values_that_are_no_base_are_named(tmp_path: Path) -> None:
    text = tmp_path / "text.txt"
    text.write_text("ab ab", encoding="utf-8")
    accepted = r"start_from must be \(vocab, merges\) as train_bpe returns them .*a path as str or os\.PathLike"
    with pytest.raises(BPEInputError, match=accepted + r".*; got \(list, list\)"):
        train_bpe(text, 300, [], start_from=([1], []))  # type: ignore[arg-type]
    with pytest.raises(BPEInputError, match=accepted + r".*; got \(bytes, bytes\)"):
        train_bpe(text, 300, [], start_from=(b"vocab.json", b"merges.txt"))  # type: ignore[arg-type]
    for empty in ("", ("", str(text))):
        with pytest.raises(BPEInputError, match="start_from: the path is empty"):
            train_bpe(text, 300, [], start_from=empty)  # type: ignore[arg-type]
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(BPEInputError, match=rf"start_from: {fifo} is not a tokenizer file: not a regular file"):
        train_bpe(text, 300, [], start_from=fifo)
    with pytest.raises(BPEInputError, match="not a regular file"):
        train_bpe(text, 300, [], start_from=(fifo, text))


@pytest.mark.parametrize(
    ("given", "expected"),
    [("", "start_from: the path is empty"), ("/dev/zero", "start_from: /dev/zero is not a tokenizer file")],
)
def test_the_command_names_an_empty_or_device_start_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], given: str, expected: str
) -> None:
    if given and not Path(given).exists():
        pytest.skip(f"{given} does not exist here")
    text = tmp_path / "text.txt"
    text.write_text("ab ab", encoding="utf-8")
    out = tmp_path / "out"
    assert cli_main(["auto", str(out), "-d", str(text), "-q", "--start-from", given]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: {expected}") and error.count("\n") == 1, error
    assert not out.exists()


def test_count_files_and_dask_from_the_command(tmp_path: Path, small_runs: dict) -> None:
    from cs336_basics.commands.count_cli import main as count_main

    corpus, base = str(small_runs["corpus"]), str(small_runs["base"])
    expected = read_set(small_runs["at_once"])
    assert count_main([corpus, "-o", str(tmp_path / "c.counts"), "-q"]) == 0
    assert cli_main(["auto", str(tmp_path / "counted"), "--counts", str(tmp_path / "c.counts"), "-v", "600", "-q",
                     "--start-from", base]) == 0  # fmt: skip
    assert read_set(tmp_path / "counted") == expected
    pytest.importorskip("distributed", reason="Dask is an optional extra: pip install -e '.[cluster]'")
    assert cli_main(["auto", str(tmp_path / "dask"), "-d", corpus, "--cluster", "local:2", "-v", "600", "-q",
                     "--start-from", base]) == 0  # fmt: skip
    assert read_set(tmp_path / "dask") == expected


def test_a_huge_word_starts_as_the_base_encodes_it(tmp_path: Path, trainer: str) -> None:
    # One pre-token of 100,001 bytes (the native loop encodes it with a heap, not pass after pass),
    # and a short one where (a, a) overlaps: "aaa" is [aa, a].
    path = tmp_path / "text.txt"
    path.write_text("a" * 100_001 + " aaa b aaa", encoding="utf-8")
    merges = [(b"a", b"a"), (b"aa", b"aa"), (b"aaaa", b"aaaa")]
    vocab = byte_vocab() | {256: b"aa", 257: b"aaaa", 258: b"a" * 8}
    expected = train_bpe(path, 266, [], trainer="bpe_v1", start_from=(vocab, merges))
    assert expected[1][3] == (b"a" * 8, b"a" * 8)  # the huge word is 12,500 of them and "a"
    assert train_bpe(path, 266, [], trainer=trainer, start_from=(vocab, merges)) == expected


def test_the_command_refuses_a_size_below_the_base_before_training(
    tmp_path: Path, small_runs: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code = cli_main(["auto", str(out), "-v", "280,600", "-d", str(small_runs["corpus"]), "-q",
                     "--start-from", str(small_runs["base"])])  # fmt: skip
    assert code == 2
    assert "vocab_size=280 is too small to start from" in capsys.readouterr().err
    assert not out.exists()


# ---------------------------------------------------------------------------------------------
# The tools' own output as bases: their first half of merges, then ours, is all of theirs


@pytest.mark.parametrize("corpus", ["ties", "real_mix_64k"])
def test_going_on_from_hf_and_rustbpe_halfway_gives_their_whole_output(
    trainer: str, corpus: str, tmp_path: Path
) -> None:
    from tests.test_references import hf_merges, hf_vocab, load, rustbpe_ranks
    from tests.test_references import write_corpus as write_reference_corpus

    path = write_reference_corpus(tmp_path, corpus)
    model = load(corpus, "hf-iterator")["model"]
    half = len(model["merges"]) // 2
    document = {
        "added_tokens": [{"id": 0, "content": EOT, "special": True}],
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False},
        "model": {
            "type": "BPE",
            "vocab": {text: token_id for text, token_id in model["vocab"].items() if token_id < 257 + half},
            "merges": model["merges"][:half],
        },
    }
    (tmp_path / "tokenizer.json").write_text(json.dumps(document), encoding="utf-8")
    expected = hf_vocab(corpus, "hf-iterator")
    got = train_bpe(path, len(expected), SPECIALS, trainer=trainer, like="hf", start_from=tmp_path / "tokenizer.json")
    assert got == (expected, hf_merges(corpus, "hf-iterator"))

    ranks = rustbpe_ranks(corpus)
    by_rank = {rank: token for token, rank in ranks.items()}
    half = (len(ranks) - 256) // 2
    save_tiktoken_ranks(tmp_path / "rustbpe.tiktoken", {rank: by_rank[rank] for rank in range(256 + half)})
    vocab, _ = train_bpe(
        path, len(ranks) + 1, SPECIALS, trainer=trainer, like="rustbpe", start_from=tmp_path / "rustbpe.tiktoken"
    )
    assert vocab == {**by_rank, len(ranks): EOT.encode()}  # a rank file holds no special token: it is new


def test_the_timing_script_runs_both_and_gives_the_ratio(small_runs: dict) -> None:
    import subprocess
    import sys

    script = Path(__file__).resolve().parent.parent / "scripts" / "bench_start_from.py"
    arguments = ["--corpus", str(small_runs["corpus"]), "--start-from", str(small_runs["base"]), "--new", "50"]
    done = subprocess.run(
        [sys.executable, str(script), *arguments, "--rounds", "2", "--trainer", "bpe_v2"],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    lines = done.stdout.splitlines()
    assert lines[0].startswith("bpe_v2 on corpus.en") and "300 tokens" in lines[0]
    assert [line.split(":")[0] for line in lines[1:]] == ["round 1", "round 2", "median"]
    assert "ratio" in lines[-1] and "CPU ratio" in lines[-1]


# ---------------------------------------------------------------------------------------------
# The base's pattern


def test_a_base_pattern_carries_over_and_a_contradiction_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "corpus.txt"
    text = "HeLLo WORLDs, it's 2024/25 don'T\n" * 40 + EOT + "Nouns AND Verbs 123456\n" * 30
    corpus.write_text(text, encoding="utf-8")
    base = tmp_path / "base"
    assert cli_main(["auto", str(base), "-d", str(corpus), "-v", "280", "--pattern", "o200k", "-q"]) == 0
    at_once = train_bpe(corpus, 320, SPECIALS, pattern="o200k")
    assert at_once != train_bpe(corpus, 320, SPECIALS)  # the pattern shows in the merges
    # Without a pattern, a run from the base trains with o200k and records it.
    went_on = ["auto", str(tmp_path / "on"), "-d", str(corpus), "-v", "320", "-q", "--start-from", str(base)]
    assert cli_main(went_on) == 0
    assert read_set(tmp_path / "on") == at_once
    assert json.loads((tmp_path / "on" / "bpe_run.json").read_text(encoding="utf-8"))["pattern"]["name"] == "o200k"
    assert train_bpe(corpus, 320, SPECIALS, start_from=base) == at_once
    documents = corpus.read_text(encoding="utf-8").split(EOT)
    assert train_bpe_from_iterator(documents, 320, SPECIALS, start_from=base) == at_once
    counts = count_words_in_text(corpus.read_text(encoding="utf-8"), SPECIALS, pattern="o200k")
    assert train_bpe_from_counts(dict(counts), 320, SPECIALS, start_from=base) == at_once
    # Saying it again is fine; another pattern, or a preset's, is refused naming both.
    assert train_bpe(corpus, 320, SPECIALS, start_from=base, pattern="o200k_base") == at_once
    for keywords in ({"pattern": "gpt2"}, {"like": "hf"}):
        with pytest.raises(BPEInputError) as refused:
            train_bpe(corpus, 320, SPECIALS, start_from=base, **keywords)
        message = str(refused.value)
        assert "o200k" in message and "gpt2" in message and str(base) in message and "\n" not in message
    assert cli_main(["auto", str(tmp_path / "no"), "-d", str(corpus), "-v", "320", "-q", "--start-from", str(base),
                     "--pattern", "cl100k"]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "o200k" in err and "cl100k" in err
    assert not (tmp_path / "no" / "bpe_run.json").exists()
    # Count files made with another pattern than the base's are refused, naming both.
    from cs336_basics.commands.count_cli import main as count_main

    assert count_main([str(corpus), "-o", str(tmp_path / "gpt2.counts"), "-q"]) == 0
    assert cli_main(["auto", str(tmp_path / "c"), "--counts", str(tmp_path / "gpt2.counts"), "-v", "320", "-q",
                     "--start-from", str(base)]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "o200k" in err and "gpt2" in err
