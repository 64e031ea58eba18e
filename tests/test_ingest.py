"""Training from where the data lives: iterators of documents, compressed files, JSON lines, Parquet
and Arrow objects all give exactly what bpe_v1 gives on the equivalent plain text file (documents
joined by the first special token), for every trainer version."""

from __future__ import annotations

import builtins
import bz2
import gzip
import json
import lzma
import random
import threading
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cs336_basics import (
    BPEInputError,
    count_words,
    count_words_from_iterator,
    train_bpe,
    train_bpe_from_counts,
    train_bpe_from_iterator,
    train_from_iterator,
)
from cs336_basics.commands.cli import main as cli_main
from cs336_basics.commands.count_cli import count_inputs
from cs336_basics.commands.count_cli import main as count_main
from cs336_basics.rules.splitting import count_words_in_text

SPECIAL = ["<|endoftext|>"]
VOCAB_SIZE = 330

_PIECES = ["the", " cat", " sat", "hello", " world", "\n", "  ", "\n\n", "é", "über", " 42", "x1", "!!", "'s", "日本"]


def make_documents(seed: int = 0, count: int = 120) -> list[str]:
    """Small documents with the awkward cases: empty ones, whitespace runs, non-ASCII text, and the
    special token inside a document (split there, as in a file)."""
    rng = random.Random(seed)
    documents = []
    for index in range(count):
        pieces = [rng.choice(_PIECES) for _ in range(rng.randint(0, 40))]
        if index % 17 == 3:
            pieces.insert(len(pieces) // 2, SPECIAL[0])
        documents.append("".join(pieces) if index % 23 else "")
    return documents


DOCUMENTS = make_documents()


def write_plain(path: Path, documents: list[str], specials: list[str] = SPECIAL) -> Path:
    path.write_bytes(specials[0].join(documents).encode("utf-8"))
    return path


def counts_of_documents(documents: list[str], specials: list[str]) -> Counter[bytes]:
    """The oracle's counts of documents: joined by the first special token, or each on its own."""
    if specials:
        return count_words_in_text(specials[0].join(documents), specials)
    return sum((count_words_in_text(document, []) for document in documents), Counter())


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory):
    """bpe_v1 on the plain text file of DOCUMENTS, and that file."""
    plain = write_plain(tmp_path_factory.mktemp("plain") / "plain.txt", DOCUMENTS)
    return train_bpe(plain, VOCAB_SIZE, SPECIAL, trainer="bpe_v1"), plain


def test_iterator_matches_file(trainer: str, reference) -> None:
    expected, _ = reference
    assert train_bpe_from_iterator((document for document in DOCUMENTS), VOCAB_SIZE, SPECIAL, trainer=trainer) == (
        expected
    )


def test_iterator_accepts_utf8_bytes(reference) -> None:
    expected, _ = reference
    encoded = [document.encode("utf-8") for document in DOCUMENTS]
    assert train_bpe_from_iterator(encoded, VOCAB_SIZE, SPECIAL, trainer="bpe_v1") == expected


def test_iterator_counts_equal_file_counts_at_every_batch_size(reference) -> None:
    _, plain = reference
    expected = count_words(plain, SPECIAL)
    for batch_bytes in (1, 7, 100, 1 << 20):
        counted = count_words_from_iterator(iter(DOCUMENTS), SPECIAL, batch_bytes=batch_bytes)
        assert counted == expected, batch_bytes  # counts, special tokens and source bytes


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    # Pieces that make the special tokens, their overlaps and their halves across document joins.
    documents=st.lists(
        st.lists(st.sampled_from([*"ab c\n\t1é日'!<|>", "<|eot|>", "<|e"]), max_size=20).map("".join), max_size=12
    ),
    batch_bytes=st.integers(1, 64),
    with_special=st.booleans(),
)
def test_random_documents(tmp_path: Path, documents: list[str], batch_bytes: int, with_special: bool) -> None:
    specials = ["<|eot|>", "<|e"] if with_special else []
    counted = count_words_from_iterator(documents, specials, batch_bytes=batch_bytes)
    # Joined by the first special token, exactly as that file is counted; with no special token each
    # document on its own, nothing crossing a boundary.
    assert counted.counts == dict(counts_of_documents(documents, specials))


def test_no_special_tokens_keep_documents_apart(trainer: str) -> None:
    documents = ["abc", "abc", "ab", "cab"]
    summed = sum((count_words_in_text(document, []) for document in documents), Counter())
    expected = train_bpe_from_counts(dict(summed), 262, [], trainer="bpe_v1")
    assert train_bpe_from_iterator(documents, 262, [], trainer=trainer) == expected
    assert b"cab" not in count_words_from_iterator(["ab", "c", "ab"], []).counts  # not "abcab"


COMPRESSORS = {
    "gz": gzip.compress,
    "bz2": bz2.compress,
    "xz": lzma.compress,
}


def _compress(kind: str, data: bytes) -> bytes:
    if kind == "zst":
        zstandard = pytest.importorskip("zstandard", reason="zstd input needs the optional zstandard package")
        return zstandard.ZstdCompressor().compress(data)
    return COMPRESSORS[kind](data)


@pytest.mark.parametrize("kind", ["gz", "bz2", "xz", "zst"])
def test_compressed_file_matches_plain(trainer: str, reference, tmp_path: Path, kind: str) -> None:
    expected, plain = reference
    packed = tmp_path / f"corpus.txt.{kind}"
    packed.write_bytes(_compress(kind, plain.read_bytes()))
    assert train_bpe(packed, VOCAB_SIZE, SPECIAL, trainer=trainer) == expected
    # Detected by content, not by name.
    unnamed = tmp_path / "corpus.data"
    unnamed.write_bytes(packed.read_bytes())
    assert count_words(unnamed, SPECIAL).counts == count_words(plain, SPECIAL).counts


def test_compressed_file_read_as_concatenated(tmp_path: Path) -> None:
    """A file cut mid-word and compressed in two parts counts as the concatenation, as plain files do."""
    text = "".join(SPECIAL[0] + document for document in DOCUMENTS).encode("utf-8")
    middle = len(text) // 2 + 3
    (tmp_path / "a.gz").write_bytes(gzip.compress(text[:middle]))
    (tmp_path / "b.txt").write_bytes(text[middle:])
    (tmp_path / "whole.txt").write_bytes(text)
    streamed = count_words([tmp_path / "a.gz", tmp_path / "b.txt"], SPECIAL)
    assert streamed.counts == count_words(tmp_path / "whole.txt", SPECIAL).counts


def write_jsonl(path: Path, documents: list[str], field: str = "text") -> bytes:
    data = "".join(json.dumps({"id": index, field: document}) + "\n" for index, document in enumerate(documents))
    return data.encode("utf-8")


@pytest.mark.parametrize("compression", [None, "gz", "zst"])
def test_jsonl_matches_plain(trainer: str, reference, tmp_path: Path, compression: str | None) -> None:
    expected, _ = reference
    data = write_jsonl(tmp_path, DOCUMENTS)
    path = tmp_path / ("corpus.jsonl" + (f".{compression}" if compression else ""))
    path.write_bytes(_compress(compression, data) if compression else data)
    assert train_bpe(path, VOCAB_SIZE, SPECIAL, trainer=trainer) == expected


def test_jsonl_text_field_and_bad_records(tmp_path: Path, reference) -> None:
    expected, _ = reference
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(write_jsonl(tmp_path, DOCUMENTS, field="content"))
    assert train_bpe(path, VOCAB_SIZE, SPECIAL, trainer="bpe_v1", text_field="content") == expected
    with pytest.raises(BPEInputError, match=r"corpus.jsonl:1: field 'text' is missing \(fields: 'id', 'content'\)"):
        train_bpe(path, VOCAB_SIZE, SPECIAL, trainer="bpe_v1")
    path.write_text('{"text": "fine"}\n\nnot json\n')
    with pytest.raises(BPEInputError, match=r"corpus.jsonl:3: not a JSON record"):
        count_words(path, SPECIAL)


def test_json_lines_named_txt_are_refused(tmp_path: Path, reference, capsys) -> None:
    expected, _ = reference
    path = tmp_path / "corpus.txt"
    path.write_bytes(write_jsonl(tmp_path, DOCUMENTS))
    with pytest.raises(BPEInputError, match=r"looks like JSON lines.*--format jsonl.*--format text"):
        train_bpe(path, VOCAB_SIZE, SPECIAL, trainer="bpe_v1")
    assert cli_main(["bpe_v1", str(tmp_path / "out"), "-d", str(path), "-q"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--format" in err
    assert not (tmp_path / "out" / "merges.txt").exists()
    assert train_bpe(path, VOCAB_SIZE, SPECIAL, trainer="bpe_v1", format="jsonl") == expected
    train_bpe(path, VOCAB_SIZE, SPECIAL, trainer="bpe_v1", format="text")  # the raw lines, as asked


def test_parquet_matches_plain(trainer: str, reference, tmp_path: Path) -> None:
    pytest.importorskip("pyarrow", reason="Parquet input needs the optional pyarrow package")
    import pyarrow
    import pyarrow.parquet as parquet

    expected, _ = reference
    table = pyarrow.table({"id": list(range(len(DOCUMENTS))), "text": DOCUMENTS})
    path = tmp_path / "corpus.parquet"
    parquet.write_table(table, path, row_group_size=17)  # several row groups
    assert train_bpe(path, VOCAB_SIZE, SPECIAL, trainer=trainer) == expected
    with pytest.raises(BPEInputError, match="no column 'body'; its columns: id, text"):
        train_bpe(path, VOCAB_SIZE, SPECIAL, trainer=trainer, text_field="body")


def test_arrow_objects_match_plain(reference) -> None:
    pytest.importorskip("pyarrow", reason="Arrow input needs the optional pyarrow package")
    import pyarrow

    _, plain = reference
    expected = count_words(plain, SPECIAL)
    table = pyarrow.table({"text": DOCUMENTS})
    chunked = pyarrow.chunked_array([DOCUMENTS[:50], DOCUMENTS[50:]])
    for source in (table, chunked, pyarrow.array(DOCUMENTS), pyarrow.array(DOCUMENTS, pyarrow.large_string())):
        assert count_words_from_iterator(source, SPECIAL, batch_bytes=500) == expected, type(source)


def test_hugging_face_dataset(reference, tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets", reason="the Hugging Face datasets package is optional")
    expected, _ = reference
    dataset = datasets.Dataset.from_dict({"text": DOCUMENTS})
    assert train_bpe_from_iterator(dataset, VOCAB_SIZE, SPECIAL, trainer="bpe_v1") == expected


@pytest.mark.parametrize(
    "specials",
    [
        ["<|endoftext|>"],  # keeps documents apart: read in place by the native counter
        ["<|eot|>", "<|e"],  # so does this pair
        [],  # the private separator, which keeps them apart too
        ["aba"],  # bordered: "ab" + "a..." spans a join, so the documents are joined first
        ["<s>", "x<s"],  # a longer token that ends in the separator's start: joined first
    ],
)
def test_arrow_arrays_read_in_place_equal_the_joined_text(specials: list[str]) -> None:
    pytest.importorskip("pyarrow", reason="Arrow input needs the optional pyarrow package")
    import pyarrow

    documents = DOCUMENTS + ["ab", "a", "aba", "", "x", "<s>y", "ab", "x<s", ">"]
    expected = counts_of_documents(documents, specials)
    sliced = pyarrow.array(["skipped"] + documents + ["skipped too"]).slice(1, len(documents))
    sources = [
        pyarrow.array(documents),
        pyarrow.array(documents, pyarrow.large_string()),
        sliced,  # an array that starts inside its buffers
        pyarrow.chunked_array([documents[:7], documents[7:100], documents[100:]]),
    ]
    for source in sources:
        for batch_bytes in (1, 97, 1 << 20):
            counted = count_words_from_iterator(source, specials, batch_bytes=batch_bytes)
            assert dict(counted.counts) == dict(expected), (type(source), batch_bytes)


def test_arrow_documents_holding_the_private_separator_are_refused() -> None:
    pytest.importorskip("pyarrow", reason="Arrow input needs the optional pyarrow package")
    import pyarrow

    from cs336_basics.ingest.counting import DOCUMENT_SEPARATOR

    with pytest.raises(BPEInputError, match="internal document separator"):
        count_words_from_iterator(pyarrow.array(["a", f"b{DOCUMENT_SEPARATOR}c"]), [])


@pytest.mark.parametrize("specials", [["<|endoftext|>"], ["<|eot|>", "<|e"], [], ["aba"], ["<s>", "x<s"]])
def test_python_documents_read_in_place_equal_the_joined_text(specials: list[str]) -> None:
    """str (ASCII, read where it lies, and not), bytes, bytearray and memoryview items, and one document
    long enough to be cut into chunks of its own, count as the text they make when joined."""
    long_document = "".join(f"word{index % 997} é{index % 13}\n" for index in range(120_000))  # over 1 MB
    documents = DOCUMENTS + ["ab", "a", "aba", "", "x", "<s>y", "ab", "x<s", ">", long_document, "tail"]
    expected = counts_of_documents(documents, specials)
    encoded = [document.encode("utf-8") for document in documents]
    kinds = [list(documents), encoded, [bytearray(item) for item in encoded], [memoryview(item) for item in encoded]]
    mixed = [kind[index % len(kinds)] for index, kind in enumerate(zip(*kinds))]  # every kind in one batch
    for source in [*kinds, mixed]:
        for batch_bytes in (1, 97, 1 << 20):
            counted = count_words_from_iterator(iter(source), specials, batch_bytes=batch_bytes)
            assert dict(counted.counts) == dict(expected), (type(source[0]), batch_bytes)


def test_a_size_hint_sizes_the_tables_and_changes_no_count() -> None:
    from cs336_basics.ingest.word_counts import _native_module

    native = _native_module()
    if native is None:
        pytest.skip("the hint is the native counter's")
    text = SPECIAL[0].join(DOCUMENTS).encode("utf-8")
    pieces = [text[: len(text) // 2], text[len(text) // 2 :]]
    tables = []
    for hint in (0, len(text), 1 << 30):  # none, right, far too large
        counter = native.WordCounter(SPECIAL, 2, hint)
        counter.count_texts([piece.decode("utf-8", "ignore") for piece in pieces], SPECIAL[0])
        tables.append(counter.take().to_dict())
    assert tables[0] == tables[1] == tables[2]
    with pytest.raises(ValueError, match="expected_bytes"):
        native.WordCounter(SPECIAL, 1, -1)


def test_every_counter_path_on_many_threads_equals_one_thread(tmp_path: Path) -> None:
    """Texts, buffers, file ranges and slices counted on 4 threads (their own tables) and on 9 (which
    look words up in one table they share, past its 104,857 words) give one thread's counts."""
    from cs336_basics.ingest.word_counts import _native_module

    native = _native_module()
    if native is None:
        pytest.skip("the shared words are the native counter's")
    documents = [" ".join(f"w{number * 7 + part}" for part in range(7)) for number in range(20_000)]
    documents += DOCUMENTS * 50 + ["é" * 20 + " a very-long-word-indeed-here"] * 300
    text = SPECIAL[0].join(documents).encode("utf-8")
    path = tmp_path / "documents.txt"
    path.write_bytes(text)
    half = text.index(SPECIAL[0].encode("utf-8"), len(text) // 2)

    def counted(threads: int) -> list:
        by_texts = native.WordCounter(SPECIAL, threads)
        by_texts.count_texts(documents, SPECIAL[0])
        by_buffers = native.WordCounter(SPECIAL, threads)
        by_buffers.count(text[:half])
        by_buffers.count(text[half:])
        by_ranges = native.WordCounter(SPECIAL, threads)
        by_ranges.count_file_range(path, 0, half)
        by_ranges.count_file_range(path, half, len(text))
        sliced = native.WordCounter(SPECIAL, threads)
        sliced.count_file_range(path, 0, len(text))
        slices = [table.to_dict() for table in sliced.take_slices(3)]
        return [counter.take().to_dict() for counter in (by_texts, by_buffers, by_ranges)] + slices

    one = counted(1)
    assert one[0] == one[1] == one[2] and len(one[0]) > 140_000
    assert counted(4) == one
    assert counted(9) == one


@pytest.mark.parametrize("batch_bytes", [1, 1 << 20])
def test_bad_documents_are_named_in_any_batch(batch_bytes: int) -> None:
    good = [f"document {index} é" for index in range(60)]
    with pytest.raises(TypeError, match="document 41 is a float, not str"):
        count_words_from_iterator([*good[:41], 4.5, *good[41:]], SPECIAL, batch_bytes=batch_bytes)
    with pytest.raises(BPEInputError, match="document 50 is not valid UTF-8"):
        count_words_from_iterator([*good[:50], b"ok \xc3(", *good[50:]], SPECIAL, batch_bytes=batch_bytes)
    with pytest.raises(BPEInputError, match="document 7 is not valid Unicode text"):
        count_words_from_iterator([*good[:7], "lone \ud800", *good[7:]], SPECIAL, batch_bytes=batch_bytes)

    from cs336_basics.ingest.counting import DOCUMENT_SEPARATOR

    with pytest.raises(BPEInputError, match="internal document separator"):
        count_words_from_iterator([*good, f"b{DOCUMENT_SEPARATOR}c"], [], batch_bytes=batch_bytes)


def test_counting_thread_errors_reach_the_caller_and_no_thread_outlives_it(monkeypatch) -> None:
    """The documents are counted on a second thread while the caller's thread batches the next ones:
    an error there is raised in the caller, and an error in the caller's iterable stops that thread."""
    from cs336_basics.ingest import counting, read_ahead

    def alive() -> list[str]:
        return [thread.name for thread in threading.enumerate() if thread.name == "cs336-count-behind"]

    def failing_iterable():
        yield from DOCUMENTS
        raise RuntimeError("the caller's source failed")

    with pytest.raises(RuntimeError, match="the caller's source failed"):
        count_words_from_iterator(failing_iterable(), SPECIAL, batch_bytes=64)
    assert alive() == []

    def failing_feed(counter, item):
        raise OSError("counting failed")

    monkeypatch.setattr(read_ahead, "_feed", failing_feed)  # CountedBehind feeds the native counter
    monkeypatch.setattr(counting, "_feed", failing_feed)  # the Python counter is fed in the caller
    with pytest.raises(OSError, match="counting failed"):
        count_words_from_iterator(iter(DOCUMENTS * 50), SPECIAL, batch_bytes=64)
    assert alive() == []


_BOUNDED_MEMORY_CHILD = """
import resource, sys
from cs336_basics import count_words_from_iterator
from cs336_basics.ingest.word_counts import _native_module

total = int(sys.argv[1]) if _native_module() is not None else int(sys.argv[1]) // 15  # pure Python is slower
words = [f"word{index} " for index in range(2000)]
def documents():
    made = 0
    while made < total:  # made lazily: only one document exists at a time
        document = "".join(words[(made + step) % 2000] for step in range(1000)) + "."
        made += len(document)
        yield document
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
counts = count_words_from_iterator(documents(), ["<|endoftext|>"], num_workers=2)
assert counts.source_bytes >= total, counts.source_bytes
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
"""


def test_iterator_counts_in_bounded_memory() -> None:
    """300 MB of documents made lazily by a generator are counted with the memory of a few batches:
    the peak (ru_maxrss, in a child process of its own) grows by far less than the text."""
    import subprocess
    import sys

    total = 300 << 20
    result = subprocess.run(
        [sys.executable, "-c", _BOUNDED_MEMORY_CHILD, str(total)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    growth = int(result.stdout.split()[-1])
    assert growth < 150 << 20, f"the peak grew by {growth / 2**20:.0f} MB while counting"


_HF_EXAMPLE_START = "<!-- hf-parquet-example -->"


def test_readme_hugging_face_parquet_example(tmp_path: Path, monkeypatch) -> None:
    """The `datasets` example of docs/INPUTS.md, run as written on a local Parquet file (nothing downloaded),
    equals training on the plain text file of the same documents."""
    pytest.importorskip("datasets", reason="the Hugging Face datasets package is optional")
    pyarrow = pytest.importorskip("pyarrow", reason="Parquet needs the optional pyarrow package")
    import pyarrow.parquet as parquet

    readme = (Path(__file__).resolve().parents[1] / "docs" / "INPUTS.md").read_text(encoding="utf-8")
    block = readme.split(_HF_EXAMPLE_START, 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    parquet.write_table(pyarrow.table({"text": DOCUMENTS}), tmp_path / "local.parquet", row_group_size=50)
    monkeypatch.chdir(tmp_path)
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")  # goes with tmp_path
    namespace: dict[str, object] = {}
    exec(compile(block, "docs/INPUTS.md", "exec"), namespace)
    plain = write_plain(tmp_path / "plain.txt", DOCUMENTS)
    assert (namespace["vocab"], namespace["merges"]) == train_bpe(plain, 1_000, SPECIAL, trainer="bpe_v1")


def test_url_globs_and_directories_expand_as_local_ones(tmp_path: Path) -> None:
    pytest.importorskip("fsspec", reason="URLs need fsspec")
    from cs336_basics.ingest.sources import expand_inputs

    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / ".git").mkdir()
    for name in ("part-1.jsonl", "part-0.txt.gz", "sub/part-2.txt", ".git/config", "sub/.lock"):
        (data / name).write_bytes(b"x")
    root = data.resolve().as_uri()
    for pattern in ("", "/**/part-*", "/*"):
        local = [Path(path).resolve().as_uri() for path in expand_inputs([str(data) + pattern])]
        assert expand_inputs([root + pattern]) == local, pattern
    assert expand_inputs([root + "/part-0.txt.gz"]) == [root + "/part-0.txt.gz"]
    with pytest.raises(BPEInputError, match="no file matches"):
        expand_inputs([root + "/none-*.txt"])


def test_url_problems_are_one_line(tmp_path: Path, capsys) -> None:
    """A protocol fsspec does not know, or one whose package is missing, is one line, not a traceback."""
    pytest.importorskip("fsspec", reason="URLs need fsspec")
    cases = [("nosuch://bucket/data.jsonl", "Protocol not known"), ("file:///no/such/data.txt.gz", "not found")]
    for url, why in cases:
        assert cli_main(["bpe_v1", str(tmp_path / "out"), "-d", url, "-q"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and why in err and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("module", "suffix"), [("zstandard", "zst"), ("pyarrow", "parquet")])
def test_missing_optional_dependency_is_one_line(tmp_path: Path, monkeypatch, capsys, module: str, suffix: str) -> None:
    real_import = builtins.__import__

    def without(name: str, *args, **kwargs):
        if name == module or name.startswith(module + "."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without)
    path = tmp_path / f"corpus.{suffix}"
    path.write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00" * 32 if suffix == "zst" else b"PAR1" + b"\x00" * 32)
    one_line = rf'needs the {module} package, in the data extra: pip install "cs336-bpe\[data\]"$'
    with pytest.raises(BPEInputError, match=one_line):
        train_bpe(path, VOCAB_SIZE, SPECIAL, trainer="bpe_v1")
    assert cli_main(["bpe_v1", str(tmp_path / "out"), "-d", str(path), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and 'pip install "cs336-bpe[data]"' in err


@pytest.mark.parametrize("kind", ["gz", "bz2", "xz", "zst"])
@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_corrupt_compressed_file_is_one_line(tmp_path: Path, reference, capsys, kind: str, damage: str) -> None:
    """One line naming the file, the compressed offset and the decompressed bytes; nothing written,
    by either command; and no reading thread left behind."""
    _, plain = reference
    packed = _compress(kind, plain.read_bytes() * 20)
    if damage == "truncated":
        packed = packed[: len(packed) * 2 // 3]
    else:  # bytes in the middle of the stream overwritten
        middle = len(packed) // 2
        packed = packed[:middle] + bytes(64) + packed[middle + 64 :]
    path = tmp_path / f"corpus.txt.{kind}"
    path.write_bytes(packed)
    threads = threading.active_count()
    pattern = (
        rf"{path}: corrupt or truncated \w+ data near compressed byte [\d,]+ of {len(packed):,}, "
        r"after [\d,]+ decompressed bytes"
    )
    with pytest.raises(BPEInputError, match=pattern):
        train_bpe(path, VOCAB_SIZE, SPECIAL, trainer="bpe_v1")
    assert threading.active_count() == threads
    assert count_main([str(path), "-o", str(tmp_path / "counts.bin"), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "corrupt or truncated" in err and "compressed byte" in err
    assert not (tmp_path / "counts.bin").exists()
    assert cli_main(["bpe_v1", str(tmp_path / "out"), "-d", str(path), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "out" / "merges.txt").exists()


BAD_JSONL = [
    (b'{"text": "fine"}\n{"text": "also fine"\n', "not a JSON record"),
    (b'{"text": "fine"}\n["a list"]\n', "not a JSON object but a list"),
    (b'{"text": "fine"}\n{"body": "x"}\n', "field 'text' is missing \\(fields: 'body'\\)"),
    (b'{"text": "fine"}\n{"text": 7}\n', "field 'text' is a int, not a string"),
    (b'{"text": "fine"}\n{"text": "\\ud800"}\n', "field 'text' is not valid Unicode text"),
    (b'{"text": "fine"}\n{"text": "\xff"}\n', "not a JSON record"),
]


@pytest.mark.parametrize(("data", "why"), BAD_JSONL)
def test_bad_json_line_names_file_and_line(tmp_path: Path, capsys, data: bytes, why: str) -> None:
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(b"\n" + data)  # a blank first line: skipped, still numbered
    with pytest.raises(BPEInputError, match=f"corpus.jsonl:3: {why}"):
        count_words(path, SPECIAL)
    for command in (
        lambda: cli_main(["bpe_v1", str(tmp_path / "out"), "-d", str(path), "-v", "260", "-q"]),
        lambda: count_main([str(path), "-o", str(tmp_path / "counts.bin"), "-q"]),
    ):
        assert command() == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "corpus.jsonl:3: " in err and "Traceback" not in err
    assert not (tmp_path / "counts.bin").exists() and not (tmp_path / "out" / "merges.txt").exists()


def test_skip_bad_records(trainer: str, tmp_path: Path, reference, capsys) -> None:
    """Bad records left out are counted and reported in one note; the rest trains as the plain file."""
    expected, plain = reference
    lines = write_jsonl(tmp_path, DOCUMENTS).splitlines(keepends=True)
    bad = [b"not json\n", b'{"body": "x"}\n', b'{"text": null}\n']
    for index, line in zip((5, 40, 90), bad):
        lines.insert(index, line)
    path = tmp_path / "corpus.jsonl.gz"
    path.write_bytes(gzip.compress(b"".join(lines)))
    counts = count_words(path, SPECIAL, skip_bad_records=True)
    assert counts == count_words(plain, SPECIAL) and counts.skipped_records == 3
    note = capsys.readouterr().err
    assert note == f"note: skipped 3 bad records (--skip-bad-records); the first: {path}:6: not a JSON record " + (
        note.split("not a JSON record ", 1)[1]
    )
    assert note.count("\n") == 1
    assert train_bpe(path, VOCAB_SIZE, SPECIAL, trainer=trainer, skip_bad_records=True) == expected
    assert "skipped 3 bad records" in capsys.readouterr().err
    out = tmp_path / "out"
    assert cli_main(["bpe_v1", str(out), "-d", str(path), "-v", str(VOCAB_SIZE), "-q", "--skip-bad-records"]) == 0
    assert "skipped 3 bad records" in capsys.readouterr().err
    assert count_main([str(path), str(path), "-o", str(tmp_path / "c.bin"), "-q", "--skip-bad-records"]) == 0
    assert "skipped 6 bad records" in capsys.readouterr().err
    assert count_main([str(path), "-o", str(tmp_path / "c.bin"), "-q"]) == 2  # without it: the first, one line
    assert f"{path}:6: not a JSON record" in capsys.readouterr().err


def test_missing_parquet_column_names_the_columns(tmp_path: Path, capsys) -> None:
    pytest.importorskip("pyarrow", reason="Parquet input needs the optional pyarrow package")
    import pyarrow
    import pyarrow.parquet as parquet

    path = tmp_path / "corpus.parquet"
    parquet.write_table(pyarrow.table({"id": [1, 2], "content": ["a", "b"]}), path)
    assert count_main([str(path), "-o", str(tmp_path / "c.bin"), "-q"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {path} has no column 'text'; its columns: id, content (choose with --text-field)\n"
    assert cli_main(["bpe_v1", str(tmp_path / "out"), "-d", str(path), "-q", "--text-field", "body"]) == 2
    assert "no column 'body'; its columns: id, content" in capsys.readouterr().err
    with pytest.raises(BPEInputError, match="the table has no column 'text'; its columns: id, content"):
        count_words_from_iterator(pyarrow.table({"id": [1], "content": ["a"]}), SPECIAL)
    parquet.write_table(pyarrow.table({"text": ["a", None, "b"]}), path)
    with pytest.raises(BPEInputError, match="column 'text' has a null at row 1"):
        count_words(path, SPECIAL)


def test_read_ahead_thread_stops_with_the_counter(tmp_path: Path, reference, monkeypatch) -> None:
    """An error or Ctrl-C in the counter while the reading thread decompresses ahead: raised as it
    is, and the reading thread is gone when the call returns."""
    import cs336_basics.ingest.counting as counting

    _, plain = reference
    path = tmp_path / "corpus.txt.gz"
    path.write_bytes(gzip.compress(plain.read_bytes() * 2000))  # several 4 MB blocks
    threads = threading.active_count()
    calls = []
    real_text = counting._StreamCounter.text

    for stop in (KeyboardInterrupt, RuntimeError):

        def text(self, data: bytes, stop: type[BaseException] = stop) -> None:
            calls.append(len(data))
            if len(calls) == 2:
                raise stop("stopped")
            real_text(self, data)

        calls.clear()
        monkeypatch.setattr(counting._StreamCounter, "text", text)
        with pytest.raises(stop, match="stopped"):
            count_words(path, SPECIAL)
        assert threading.active_count() == threads
        assert not any(thread.name == "cs336-read-ahead" for thread in threading.enumerate())
    monkeypatch.setattr(counting._StreamCounter, "text", real_text)
    assert count_words(path, SPECIAL) == count_words(_write(tmp_path / "big.txt", plain.read_bytes() * 2000), SPECIAL)


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_prefetched_carries_reader_errors() -> None:
    from cs336_basics.ingest.counting import Prefetched

    def broken():
        yield 1
        raise ValueError("reader failed")

    seen = []
    with pytest.raises(ValueError, match="reader failed"), Prefetched(broken) as items:
        for item in items:
            seen.append(item)
    assert seen == [1]
    with Prefetched(lambda: iter(range(1000)), depth=2) as items:
        assert sum(items) == sum(range(1000))


def test_bad_items_and_options() -> None:
    with pytest.raises(TypeError, match="document 2 is a int, not str"):
        train_bpe_from_iterator(["a", "b", 3], 300, SPECIAL, trainer="bpe_v1")
    with pytest.raises(BPEInputError, match="document 1 is not valid UTF-8"):
        count_words_from_iterator(["a", b"\xff"], SPECIAL)
    with pytest.raises(TypeError, match="not one string"):
        count_words_from_iterator("just one text", SPECIAL)
    with pytest.raises(TypeError, match="unknown training option"):
        train_bpe_from_iterator(["a"], 300, SPECIAL, chunks=3)


def test_progress_in_documents(capsys) -> None:
    result = train_from_iterator(iter(DOCUMENTS), VOCAB_SIZE, SPECIAL, trainer="bpe_v1", progress=True, length=120)
    assert len(result.vocab) == VOCAB_SIZE and set(result.seconds) == {"pre-tokenize", "merge", "total"}
    assert "120/120" in capsys.readouterr().err


def test_cli_directories_globs_and_count_files(tmp_path: Path, reference) -> None:
    expected, plain = reference
    data = tmp_path / "data"
    data.mkdir()
    half = len(DOCUMENTS) // 2
    # Two JSON-lines shards: their documents are kept apart across the shard boundary too.
    (data / "part-0.jsonl.gz").write_bytes(gzip.compress(write_jsonl(tmp_path, DOCUMENTS[:half])))
    (data / "part-1.jsonl").write_bytes(write_jsonl(tmp_path, DOCUMENTS[half:]))
    for source in (str(data), str(data / "part-*")):
        out = tmp_path / "out"
        assert cli_main(["bpe_v1", str(out), "-d", source, "-v", str(VOCAB_SIZE), "-q"]) == 0
        vocab = json.loads((out / "vocab.json").read_text(encoding="utf-8"))
        assert len(vocab) == VOCAB_SIZE
        counts = tmp_path / "counts.bin"
        assert count_main([source, "-o", str(counts), "-q"]) == 0
        assert train_bpe_from_counts(counts, VOCAB_SIZE, trainer="bpe_v1") == expected
    assert cli_main(["bpe_v1", str(tmp_path / "none"), "-d", str(tmp_path / "nothing-*.txt"), "-q"]) == 2


def test_cluster_reads_streamed_inputs(tmp_path: Path, reference) -> None:
    """`--cluster` takes compressed files too (tests/test_cluster.py checks every format): here through
    the command's own path, a process cluster, so the tasks' arguments travel pickled."""
    pytest.importorskip("distributed", reason="Dask is an optional extra")
    _, plain = reference
    packed = tmp_path / "corpus.txt.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert count_inputs([str(packed)], SPECIAL, cluster="local:1") == count_words(plain, SPECIAL)
