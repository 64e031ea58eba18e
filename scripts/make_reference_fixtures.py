#!/usr/bin/env python3
"""Write the reference fixtures of tests/test_references.py: what rustbpe and HF tokenizers train on a
few small corpora, with each tool's version, call and settings, and the SHA-256 of its input.

    pip install rustbpe==0.1.0 tokenizers==0.23.3  # the versions the fixtures record (gigabpe optional)
    python scripts/make_reference_fixtures.py  # --corpus ../shared/corpus/real_mix.txt.gz --out tests/data/references

Three calls per corpus, each into `<corpus>.<call>.json`:
- `rustbpe`: `rustbpe.Tokenizer().train_from_iterator(documents, vocab_size)` with its own pattern;
  `get_mergeable_ranks()` (tokens in rank order) and `get_pattern()`.
- `hf-iterator`: HF `BpeTrainer` with `ByteLevel(add_prefix_space=False)`, `initial_alphabet` the full
  byte alphabet, `min_frequency=0` and `<|endoftext|>`, fed the documents (`train_from_iterator`);
  tokenizer.json's `model.vocab` and `model.merges`.
- `hf-files`: the same tokenizer with a default `BpeTrainer` (and `<|endoftext|>`) trained with
  `tokenizer.train([path])` on the corpus file itself; its `model.vocab` and `model.merges`. Where gigabpe
  is installed, its `train_tokenizer` on the same file is compared and the outcome recorded.
- `hf-iterator-limits`, `hf-files-limits`: those two calls with HF's `min_frequency` and
  `max_token_length` set (LIMITS), so that training stops early and long tokens are left out.

The documents are the text split on `<|endoftext|>`, empty pieces dropped: what our trainers count
when given that special token. The corpora are a small hand-made one with many ties (written into its
fixtures) and slices of the shared real_mix corpus, which are not committed: `corpus_slice` rebuilds
them, and the tests call it through this file.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import hashlib
import json
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = REPO_ROOT.parent / "shared" / "corpus" / "real_mix.txt.gz"
DEFAULT_OUT = REPO_ROOT / "tests" / "data" / "references"
ENDOFTEXT = "<|endoftext|>"
# real_mix ends every document with this line.
DOCUMENT_END = (ENDOFTEXT + "\n").encode("utf-8")

# Ties everywhere: every word occurs once or twice, and the bytes sort differently by value (rustbpe),
# by byte-level character (HF: space, tab and newline last) and as CS336 compares them.
TIES_DOCUMENTS = ["zy !!", "zy !!\n", "ab ba\tab", "\u00e9\u00e8 12 3!", "\t!\t\n\n", "Ab aB 'll 'LL"]
# Documents that end in whitespace after a newline, where rustbpe's own pattern and tiktoken's cl100k
# pat_str (its `\s++$`) split otherwise (docs/REFERENCES.md).
TRAILING_DOCUMENTS = ["ab\n  ", "ab\n  ", "ab\n \t", "cd  \n\t ", "ef \n", "x\n\n   ", "ab\n  "]

# name -> (start in the decompressed corpus, bytes, merges)
SLICES = {"real_mix_64k": (0, 64 << 10, 400), "real_mix_256k_at_10m": (10 << 20, 256 << 10, 1000)}
TIES_MERGES = 60
# BpeTrainer's min_frequency and max_token_length for the -limits calls: the hand-made corpora count
# each pair once or twice; the slices stop before their merges run out.
LIMITS = {"ties": (2, 3), "trailing_whitespace": (2, 3), "real_mix_64k": (12, 6), "real_mix_256k_at_10m": (20, 7)}


def corpus_slice(source: str | Path, start: int, size: int) -> bytes:
    """At most `size` bytes of the decompressed `source`: from the first document that starts at or after
    `start` (the corpus's start for 0) to the end of the last whole document."""
    with gzip.open(source, "rb") as file:
        data = file.read(start + size + (1 << 20))
    begin = 0 if start == 0 else data.index(DOCUMENT_END, start - len(DOCUMENT_END) + 1) + len(DOCUMENT_END)
    piece = data[begin : begin + size]
    return piece[: piece.rindex(DOCUMENT_END) + len(DOCUMENT_END)]


def documents(text: str) -> list[str]:
    """The documents the iterator calls get: the text between special tokens, empty pieces dropped."""
    return [document for document in text.split(ENDOFTEXT) if document]


def _hand_made(name: str, docs: list[str]) -> tuple[dict, str, int]:
    text = ENDOFTEXT.join(docs)
    return {"name": name, "text": text}, text, TIES_MERGES


def _rustbpe(docs: list[str], num_merges: int) -> dict:
    import rustbpe

    tokenizer = rustbpe.Tokenizer()
    tokenizer.train_from_iterator(iter(docs), vocab_size=256 + num_merges)
    ranks = sorted(((bytes(token), rank) for token, rank in tokenizer.get_mergeable_ranks()), key=lambda kv: kv[1])
    assert [rank for _, rank in ranks] == list(range(len(ranks))), "ranks are not 0..n-1"
    return {
        "tool": "rustbpe",
        "version": version("rustbpe"),
        "call": "rustbpe.Tokenizer().train_from_iterator(iter(documents), vocab_size=VOCAB_SIZE)",
        "settings": {"vocab_size": 256 + num_merges},
        "pattern": tokenizer.get_pattern(),
        # get_mergeable_ranks() in rank order: entry i is the token of rank i, base64.
        "mergeable_ranks": [base64.b64encode(token).decode("ascii") for token, _ in ranks],
    }


def _hf_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    return tokenizer


def _hf_model(tokenizer) -> dict:
    document = json.loads(tokenizer.to_str())
    return {"vocab": document["model"]["vocab"], "merges": document["model"]["merges"]}


def _limits_call(limits: tuple[int, int] | None) -> tuple[dict, str]:
    """BpeTrainer's keywords for `limits` (min_frequency, max_token_length), and how the call spells them."""
    if limits is None:
        return {}, ""
    keywords = {"min_frequency": limits[0], "max_token_length": limits[1]}
    return keywords, "".join(f", {name}={value}" for name, value in keywords.items())


def _hf_iterator(docs: list[str], num_merges: int, limits: tuple[int, int] | None = None) -> dict:
    from tokenizers import pre_tokenizers, trainers

    tokenizer = _hf_tokenizer()
    vocab_size = 256 + 1 + num_merges
    keywords, spelled = _limits_call(limits)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=keywords.pop("min_frequency", 0),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[ENDOFTEXT],
        show_progress=False,
        **keywords,
    )
    tokenizer.train_from_iterator(docs, trainer)
    minimum = "" if limits else ", min_frequency=0"
    return {
        "tool": "tokenizers",
        "version": version("tokenizers"),
        "call": (
            "tokenizer = Tokenizer(models.BPE()); "
            "tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False); "
            f"tokenizer.train_from_iterator(documents, trainers.BpeTrainer(vocab_size=VOCAB_SIZE{minimum}{spelled}, "
            "initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=['<|endoftext|>']))"
        ),
        "settings": {"vocab_size": vocab_size, "special_tokens": [ENDOFTEXT], "min_frequency": 0, **_settings(limits)},
        "model": _hf_model(tokenizer),
    }


def _settings(limits: tuple[int, int] | None) -> dict:
    return {} if limits is None else {"min_frequency": limits[0], "max_token_length": limits[1]}


def _hf_files(text: str, vocab_size: int, limits: tuple[int, int] | None = None) -> dict:
    from tokenizers import trainers

    tokenizer = _hf_tokenizer()
    keywords, spelled = _limits_call(limits)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[ENDOFTEXT], show_progress=False, **keywords)
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "corpus.txt"
        path.write_bytes(text.encode("utf-8"))
        tokenizer.train([str(path)], trainer)
        model = _hf_model(tokenizer)
        fixture = {
            "tool": "tokenizers",
            "version": version("tokenizers"),
            "call": (
                "tokenizer = Tokenizer(models.BPE()); "
                "tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False); "
                f"tokenizer.train([path], trainers.BpeTrainer(vocab_size=VOCAB_SIZE{spelled}, "
                "special_tokens=['<|endoftext|>']))"
            ),
            "settings": {"vocab_size": vocab_size, "special_tokens": [ENDOFTEXT], **_settings(limits)},
            "model": model,
        }
        gigabpe_same = None if limits else _gigabpe_same(path, vocab_size, model)
    if gigabpe_same is not None:
        fixture["gigabpe"] = gigabpe_same
    return fixture


def _gigabpe_same(path: Path, vocab_size: int, model: dict) -> dict | None:
    """Whether gigabpe's tokenizer.json for the same file has HF's model (None when it is not installed)."""
    try:
        import gigabpe
    except ImportError:
        return None
    output = path.with_name("gigabpe.json")
    gigabpe.train_tokenizer(
        [str(path)], vocab_size=vocab_size, output=str(output), pretokenizer="bytelevel", special_tokens=[ENDOFTEXT]
    )
    theirs = json.loads(output.read_text(encoding="utf-8"))["model"]
    return {
        "version": version("gigabpe"),
        "call": "gigabpe.train_tokenizer([path], vocab_size=VOCAB_SIZE, output=..., pretokenizer='bytelevel', "
        "special_tokens=['<|endoftext|>'])",
        "same_vocab": theirs["vocab"] == model["vocab"],
        "same_merges": [list(pair) for pair in theirs["merges"]] == [list(pair) for pair in model["merges"]],
    }


def _write(path: Path, fixture: dict) -> None:
    path.write_text(json.dumps(fixture, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="the real_mix corpus (.txt.gz)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the fixtures go")
    args = parser.parse_args(argv)
    corpora = {
        "ties": _hand_made("ties", TIES_DOCUMENTS),
        "trailing_whitespace": _hand_made("trailing_whitespace", TRAILING_DOCUMENTS),
    }
    for name, (start, size, merges) in SLICES.items():
        data = corpus_slice(args.corpus, start, size)
        described = {
            "name": name,
            "source": args.corpus.name,
            "start": start,
            "size": size,
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "rebuild": "corpus_slice(source, start, size) in scripts/make_reference_fixtures.py",
        }
        corpora[name] = (described, data.decode("utf-8"), merges)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, (described, text, merges) in corpora.items():
        docs = documents(text)
        described = {**described, "documents": "text.split('<|endoftext|>'), empty pieces dropped"}
        made = {
            "rustbpe": _rustbpe(docs, merges),
            "hf-iterator": _hf_iterator(docs, merges),
            "hf-files": _hf_files(text, 256 + 1 + merges),
            "hf-iterator-limits": _hf_iterator(docs, merges, LIMITS[name]),
            "hf-files-limits": _hf_files(text, 256 + 1 + merges, LIMITS[name]),
        }
        for call, fixture in made.items():
            _write(args.out / f"{name}.{call}.json", {"corpus": described, **fixture})
            print(f"{name}.{call}.json", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
