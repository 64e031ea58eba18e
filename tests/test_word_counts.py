"""Count files (format, refusal of bad files), counting several inputs as if concatenated, and
training from counts against training from text."""

from __future__ import annotations

import pickle
import struct
import tempfile
import zlib
from array import array
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cs336_basics import (
    BPEInputError,
    train_bpe,
    train_bpe_from_counts,
)
from cs336_basics.commands.demo import write_demo_corpus
from cs336_basics.ingest import stream_counter, text_ranges, word_counts
from cs336_basics.ingest.counting import (
    Segment,
    count_tasks,
    count_words,
    count_words_from_iterator,
    group_into_batches,
    plan_count_tasks,
    task_size,
)
from cs336_basics.ingest.word_counts import (
    FORMAT_VERSION,
    MAGIC,
    TableArrays,
    WordCountFileError,
    WordCounts,
    add_tables,
    concatenate_slices,
    split_table,
)
from cs336_basics.native import backend
from cs336_basics.rules.splitting import count_words_in_text
from tests.test_equivalence import FRAGMENTS, SPECIAL_TOKEN_SETS, corpora

SPECIALS = ["<|endoftext|>"]


def write_parts(directory: Path, parts: list[bytes]) -> list[Path]:
    paths = []
    for index, data in enumerate(parts):
        path = directory / f"part{index}.txt"
        path.write_bytes(data)
        paths.append(path)
    return paths


# ---------------------------------------------------------------------------------------------
# The file format

word_tables = st.dictionaries(st.binary(min_size=1, max_size=12), st.integers(min_value=1, max_value=2**64 - 1))


@settings(max_examples=60, deadline=None)
@given(table=word_tables, specials=st.sampled_from(SPECIAL_TOKEN_SETS), source_bytes=st.integers(0, 2**40))
def test_round_trip(table: dict[bytes, int], specials: list[str], source_bytes: int) -> None:
    counts = WordCounts(table, specials, source_bytes=source_bytes)
    data = counts.to_bytes()
    assert WordCounts.from_bytes(data) == counts
    # Canonical: the same table in another insertion order is the same file.
    assert WordCounts(dict(reversed(list(table.items()))), specials, source_bytes=source_bytes).to_bytes() == data


def test_save_and_load(tmp_path: Path) -> None:
    counts = WordCounts({b"hello": 3, b" world": 2**40, "é".encode(): 1}, SPECIALS, source_bytes=99)
    path = counts.save(tmp_path / "counts.bin")
    assert WordCounts.load(path) == counts
    assert path.read_bytes()[:8] == b"CS336WC\x00"


@pytest.fixture
def count_file(tmp_path: Path) -> Path:
    return WordCounts({b"a": 1, b" b": 2, b"ccc": 3}, SPECIALS, source_bytes=10).save(tmp_path / "c.bin")


def test_corrupt_file_is_refused_naming_it(count_file: Path) -> None:
    data = bytearray(count_file.read_bytes())
    data[-8] ^= 0x01  # a word's byte
    count_file.write_bytes(bytes(data))
    with pytest.raises(WordCountFileError, match=rf"{count_file.name}.*checksum mismatch"):
        WordCounts.load(count_file)


@pytest.mark.parametrize("keep", [0, 5, 12, 40, -1])
def test_truncated_file_is_refused(count_file: Path, keep: int) -> None:
    data = count_file.read_bytes()
    count_file.write_bytes(data[:keep] if keep >= 0 else data[:-1])
    with pytest.raises(WordCountFileError, match=count_file.name):
        WordCounts.load(count_file)


def test_other_version_is_refused(count_file: Path) -> None:
    data = bytearray(count_file.read_bytes())
    data[8:12] = struct.pack("<I", FORMAT_VERSION + 1)
    body = bytes(data[:-4])
    count_file.write_bytes(body + struct.pack("<I", zlib.crc32(body)))
    with pytest.raises(WordCountFileError, match=rf"format version {FORMAT_VERSION + 1}.*reads version"):
        WordCounts.load(count_file)


def test_text_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "corpus.txt"
    path.write_text("hello world" * 10)
    with pytest.raises(WordCountFileError, match="magic"):
        WordCounts.load(path)


def test_tables_with_different_special_tokens_do_not_add() -> None:
    with pytest.raises(BPEInputError, match="different special tokens"):
        WordCounts({b"a": 1}, ["<s>"]) + WordCounts({b"a": 1}, SPECIALS)


def write_count_file(
    path: Path, words: list[bytes], counts: list[int], *, version: int = FORMAT_VERSION, unicode: str = ""
) -> Path:
    """A count file with the given words in the given order (valid header and checksum), of format
    `version` (1: no Unicode version; else `unicode`, "" for not known)."""
    pattern = WordCounts({}).pattern.encode()
    recorded = [] if version == 1 else [struct.pack("<I", len(unicode)), unicode.encode()]
    body = b"".join(
        [
            MAGIC,
            struct.pack("<II", version, len(pattern)),
            pattern,
            *recorded,
            struct.pack("<I", 0),
            struct.pack("<QQQ", 0, len(words), sum(map(len, words))),
            struct.pack(f"<{len(words)}I", *map(len, words)),
            struct.pack(f"<{len(words)}Q", *counts),
            *words,
        ]
    )
    path.write_bytes(body + struct.pack("<I", zlib.crc32(body)))
    return path


@pytest.fixture(params=["native", "python"])
def table_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Count tables held in C++ (skipped when not built) or as dicts (the compiled module hidden)."""
    if request.param == "native" and not backend.native_available("_count_cpp"):
        pytest.skip("the compiled module is not built (or CS336_PURE_PYTHON is set)")
    if request.param == "python":
        monkeypatch.setattr(word_counts, "_native_module", lambda: None)
        monkeypatch.setattr(text_ranges, "_native_module", lambda: None)
        monkeypatch.setattr(stream_counter, "_native_module", lambda: None)
    return request.param


@pytest.mark.parametrize("words", [[b"b", b"a"], [b"a", b"a"]], ids=["unordered", "twice"])
def test_words_out_of_order_or_twice_are_refused(tmp_path: Path, table_backend: str, words: list[bytes]) -> None:
    path = write_count_file(tmp_path / "c.bin", words, [1, 2])
    with pytest.raises(WordCountFileError, match="c.bin.*strictly ascending"):
        WordCounts.load(path)


def test_a_zero_count_is_refused(tmp_path: Path, table_backend: str) -> None:
    path = write_count_file(tmp_path / "c.bin", [b"a", b"b"], [1, 0])
    with pytest.raises(WordCountFileError, match="c.bin.*does not add up"):
        WordCounts.load(path)


def test_loaded_tables_keep_their_backend(count_file: Path, table_backend: str) -> None:
    counts = WordCounts.load(count_file)
    assert (counts.native is not None) == (table_backend == "native")
    assert counts.total_words == 6 and len(counts) == 3
    assert counts.counts == {b"a": 1, b" b": 2, b"ccc": 3}
    assert counts.native is None  # the dict, once made, is the table


def native_table(table: dict[bytes, int]):
    """A table held in C++ with the words and counts of `table`, in its order."""
    words = list(table)
    return word_counts._native_module().word_counts_from_arrays(
        b"".join(words), array("I", map(len, words)).tobytes(), array("Q", table.values()).tobytes()
    )


@settings(max_examples=60, deadline=None)
@given(table=st.dictionaries(st.binary(min_size=1, max_size=12), st.integers(min_value=1, max_value=2**63 - 1)))
def test_a_native_tables_text_bytes_are_its_words_lengths_times_counts(table: dict[bytes, int]) -> None:
    if word_counts._native_module() is None:
        pytest.skip("the compiled word counter is not loaded")
    # Counts up to 2**63 - 1 (a native table's most) times 12 bytes pass 64 bits: nothing may wrap.
    assert word_counts.counted_text_bytes(native_table(table)) == sum(len(word) * n for word, n in table.items())


def as_dict(table) -> dict[bytes, int]:
    return table if isinstance(table, dict) else table.to_dict()


small_tables = st.dictionaries(st.binary(min_size=1, max_size=6), st.integers(min_value=1, max_value=2**40))


@settings(max_examples=60, deadline=None)
@given(tables=st.lists(small_tables, min_size=1, max_size=5))
def test_native_tables_add_sort_and_pickle_like_dicts(tables: list[dict[bytes, int]]) -> None:
    if word_counts._native_module() is None:
        pytest.skip("the compiled module is not built (or CS336_PURE_PYTHON is set)")
    expected: dict[bytes, int] = {}
    for table in tables:
        for word, count in table.items():
            expected[word] = expected.get(word, 0) + count
    natives = [native_table(table) for table in tables]
    total = add_tables(natives)
    assert total.to_dict() == expected and total.total_count() == sum(expected.values())
    assert [native.to_dict() for native in natives] == tables  # the inputs are left alone
    ordered = total.sorted_by_bytes()
    assert list(ordered.to_dict()) == sorted(expected) and ordered.first_unordered_word() == len(expected)
    assert pickle.loads(pickle.dumps(total)).to_dict() == expected


@settings(max_examples=60, deadline=None)
@given(tables=st.lists(small_tables, min_size=1, max_size=4), num_slices=st.integers(1, 5), data=st.data())
def test_slices_summed_apart_add_up_to_the_sum(tables: list[dict[bytes, int]], num_slices: int, data) -> None:
    """Slices share no word within a kind of table, and a mix of native and dict tables (workers
    that differ) still adds up."""
    native = word_counts._native_module()
    kinds = [dict] + ([native_table] if native is not None else [])
    for make in [*kinds, lambda table: data.draw(st.sampled_from(kinds))(table)]:
        sliced = [split_table(make(table), num_slices) for table in tables]
        sums = [add_tables([slices[index] for slices in sliced]) for index in range(num_slices)]
        assert as_dict(concatenate_slices(sums)) == add_tables(tables)
        if all(not isinstance(one, dict) for one in sums):
            assert sum(map(len, sums)) == len(add_tables(tables))  # no word in two slices
            # As the client gets them from the workers: arrays, all of them or some.
            arrays = [pickle.loads(pickle.dumps(TableArrays(*one.to_arrays()), protocol=5)) for one in sums]
            assert as_dict(concatenate_slices(arrays)) == add_tables(tables)
            assert as_dict(concatenate_slices([arrays[0], *sums[1:]])) == add_tables(tables)


def test_sums_past_int64_leave_cpp_for_python_ints(table_backend: str) -> None:
    half = WordCounts({b"w": 2**62, b"x": 1}).to_bytes()
    first, second = WordCounts.from_bytes(half), WordCounts.from_bytes(half)
    total = first + second
    assert total.counts == {b"w": 2**63, b"x": 2}
    assert WordCounts.from_bytes(total.to_bytes()).counts == total.counts
    assert first.counts == {b"w": 2**62, b"x": 1}


# ---------------------------------------------------------------------------------------------
# Counting: shards add up, several inputs count as their concatenation


def test_shards_split_at_documents_add_up_to_the_whole(tmp_path: Path) -> None:
    corpus = write_demo_corpus(tmp_path / "demo.txt", size_bytes=200_000)
    data = corpus.read_bytes()
    token = SPECIALS[0].encode()
    starts = [index for index in range(len(data)) if data.startswith(token, index)]
    cuts = [0, *starts[::40][1:], len(data)]
    paths = write_parts(tmp_path, [data[start:end] for start, end in zip(cuts, cuts[1:])])
    assert len(paths) > 3
    total = WordCounts({}, SPECIALS)
    for path in paths:
        total = total + count_words(path, SPECIALS)
    whole = count_words(corpus, SPECIALS)
    assert total.counts == whole.counts == dict(count_words_in_text(data.decode(), SPECIALS))
    assert total.source_bytes == sum(path.stat().st_size for path in paths)


@st.composite
def split_corpora(draw: st.DrawFn) -> tuple[bytes, list[str], list[bytes]]:
    """Text cut into files at arbitrary bytes: inside words, special tokens and UTF-8 characters."""
    specials = draw(st.sampled_from(SPECIAL_TOKEN_SETS))
    text = "".join(draw(st.lists(st.sampled_from(FRAGMENTS + specials), min_size=0, max_size=60)))
    data = text.encode("utf-8")
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=5)))
    parts = [data[start:end] for start, end in zip([0, *cuts], [*cuts, len(data)])]
    return data, specials, parts


@settings(max_examples=150, deadline=None)
@given(case=split_corpora(), task_bytes=st.sampled_from([1, 2, 7, 1 << 20]))
def test_several_files_count_as_their_concatenation(case: tuple[bytes, list[str], list[bytes]], task_bytes: int):
    data, specials, parts = case
    with tempfile.TemporaryDirectory() as directory:
        paths = write_parts(Path(directory), parts)
        counts = count_words(paths, specials, task_bytes=task_bytes)
        tasks = plan_count_tasks(paths, specials, task_bytes=task_bytes)
    assert counts.counts == dict(count_words_in_text(data.decode("utf-8"), specials))
    assert counts.source_bytes == len(data)
    # The tasks tile the concatenation: every byte once, in order.
    spans = [(str(segment.path), segment.start, segment.end) for task in tasks for segment in task]
    assert [end - start for _, start, end in spans if end > start] == [end - start for _, start, end in spans]
    assert sum(end - start for _, start, end in spans) == len(data)


@pytest.mark.parametrize("num_threads", [1, 2])
@pytest.mark.parametrize("num_slices", [None, 1, 3])
def test_tasks_counted_into_one_table_give_the_slices_of_the_whole(
    tmp_path: Path, num_threads: int, num_slices: int | None
) -> None:
    """count_tasks: many ranges, one table (native: one WordCounter), cut as split_table cuts."""
    corpus = write_demo_corpus(tmp_path / "demo.txt", size_bytes=120_000)
    tasks = plan_count_tasks([corpus], SPECIALS, task_bytes=7_000)
    assert len(tasks) > 10
    counted = count_tasks(tasks, SPECIALS, num_threads, num_slices=num_slices)
    counts = count_words(corpus, SPECIALS)
    whole = counts.counts if counts.native is None else counts.native  # a table of the same kind
    expected = split_table(whole, num_slices) if num_slices else whole
    if num_slices is None:
        assert as_dict(counted) == as_dict(expected)
    else:
        assert [as_dict(one) for one in counted] == [as_dict(one) for one in expected]


@pytest.mark.parametrize("num_batches", [1, 2, 3, 7, 40])
def test_batches_are_the_tasks_in_order_in_shares_of_about_equal_bytes(num_batches: int) -> None:
    sizes = [5, 90, 3, 3, 40, 41, 7, 60, 1, 1, 1, 30, 55, 2, 20]
    tasks = [(Segment("f", sum(sizes[:index]), sum(sizes[: index + 1])),) for index in range(len(sizes))]
    batches = group_into_batches(tasks, num_batches)
    assert [task for batch in batches for task in batch] == tasks and all(batches)
    assert len(batches) == min(num_batches, len(tasks))
    share, largest = sum(sizes) / num_batches, max(sizes)
    # Each run ends at the task boundary nearest its share, so it is off by at most one task.
    assert all(abs(sum(map(task_size, batch)) - share) <= largest for batch in batches)


def test_a_word_across_a_file_boundary_is_one_word(tmp_path: Path) -> None:
    paths = write_parts(tmp_path, [b"hello wor", b"ld<|endo", b"ftext|> bye"])
    counts = count_words(paths, SPECIALS)
    assert counts.counts == {b"hello": 1, b" world": 1, b" bye": 1}


@pytest.mark.parametrize("num_workers", [None, 1, 2, -1])
def test_worker_counts_follow_the_one_convention(tmp_path: Path, num_workers: int | None) -> None:
    """-1 means every core here as for the trainers (it once reached the native counter as is)."""
    paths = write_parts(tmp_path, [b"hello world<|endoftext|> hello", b" there"])
    counts = count_words(paths, SPECIALS, num_workers=num_workers)
    assert counts.counts == {b"hello": 1, b" world": 1, b" hello": 1, b" there": 1}


def test_num_threads_is_the_old_name_of_num_workers(tmp_path: Path) -> None:
    """Counting's workers may be processes (a regex pattern), so they are num_workers, as for train_bpe;
    the old keyword still counts, with a warning, and both at once are refused."""
    paths = write_parts(tmp_path, [b"hello world<|endoftext|> hello"])
    expected = count_words(paths, SPECIALS, num_workers=1).counts
    with pytest.warns(DeprecationWarning, match=r"count_words\(num_workers=\.\.\.\)"):
        assert count_words(paths, SPECIALS, num_threads=1).counts == expected
    with pytest.warns(DeprecationWarning, match=r"count_words_from_iterator\(num_workers=\.\.\.\)"):
        assert count_words_from_iterator(["hello world", " hello"], SPECIALS, num_threads=1).counts == expected
    with pytest.raises(TypeError, match="give num_workers alone"):
        count_words(paths, SPECIALS, num_workers=1, num_threads=1)


_MAPPED_FILE_MEMORY_CHILD = """
import resource, sys
from cs336_basics.native import _count_cpp

before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
table = _count_cpp.count_words(sys.argv[1], ["<|endoftext|>"], 8)
assert len(table) == 1001, len(table)  # " word" and the numbers 0 to 999
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
"""


def test_a_mapped_file_is_not_held_in_memory_while_counted(tmp_path: Path) -> None:
    """A 128 MB file counted on 8 threads raises the peak (in a child process of its own) by far less
    than its size: the search for the chunk cuts once left the whole file resident (each page fault
    maps a large folio on Linux 6, up to 2 MiB around every cut) until the chunks were counted."""
    if not backend.native_available("_count_cpp"):
        pytest.skip("the native counter is not built")
    import subprocess
    import sys

    document = "".join(f" word{index}" for index in range(1000)).encode() + b"<|endoftext|>"
    path = tmp_path / "big.txt"
    with path.open("wb") as out:
        for _ in range((128 << 20) // (len(document) * 1024) + 1):
            out.write(document * 1024)
    result = subprocess.run(
        [sys.executable, "-c", _MAPPED_FILE_MEMORY_CHILD, str(path)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    growth = int(result.stdout.split()[-1])
    assert growth < 64 << 20, f"the peak grew by {growth / 2**20:.0f} MB while counting a 128 MB file"


def test_invalid_utf8_names_the_input(tmp_path: Path) -> None:
    paths = write_parts(tmp_path, [b"good text\n", b"bad \xff text"])
    with pytest.raises(BPEInputError, match="part1.txt"):
        count_words(paths, SPECIALS)


def test_missing_input_is_named(tmp_path: Path) -> None:
    with pytest.raises(BPEInputError, match="nothere.txt"):
        count_words([tmp_path / "nothere.txt"], SPECIALS)


# ---------------------------------------------------------------------------------------------
# Training from counts


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=corpora(), num_files=st.integers(1, 3))
def test_training_from_counts_equals_training_from_text(trainer: str, case, num_files: int) -> None:
    text, specials, vocab_size = case
    data = text.encode("utf-8")
    with tempfile.TemporaryDirectory() as directory:
        whole = Path(directory) / "whole.txt"
        whole.write_bytes(data)
        expected = train_bpe(whole, vocab_size, specials, trainer="bpe_v1")
        step = -(-len(data) // num_files)
        paths = write_parts(Path(directory), [data[i : i + step] for i in range(0, len(data), step)])
        count_file = count_words(paths, specials).save(Path(directory) / "counts.bin")
        assert train_bpe_from_counts(count_file, vocab_size, trainer=trainer) == expected
        assert train_bpe_from_counts(WordCounts.load(count_file), vocab_size, specials, trainer=trainer) == expected


def test_count_files_add_up_when_training(tmp_path: Path) -> None:
    corpus = write_demo_corpus(tmp_path / "demo.txt", size_bytes=100_000)
    data = corpus.read_bytes()
    middle = data.index(SPECIALS[0].encode(), len(data) // 2)
    first, second = write_parts(tmp_path, [data[:middle], data[middle:]])
    files = [count_words(part, SPECIALS).save(tmp_path / f"{part.stem}.bin") for part in (first, second)]
    assert train_bpe_from_counts(files, 400) == train_bpe(corpus, 400, SPECIALS, trainer="bpe_v1")


def test_training_refuses_other_special_tokens(count_file: Path) -> None:
    with pytest.raises(BPEInputError, match="special tokens"):
        train_bpe_from_counts(count_file, 300, ["<s>"])


# ---------------------------------------------------------------------------------------------
# Command lines: cs336-count-words, and cs336-train-bpe with --counts and several -d files


def test_count_cli_then_train_cli_equals_training_on_the_text(tmp_path: Path, capsys) -> None:
    from cs336_basics.commands.cli import main as train_main
    from cs336_basics.commands.count_cli import main as count_main

    corpus = write_demo_corpus(tmp_path / "demo.txt", size_bytes=150_000)
    data = corpus.read_bytes()
    inside_a_word = next(cut for cut in range(100_000, len(data)) if data[cut - 1 : cut + 1].isalpha())
    parts = write_parts(tmp_path, [data[:50_001], data[50_001:inside_a_word], data[inside_a_word:]])
    assert count_main([*map(str, parts[:2]), "-o", str(tmp_path / "a.bin"), "-q"]) == 0
    assert count_main([str(parts[2]), "-o", str(tmp_path / "b.bin"), "-q"]) == 0
    assert "distinct" in capsys.readouterr().out
    expected = train_bpe(corpus, 500, SPECIALS, trainer="bpe_v1")
    whole = count_words(parts, SPECIALS)
    assert WordCounts.load(tmp_path / "a.bin") + WordCounts.load(tmp_path / "b.bin") != whole  # a word is cut in two
    assert train_bpe_from_counts(whole, 500) == expected

    out = tmp_path / "from-files"
    assert train_main(["auto", str(out), "-d", *map(str, parts), "-v", "500", "-q", "--export", "hf,tiktoken"]) == 0
    assert "read as concatenated" in capsys.readouterr().out
    assert sorted(path.name for path in out.iterdir()) == [
        "bpe_run.json",
        "merges.pkl",
        "merges.txt",
        "special_tokens_map.json",
        "tokenizer.json",
        "tokenizer.tiktoken",
        "tokenizer_config.json",
        "vocab.json",
        "vocab.pkl",
    ]
    from cs336_basics.outputs.serialization import load_merges

    assert load_merges(out / "merges.txt") == expected[1]

    whole.save(tmp_path / "whole.bin")
    out = tmp_path / "from-counts"
    assert train_main(["bpe_v4", str(out), "--counts", str(tmp_path / "whole.bin"), "-v", "500", "-q"]) == 0
    assert load_merges(out / "merges.txt") == expected[1]


def test_train_cli_refuses_a_corrupt_count_file(count_file: Path, tmp_path: Path, capsys) -> None:
    from cs336_basics.commands.cli import main as train_main

    count_file.write_bytes(count_file.read_bytes()[:-3])
    assert train_main(["auto", str(tmp_path / "out"), "--counts", str(count_file), "-q"]) == 2
    assert count_file.name in capsys.readouterr().err
