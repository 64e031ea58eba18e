"""Known answers from the tools themselves: the presets train what rustbpe 0.1.0 and HF tokenizers 0.23.3
trained on the same corpora (tests/data/references, written by scripts/make_reference_fixtures.py; see
docs/REFERENCES.md). The real_mix slices are rebuilt from the shared corpus, checked by their SHA-256;
their tests skip when it is absent. Through `bpe_v1.merge` + `assemble_vocab` now, and through
`train_bpe(..., like=...)` for every version once the trainers take `like`."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import sys
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

from cs336_basics import BPEInputError, bpe_v1, train_bpe, train_bpe_from_iterator, trainer_status
from cs336_basics.outputs.export import _tiktoken_ranks, hf_tokenizer_json
from cs336_basics.outputs.serialization import decode_token, gpt2_bytes_to_unicode
from cs336_basics.phases import MergeRules
from cs336_basics.rules.contract import ENDOFTEXT, Merges, Vocab
from cs336_basics.rules.pattern import resolve_pattern
from cs336_basics.rules.presets import resolve_preset
from cs336_basics.rules.vocab_layout import assemble_vocab
from tests.support import REPO_ROOT, SHARED_CORPUS

REFERENCES = REPO_ROOT / "tests" / "data" / "references"
# The largest corpus runs through every rule in the exhaustive tier; the default tier trains on it whole
# through the default trainer (test_largest_corpus_through_the_default_trainer).
CORPORA = ("ties", "real_mix_64k", pytest.param("real_mix_256k_at_10m", marks=pytest.mark.exhaustive))
# Documents ending in whitespace after a newline, where rustbpe's pattern is not cl100k's (below).
TRAILING = "trailing_whitespace"
# The corpora every trainer version trains on through like=; the largest goes whole through the default
# trainer only, and through bpe_v1.merge to its first BPE_V1_MERGES merges (its 30 ms a merge add up). A run's
# first k merges are the run of k merges, so a prefix is checked exactly.
SMALL_CORPORA = ("ties", "real_mix_64k", TRAILING)
BPE_V1_MERGES = 100

_spec = importlib.util.spec_from_file_location(
    "make_reference_fixtures", REPO_ROOT / "scripts" / "make_reference_fixtures.py"
)
fixture_script = importlib.util.module_from_spec(_spec)
sys.modules["make_reference_fixtures"] = fixture_script
_spec.loader.exec_module(fixture_script)


@cache
def load(corpus: str, call: str) -> dict:
    return json.loads((REFERENCES / f"{corpus}.{call}.json").read_text(encoding="utf-8"))


@cache
def _corpus_text(corpus: str) -> str | None:
    described = load(corpus, "rustbpe")["corpus"]
    if "text" in described:
        return described["text"]
    source = SHARED_CORPUS / described["source"]
    if not source.exists():
        return None
    data = fixture_script.corpus_slice(source, described["start"], described["size"])
    assert hashlib.sha256(data).hexdigest() == described["sha256"], f"{source} is not the corpus the fixtures used"
    return data.decode("utf-8")


def corpus_text(corpus: str) -> str:
    """The corpus the fixtures were made from; skips where the shared corpus is absent."""
    text = _corpus_text(corpus)
    if text is None:
        pytest.skip(f"the shared corpus {SHARED_CORPUS / 'real_mix.txt.gz'} is not here to rebuild {corpus}")
    return text


def oracle_merges(corpus: str, word_counts: dict[bytes, int], num_merges: int, tie_break: str) -> Merges:
    """bpe_v1's merges, all of them or, on the largest corpus, the first BPE_V1_MERGES."""
    if corpus not in SMALL_CORPORA:
        num_merges = min(num_merges, BPE_V1_MERGES)
    return bpe_v1.merge(word_counts, num_merges, rules=MergeRules(tie_break))


def counts(pieces: list[str], pattern: str) -> dict[bytes, int]:
    compiled = resolve_pattern(pattern).compiled
    counted: Counter[bytes] = Counter()
    for piece in pieces:
        counted.update(match.encode("utf-8") for match in compiled.findall(piece))
    return dict(counted)


def rustbpe_ranks(corpus: str) -> dict[bytes, int]:
    return {base64.b64decode(token): rank for rank, token in enumerate(load(corpus, "rustbpe")["mergeable_ranks"])}


def hf_token(text: str) -> bytes:
    return ENDOFTEXT.encode() if text == ENDOFTEXT else decode_token(text)


def hf_vocab(corpus: str, call: str) -> Vocab:
    return {token_id: hf_token(text) for text, token_id in load(corpus, call)["model"]["vocab"].items()}


def hf_merges(corpus: str, call: str) -> Merges:
    merges = load(corpus, call)["model"]["merges"]
    pairs = [merge.split(" ") if isinstance(merge, str) else merge for merge in merges]
    return [(decode_token(left), decode_token(right)) for left, right in pairs]


def below(vocab: Vocab, size: int) -> Vocab:
    """The entries of ids below `size`: a vocabulary of fewer merges."""
    return {token_id: token for token_id, token in vocab.items() if token_id < size}


def merged_tokens(merges: Merges) -> list[bytes]:
    return [left + right for left, right in merges]


# ---------------------------------------------------------------------------------------------
# Known answers by hand


def test_the_three_rules_take_three_different_first_merges() -> None:
    # "zy !!" is the words "zy" and " !!": the pairs (z, y), (space, !) and (!, !) once each, a three-way tie.
    # CS336 takes the greatest bytes, (z, y); rustbpe the smallest ids, (32, 33) = (space, !); HF the
    # smallest of its ids, where the byte-level characters sort by code point: "!" is U+0021, the
    # first, and the space is "Ġ" (U+0120), after every printable byte, so (!, !).
    word_counts = counts(["zy !!"], "gpt2")
    assert word_counts == {b"zy": 1, b" !!": 1}
    assert bpe_v1.merge(word_counts, 1, rules=MergeRules("cs336")) == [(b"z", b"y")]
    assert bpe_v1.merge(word_counts, 1, rules=MergeRules("smallest-id")) == [(b" ", b"!")]
    assert bpe_v1.merge(word_counts, 1, rules=MergeRules("hf")) == [(b"!", b"!")]


def test_the_tools_take_those_first_merges() -> None:
    # The "ties" corpus starts with the document "zy !!"; each tool's own first merge is the one above.
    assert base64.b64decode(load("ties", "rustbpe")["mergeable_ranks"][256]) == b" !"
    assert hf_merges("ties", "hf-iterator")[0] == (b"!", b"!")


# ---------------------------------------------------------------------------------------------
# rustbpe


@pytest.mark.parametrize("corpus", CORPORA)
def test_rustbpe_patterns_make_the_same_words(corpus: str) -> None:
    # rustbpe's own pattern string (get_pattern()) is not tiktoken's cl100k pat_str, but splits alike.
    text = corpus_text(corpus)
    documents = fixture_script.documents(text)
    assert counts(documents, load(corpus, "rustbpe")["pattern"]) == counts(documents, "cl100k")


@pytest.mark.parametrize("corpus", CORPORA)
def test_smallest_id_on_cl100k_is_rustbpe(corpus: str) -> None:
    check_rustbpe(corpus, resolve_preset("rustbpe").pattern)


def test_rustbpe_splits_trailing_whitespace_otherwise() -> None:
    # cl100k's `\s++$` takes a document's last whitespace run whole; rustbpe's pattern lacks it and ends
    # the run at the newline (`\s*[\r\n]`).
    rustbpe_pattern = resolve_pattern(load(TRAILING, "rustbpe")["pattern"]).compiled
    assert rustbpe_pattern.findall("ab\n  ") == ["ab", "\n", "  "]
    assert resolve_pattern("cl100k").compiled.findall("ab\n  ") == ["ab", "\n  "]
    # With its own pattern, the tie-break and the layout give rustbpe's ranks there too.
    check_rustbpe(TRAILING, load(TRAILING, "rustbpe")["pattern"])


def test_rustbpe_preset_on_trailing_whitespace() -> None:
    assert resolve_pattern(resolve_preset("rustbpe").pattern).regex == load(TRAILING, "rustbpe")["pattern"]
    check_rustbpe(TRAILING, resolve_preset("rustbpe").pattern)


def check_rustbpe(corpus: str, pattern: str) -> None:
    """bpe_v1 with rustbpe's tie-break and layout, counting with `pattern`, gives rustbpe's ranks."""
    ranks = rustbpe_ranks(corpus)
    preset = resolve_preset("rustbpe")
    word_counts = counts(fixture_script.documents(corpus_text(corpus)), pattern)
    merges = oracle_merges(corpus, word_counts, len(ranks) - 256, preset.tie_break)
    ranks = dict(sorted(ranks.items(), key=lambda item: item[1])[: 256 + len(merges)])
    assert merged_tokens(merges) == list(ranks)[256:]
    vocab = assemble_vocab([ENDOFTEXT], merges, preset.layout)
    assert {token: token_id for token_id, token in vocab.items() if token_id < len(ranks)} == ranks
    assert vocab[len(ranks)] == ENDOFTEXT.encode()  # after the merges, as nanochat adds it
    # The tiktoken export of that vocabulary is rustbpe's get_mergeable_ranks(), line for line.
    lines = _tiktoken_ranks(vocab, [ENDOFTEXT]).decode("ascii").splitlines()
    assert lines == [f"{base64.b64encode(token).decode()} {rank}" for token, rank in ranks.items()]


# ---------------------------------------------------------------------------------------------
# HF tokenizers: train_from_iterator over the documents, the full byte alphabet


@pytest.mark.parametrize("corpus", [*CORPORA, TRAILING])
def test_hf_rule_on_gpt2_is_hf_train_from_iterator(corpus: str) -> None:
    expected = hf_merges(corpus, "hf-iterator")
    preset = resolve_preset("hf")
    word_counts = counts(fixture_script.documents(corpus_text(corpus)), preset.pattern)
    merges = oracle_merges(corpus, word_counts, len(expected), preset.tie_break)
    assert merges == expected[: len(merges)]
    vocab = assemble_vocab([ENDOFTEXT], merges, preset.layout)
    assert vocab == below(hf_vocab(corpus, "hf-iterator"), len(vocab))
    if len(merges) == len(expected):
        # Exported, the model is HF's own: every token's text and id, and the merges.
        model = hf_tokenizer_json(vocab, merges, [ENDOFTEXT])["model"]
        assert model["vocab"] == load(corpus, "hf-iterator")["model"]["vocab"]
        assert [merge.split(" ") for merge in model["merges"]] == load(corpus, "hf-iterator")["model"]["merges"]


# ---------------------------------------------------------------------------------------------
# HF tokenizers: tokenizer.train(files) (what gigabpe reproduces), explained in docs/REFERENCES.md


def lines(text: str) -> list[str]:
    """The file as HF's `train` reads it: lines split after each "\\n" only, the "\\n" kept."""
    pieces = text.split("\n")
    return [piece + "\n" for piece in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])


def seen_alphabet_vocab(special_tokens: list[str], word_counts: dict[bytes, int], merges: Merges) -> Vocab:
    """HF's vocabulary from the characters seen: the special tokens, the bytes that occur in the words in
    the code-point order of their byte-level characters, the merges."""
    characters = gpt2_bytes_to_unicode()
    seen = sorted({byte for word in word_counts for byte in word}, key=characters.__getitem__)
    order = [token.encode() for token in special_tokens] + [bytes([byte]) for byte in seen] + merged_tokens(merges)
    return dict(enumerate(order))


@pytest.mark.parametrize("corpus", [*CORPORA, TRAILING])
def test_hf_train_files_is_lines_unsplit_and_the_seen_alphabet(corpus: str) -> None:
    # Three differences from train_from_iterator over documents, and no other: each line is pre-tokenized
    # alone; "<|endoftext|>" in the text is text (special tokens are not split out); the alphabet is the
    # bytes seen, so more merges fit the same vocab_size and every id moves. Ties as HF breaks them.
    text = corpus_text(corpus)
    expected = hf_merges(corpus, "hf-files")
    word_counts = counts(lines(text), "gpt2")
    merges = oracle_merges(corpus, word_counts, len(expected), "hf")
    assert merges == expected[: len(merges)]
    vocab = seen_alphabet_vocab([ENDOFTEXT], word_counts, merges)
    assert vocab == below(hf_vocab(corpus, "hf-files"), len(vocab))
    if "text" not in load(corpus, "hf-files")["corpus"]:  # the hand-made corpora run out of pairs first
        assert len(hf_vocab(corpus, "hf-files")) == load(corpus, "hf-files")["settings"]["vocab_size"]
    gigabpe = load(corpus, "hf-files").get("gigabpe")
    if gigabpe is not None:  # where the script had gigabpe, it wrote the same model
        assert gigabpe["same_vocab"] and gigabpe["same_merges"]


def test_hf_train_files_differs_from_train_from_iterator() -> None:
    # Counting by lines and counting the special token's text each change the merges of real text.
    text = corpus_text("real_mix_64k")
    expected = hf_merges("real_mix_64k", "hf-files")[:150]  # they differ by then
    documents = fixture_script.documents(text)

    def merges_of(pieces: list[str]) -> Merges:
        return bpe_v1.merge(counts(pieces, "gpt2"), len(expected), rules=MergeRules("hf"))

    assert merges_of(documents) != expected
    assert merges_of([text]) != expected  # the special token's text counted, but not by lines
    lines_of_documents = merges_of([line for document in documents for line in lines(document)])
    assert lines_of_documents != expected  # by lines, but the special token split out
    assert (b"<", b"|") in expected and (b"<", b"|") not in lines_of_documents


# ---------------------------------------------------------------------------------------------
# Through the trainers: train_bpe(..., like=) on every version


def write_corpus(directory: Path, corpus: str) -> Path:
    path = directory / f"{corpus}.txt"
    path.write_bytes(corpus_text(corpus).encode("utf-8"))
    return path


@pytest.mark.parametrize("corpus", ["ties", "real_mix_64k", TRAILING])
def test_train_bpe_like_rustbpe(trainer: str, corpus: str, tmp_path: Path) -> None:
    ranks = rustbpe_ranks(corpus)
    path = write_corpus(tmp_path, corpus)
    vocab, merges = train_bpe(path, len(ranks) + 1, [ENDOFTEXT], trainer=trainer, like="rustbpe")
    assert merged_tokens(merges) == sorted(ranks, key=ranks.__getitem__)[256:]
    assert vocab == {**{rank: token for token, rank in ranks.items()}, len(ranks): ENDOFTEXT.encode()}


@pytest.mark.parametrize("corpus", SMALL_CORPORA)
def test_train_bpe_like_hf(trainer: str, corpus: str, tmp_path: Path) -> None:
    expected = hf_vocab(corpus, "hf-iterator")
    path = write_corpus(tmp_path, corpus)
    vocab, merges = train_bpe(path, len(expected), [ENDOFTEXT], trainer=trainer, like="hf")
    assert merges == hf_merges(corpus, "hf-iterator")
    assert vocab == expected


@pytest.mark.parametrize("like", ["rustbpe", "hf"])
def test_largest_corpus_through_the_default_trainer(like: str, tmp_path: Path) -> None:
    corpus = "real_mix_256k_at_10m"
    documents = fixture_script.documents(corpus_text(corpus))
    if like == "rustbpe":
        ranks = rustbpe_ranks(corpus)
        vocab, merges = train_bpe_from_iterator(documents, len(ranks), [], like=like)
        assert vocab == {rank: token for token, rank in ranks.items()}
    else:
        expected = hf_vocab(corpus, "hf-iterator")
        vocab, merges = train_bpe(write_corpus(tmp_path, corpus), len(expected), [ENDOFTEXT], like=like)
        assert (vocab, merges) == (expected, hf_merges(corpus, "hf-iterator"))


@pytest.mark.parametrize(("like", "first"), [("cs336", (b"z", b"y")), ("rustbpe", (b" ", b"!")), ("hf", (b"!", b"!"))])
def test_each_preset_takes_its_tools_first_merge(trainer: str, like: str, first: tuple[bytes, bytes], tmp_path) -> None:
    path = tmp_path / "zy.txt"
    path.write_text("zy !!", encoding="utf-8")
    _, merges = train_bpe(path, 257, [], trainer=trainer, like=like)
    assert merges == [first]


# ---------------------------------------------------------------------------------------------
# like="hf-files" (HF's train(files)) and HF's min_frequency / max_token_length, on every version

LIMITED_CALLS = {"hf-iterator-limits": "hf", "hf-files-limits": "hf-files"}


def hf_settings(corpus: str, call: str) -> dict[str, object]:
    """The fixture's vocab_size, min_frequency and max_token_length as train_bpe's keywords."""
    settings = load(corpus, call)["settings"]
    keywords = {"vocab_size": settings["vocab_size"]}
    if "max_token_length" in settings:
        keywords.update(min_frequency=settings["min_frequency"], max_token_length=settings["max_token_length"])
    return keywords


def check_hf_model(vocab: Vocab, merges: Merges, corpus: str, call: str) -> None:
    """(vocab, merges) are HF's, and exported, tokenizer.json's model is HF's own, id for id."""
    assert merges == hf_merges(corpus, call)
    assert vocab == hf_vocab(corpus, call)
    model = hf_tokenizer_json(vocab, merges, [ENDOFTEXT])["model"]
    assert model["vocab"] == load(corpus, call)["model"]["vocab"]
    assert [merge.split(" ") for merge in model["merges"]] == load(corpus, call)["model"]["merges"]


@pytest.mark.parametrize("corpus", SMALL_CORPORA)
def test_train_bpe_like_hf_files(trainer: str, corpus: str, tmp_path: Path) -> None:
    path = write_corpus(tmp_path, corpus)
    settings = hf_settings(corpus, "hf-files")
    vocab, merges = train_bpe(path, settings.pop("vocab_size"), [ENDOFTEXT], trainer=trainer, like="hf-files")
    check_hf_model(vocab, merges, corpus, "hf-files")


@pytest.mark.parametrize("call", LIMITED_CALLS)
@pytest.mark.parametrize("corpus", SMALL_CORPORA)
def test_hf_limits_through_every_version(trainer: str, corpus: str, call: str, tmp_path: Path) -> None:
    path = write_corpus(tmp_path, corpus)
    settings = hf_settings(corpus, call)
    like = LIMITED_CALLS[call]
    vocab, merges = train_bpe(path, settings.pop("vocab_size"), [ENDOFTEXT], trainer=trainer, like=like, **settings)
    check_hf_model(vocab, merges, corpus, call)


@pytest.mark.parametrize("call", ["hf-files", *LIMITED_CALLS])
def test_largest_corpus_hf_files_and_limits_through_the_default_trainer(call: str, tmp_path: Path) -> None:
    corpus = "real_mix_256k_at_10m"
    path = write_corpus(tmp_path, corpus)
    settings = hf_settings(corpus, call)
    like = LIMITED_CALLS.get(call, "hf-files")
    vocab, merges = train_bpe(path, settings.pop("vocab_size"), [ENDOFTEXT], like=like, **settings)
    check_hf_model(vocab, merges, corpus, call)


def test_the_limits_change_hfs_output_here() -> None:
    # The fixtures with limits are not those without: training stops early, or long tokens are left out.
    for corpus in ("ties", "real_mix_64k", "real_mix_256k_at_10m"):  # reading the fixtures only: every tier
        for call, like in LIMITED_CALLS.items():
            plain = hf_merges(corpus, call.removesuffix("-limits"))
            limited = hf_merges(corpus, call)
            assert limited != plain[: len(limited)] or len(limited) < len(plain), (corpus, call, like)


@pytest.mark.skipif(not trainer_status()["bpe_v6"].available, reason="the native counter and loop are not built")
@pytest.mark.parametrize("num_chunks", [2, 7, 64])
def test_hf_files_counts_alike_in_any_number_of_chunks(num_chunks: int, tmp_path: Path) -> None:
    # Lines cut across chunks: the native counter's chunks (bpe_v7 on 2 workers) against bpe_v1's lines.
    corpus = "real_mix_64k"
    path = write_corpus(tmp_path, corpus)
    size = hf_settings(corpus, "hf-files")["vocab_size"]
    expected = train_bpe(path, size, [ENDOFTEXT], trainer="bpe_v6", like="hf-files", num_chunks=1)
    got = train_bpe(path, size, [ENDOFTEXT], like="hf-files", num_workers=2, num_chunks=num_chunks)
    assert got == expected == (hf_vocab(corpus, "hf-files"), hf_merges(corpus, "hf-files"))


def test_hf_files_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    with pytest.raises(BPEInputError, match="hf-files"):
        train_bpe_from_iterator(["a b"], 300, [], like="hf-files")


def test_hf_files_gives_every_size_of_one_run(tmp_path: Path) -> None:
    # -v a,b,c: each size is HF's vocabulary of that size, its ids after the bytes seen.
    corpus = "real_mix_64k"
    path = write_corpus(tmp_path, corpus)
    largest = hf_settings(corpus, "hf-files")["vocab_size"]
    sizes = [largest - 300, largest - 100, largest]
    by_size = train_bpe(path, None, [ENDOFTEXT], vocab_sizes=sizes, like="hf-files")
    for size in sizes:
        vocab, merges = by_size[size]
        assert len(vocab) == size and vocab == below(hf_vocab(corpus, "hf-files"), size)
        assert merges == hf_merges(corpus, "hf-files")[: len(merges)]
    # The layout of the bytes seen needs them, and no other layout takes them.
    for layout, alphabet in (("hf-files", None), ("hf", b"ab")):
        with pytest.raises(BPEInputError, match="alphabet"):
            assemble_vocab([ENDOFTEXT], [], layout, alphabet)
