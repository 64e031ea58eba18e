"""Counting on a Dask LocalCluster: the same counts and merges as v7 on the concatenation, also when a
task fails once and is retried. Skipped when Dask is not installed (the `cluster` extra)."""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

import pytest

pytest.importorskip("distributed", reason="Dask is an optional extra: pip install -e '.[cluster]'")
from distributed import Client, LocalCluster  # noqa: E402

from cs336_basics import train_bpe, train_bpe_from_counts, trainer_status  # noqa: E402
from cs336_basics.commands.demo import write_demo_corpus  # noqa: E402
from cs336_basics.ingest.cluster import count_words_on_cluster, pack_table, sum_tables, unpack_table  # noqa: E402
from cs336_basics.ingest.counting import count_tasks  # noqa: E402
from cs336_basics.rules.splitting import count_words_in_text  # noqa: E402

SPECIALS = ["<|endoftext|>"]
REFERENCE = "bpe_v7" if trainer_status()["bpe_v7"].available else "bpe_v2"


@pytest.fixture(scope="module")
def client():
    # Threads in this process: starts in about a second and needs no importable test module on workers.
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster:
        with Client(cluster) as dask_client:
            yield dask_client


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    """A demo corpus and the same bytes in five files cut at arbitrary places (inside words too)."""
    directory = tmp_path_factory.mktemp("cluster")
    whole = write_demo_corpus(directory / "whole.txt", size_bytes=400_000)
    data = whole.read_bytes()
    cuts = [0, 70_001, 150_003, 150_010, 277_777, len(data)]
    parts = []
    for index, (start, end) in enumerate(zip(cuts, cuts[1:])):
        part = directory / f"part{index}.txt"
        part.write_bytes(data[start:end])
        parts.append(part)
    return whole, parts


def test_counts_and_merges_equal_the_concatenation(client: Client, corpus: tuple[Path, list[Path]]) -> None:
    whole, parts = corpus
    counts = count_words_on_cluster(client, parts, SPECIALS, task_bytes=50_000, fan_in=3)
    assert counts.counts == dict(count_words_in_text(whole.read_text(encoding="utf-8"), SPECIALS))
    assert counts.source_bytes == whole.stat().st_size
    assert train_bpe_from_counts(counts, 800) == train_bpe(whole, 800, SPECIALS, trainer=REFERENCE)


@pytest.mark.parametrize("slices", [1, 3])
def test_any_number_of_slices_gives_the_same_counts(client: Client, corpus: tuple[Path, list[Path]], slices: int):
    whole, parts = corpus
    counts = count_words_on_cluster(client, parts, SPECIALS, task_bytes=80_000, fan_in=2, slices=slices)
    assert counts.counts == dict(count_words_in_text(whole.read_text(encoding="utf-8"), SPECIALS))


def test_progress_reaches_the_input_size(client: Client, corpus: tuple[Path, list[Path]], capsys) -> None:
    whole, parts = corpus
    counts = count_words_on_cluster(client, parts, SPECIALS, task_bytes=90_000, progress=True)
    assert counts.counts == dict(count_words_in_text(whole.read_text(encoding="utf-8"), SPECIALS))
    assert "100%" in capsys.readouterr().err


def test_fsspec_urls(client: Client, corpus: tuple[Path, list[Path]]) -> None:
    pytest.importorskip("fsspec", reason="URLs need fsspec")
    whole, parts = corpus
    urls = [part.resolve().as_uri() for part in parts]  # file:// URLs go through fsspec
    counts = count_words_on_cluster(client, urls, SPECIALS, task_bytes=100_000)
    assert counts.counts == dict(count_words_in_text(whole.read_text(encoding="utf-8"), SPECIALS))


def fail_once(marker: Path, *args: object, **options: object) -> dict[bytes, int]:
    """count_tasks, except that the first call anywhere fails (as a worker dying mid-task would)."""
    try:
        marker.touch(exist_ok=False)
    except FileExistsError:
        return count_tasks(*args, **options)
    raise RuntimeError("injected failure: this attempt dies")


def test_a_task_failing_once_is_retried_without_loss(client: Client, corpus: tuple[Path, list[Path]], tmp_path):
    whole, parts = corpus
    marker = tmp_path / "failed-once"
    counts = count_words_on_cluster(
        client, parts, SPECIALS, task_bytes=60_000, retries=1, count=partial(fail_once, marker)
    )
    assert marker.exists()  # the failure did happen
    assert train_bpe_from_counts(counts, 800) == train_bpe(whole, 800, SPECIALS, trainer=REFERENCE)


def test_without_retries_the_error_reaches_the_client(client: Client, corpus: tuple[Path, list[Path]], tmp_path):
    _, parts = corpus
    with pytest.raises(RuntimeError, match="injected failure"):
        count_words_on_cluster(
            client, parts, SPECIALS, task_bytes=60_000, retries=0, count=partial(fail_once, tmp_path / "m")
        )


class Unpackable:
    """A count table that cannot be turned into data to send: its task must fail, not loop."""

    def __reduce__(self):
        raise TypeError("this table cannot be sent")


def count_unpackable(tasks: object, special_tokens: object, threads: object, storage_options: object, **options):
    return [Unpackable() for _ in range(options.get("num_slices", 1))]


def test_a_table_that_cannot_be_sent_ends_the_run_with_one_error(corpus: tuple[Path, list[Path]]) -> None:
    # Worker processes, so results do cross processes; before, Dask retried such a transfer forever.
    from cs336_basics.ingest.cluster import ClusterTaskError, connect

    _, parts = corpus
    with connect("local:2") as client:
        with pytest.raises(ClusterTaskError, match="after 1 retries") as raised:
            count_words_on_cluster(client, parts, SPECIALS, task_bytes=60_000, retries=1, count=count_unpackable)
    assert "\n" not in str(raised.value)


def test_tables_travel_as_plain_data_that_pickles_under_the_installed_name() -> None:
    import pickle
    import sys

    from cs336_basics.ingest.word_counts import TableArrays

    packed = pack_table({b"ab": 2})
    assert isinstance(packed, bytes) and unpack_table(packed) == {b"ab": 2}
    if REFERENCE != "bpe_v7":
        pytest.skip("native tables are not built here")
    from cs336_basics.native import _count_cpp

    table = _count_cpp.word_counts_from_arrays(b"abc", (3).to_bytes(4, sys.byteorder), (5).to_bytes(8, sys.byteorder))
    assert type(pack_table(table)) is TableArrays
    assert unpack_table(pickle.loads(pickle.dumps(pack_table(table)))).to_dict() == {b"abc": 5}
    # Compiled classes are named as installed, so pickle finds them in any process that has the package.
    assert type(table).__module__ == "cs336_bpe.native._count_cpp"
    assert pickle.loads(pickle.dumps(table)).to_dict() == {b"abc": 5}


def test_sum_tables_leaves_its_inputs_alone() -> None:
    first, second = pack_table({b"a": 1, b"b": 2}), pack_table({b"b": 3})
    assert unpack_table(sum_tables(first, second, pack_table({}))) == {b"a": 1, b"b": 5}
    assert unpack_table(first) == {b"a": 1, b"b": 2} and unpack_table(second) == {b"b": 3}


def test_cli_with_a_local_cluster_of_two_worker_processes(corpus: tuple[Path, list[Path]], tmp_path: Path, capsys):
    from cs336_basics.commands.cli import main as train_main
    from cs336_basics.outputs.serialization import load_merges

    whole, parts = corpus
    out = tmp_path / "out"
    assert train_main(["auto", str(out), "-d", *map(str, parts), "--cluster", "local:2", "-v", "700", "-q"]) == 0
    assert "counted on local:2" in capsys.readouterr().out
    assert load_merges(out / "merges.txt") == train_bpe(whole, 700, SPECIALS, trainer=REFERENCE)[1]


def test_bad_cluster_spec_is_explained(tmp_path: Path, corpus, capsys) -> None:
    from cs336_basics.commands.cli import main as train_main

    assert train_main(["auto", str(tmp_path / "out"), "-d", str(corpus[0]), "--cluster", "local:zero", "-q"]) == 2
    assert "positive integer" in capsys.readouterr().err


def die_once(marker: Path, *args: object, **options: object) -> dict[bytes, int]:
    """count_tasks, except that the first call anywhere kills its worker process outright."""
    try:
        marker.touch(exist_ok=False)
    except FileExistsError:
        return count_tasks(*args, **options)
    os._exit(17)  # no exception, no cleanup: what a machine dying mid-task looks like to Dask


def test_a_worker_process_dying_mid_task_loses_nothing(corpus: tuple[Path, list[Path]], tmp_path: Path) -> None:
    whole, parts = corpus
    marker = tmp_path / "died-once"
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        with Client(cluster) as process_client:
            counts = count_words_on_cluster(
                process_client, parts, SPECIALS, task_bytes=60_000, count=partial(die_once, marker)
            )
    assert marker.exists()  # a worker did die
    assert counts.counts == dict(count_words_in_text(whole.read_text(encoding="utf-8"), SPECIALS))


# ---------------------------------------------------------------------------------------------
# Compressed files, JSON lines and Parquet on the cluster (issue 22): equal to the local count


def _documents(count: int = 300) -> list[str]:
    pieces = ["the", " cat", " sat", "\n", "  ", "é", "日本", " 42", "'s", "<|endoftext|>", ""]
    return [
        "".join(pieces[(index * 7 + step * 3) % len(pieces)] for step in range(index % 37)) for index in range(count)
    ]


def _jsonl(documents: list[str]) -> bytes:
    import json

    return "".join(json.dumps({"text": document}) + "\n" for document in documents).encode("utf-8")


@pytest.fixture(scope="module")
def streamed_inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Path]]:
    """The same documents as gzip text, JSON lines (plain and zst) and Parquet, and a mix."""
    import gzip

    directory = tmp_path_factory.mktemp("streamed")
    documents = _documents()
    third = len(documents) // 3
    text = "<|endoftext|>".join(documents).encode("utf-8")
    inputs: dict[str, list[Path]] = {}
    (directory / "a.txt.gz").write_bytes(gzip.compress(text[: len(text) // 2]))
    (directory / "b.txt").write_bytes(text[len(text) // 2 :])
    inputs["gzip text and text"] = [directory / "a.txt.gz", directory / "b.txt"]
    (directory / "docs.jsonl").write_bytes(_jsonl(documents))
    inputs["json lines"] = [directory / "docs.jsonl"]
    (directory / "mixed-0.jsonl.gz").write_bytes(gzip.compress(_jsonl(documents[:third])))
    (directory / "mixed-1.txt").write_bytes(text[:500])
    (directory / "mixed-2.jsonl").write_bytes(_jsonl(documents[third:]))
    inputs["mixed"] = [directory / name for name in ("mixed-0.jsonl.gz", "mixed-1.txt", "mixed-2.jsonl")]
    try:
        import pyarrow
        import pyarrow.parquet as parquet
    except ImportError:
        return inputs
    parquet.write_table(pyarrow.table({"text": documents}), directory / "docs.parquet", row_group_size=40)
    inputs["parquet"] = [directory / "docs.parquet"]
    inputs["parquet and json lines"] = [directory / "docs.parquet", directory / "mixed-2.jsonl"]
    return inputs


@pytest.mark.parametrize("kind", ["gzip text and text", "json lines", "mixed", "parquet", "parquet and json lines"])
@pytest.mark.parametrize("specials", [SPECIALS, []])
def test_streamed_formats_equal_the_local_count(client: Client, streamed_inputs, kind: str, specials: list[str]):
    from cs336_basics import count_words

    if kind not in streamed_inputs:
        pytest.skip("Parquet needs the optional pyarrow package")
    paths = streamed_inputs[kind]
    expected = count_words(paths, specials)
    # Small ranges and row groups: many tasks, each cut at a line or row group.
    counts = count_words_on_cluster(client, paths, specials, range_bytes=2_000, fan_in=2)
    assert counts == expected  # counts, special tokens and source bytes
    if specials:
        assert train_bpe_from_counts(counts, 300) == train_bpe_from_counts(expected, 300, trainer="bpe_v1")


@pytest.mark.parametrize("kind", ["gzip text and text", "json lines", "mixed", "parquet"])
def test_streamed_formats_as_urls(client: Client, streamed_inputs, kind: str) -> None:
    """Compressed files, JSON lines and Parquet given as URLs (file:// goes through fsspec) count as the
    local files do, here and on the cluster."""
    pytest.importorskip("fsspec", reason="URLs need fsspec")
    from cs336_basics import BPEInputError, count_words

    if kind not in streamed_inputs:
        pytest.skip("Parquet needs the optional pyarrow package")
    paths = streamed_inputs[kind]
    urls = [path.resolve().as_uri() for path in paths]
    expected = count_words(paths, SPECIALS)
    assert count_words(urls, SPECIALS) == expected
    assert count_words_on_cluster(client, urls, SPECIALS, range_bytes=2_000, fan_in=2) == expected
    missing = paths[0].resolve().with_name("missing.jsonl").as_uri()
    with pytest.raises(BPEInputError, match="not found: file://"):
        count_words([missing], SPECIALS)


def test_json_line_ranges_name_the_file_line_and_skip(client: Client, tmp_path: Path, capsys) -> None:
    from cs336_basics import BPEInputError, count_words

    lines = _jsonl(_documents()).splitlines(keepends=True)
    lines.insert(250, b"{broken\n")
    path = tmp_path / "docs.jsonl"
    path.write_bytes(b"".join(lines))
    with pytest.raises(Exception, match=r"docs.jsonl:251: not a JSON record"):
        count_words_on_cluster(client, [path], SPECIALS, range_bytes=1_000)
    counts = count_words_on_cluster(client, [path], SPECIALS, range_bytes=1_000, skip_bad_records=True)
    assert counts.skipped_records == 1 and "skipped 1 bad record" in capsys.readouterr().err
    assert counts == count_words(path, SPECIALS, skip_bad_records=True)
    with pytest.raises(BPEInputError, match="docs.jsonl:251"):
        count_words(path, SPECIALS)


def test_overlapping_special_tokens_count_as_one_task(client: Client, tmp_path: Path) -> None:
    """Special tokens that could match across a separator: the documents are counted in one task."""
    from cs336_basics import count_words
    from cs336_basics.ingest.cluster import documents_split_cleanly

    specials = ["<|e|>", "x<|e"]
    assert documents_split_cleanly(SPECIALS) and not documents_split_cleanly(specials)
    path = tmp_path / "docs.jsonl"
    path.write_bytes(_jsonl(["ax", "x", "<|e|>x", "b"] * 200))
    assert count_words_on_cluster(client, [path], specials, range_bytes=100) == count_words(path, specials)


TRACKER_CHILD = """
import sys
from multiprocessing import resource_tracker
from cs336_basics.ingest.cluster import _SigintIgnoredAtSpawn
if sys.argv[1] == "as the cluster starts it":
    with _SigintIgnoredAtSpawn():
        resource_tracker.ensure_running()
else:
    resource_tracker.ensure_running()
# What a worker killed inside a semaphore's finalizer leaves: a name registered, the semaphore already gone.
resource_tracker.register("/mp-cs336-already-unlinked", "semaphore")
"""


@pytest.mark.skipif(os.name != "posix", reason="multiprocessing's resource tracker runs on POSIX only")
def test_the_resource_tracker_started_with_the_workers_cleans_up_without_a_word() -> None:
    import subprocess
    import sys

    from tests.support import REPO_ROOT

    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}

    def stderr_of(how: str) -> str:
        run = subprocess.run(
            [sys.executable, "-c", TRACKER_CHILD, how], capture_output=True, text=True, env=environment
        )
        assert run.returncode == 0, run.stderr
        return run.stderr  # the tracker writes to it until it has cleaned up

    assert "leaked semaphore" in stderr_of("as multiprocessing starts it")  # the leak is real
    assert stderr_of("as the cluster starts it") == ""


def test_superbpe_counts_both_stages_on_the_cluster(corpus: tuple[Path, list[Path]], tmp_path: Path, capsys):
    from cs336_basics.commands.cli import main as train_main
    from cs336_basics.outputs.serialization import load_merges

    whole, parts = corpus
    out = tmp_path / "out"
    argv = ["auto", str(out), "-d", *map(str, parts), "--cluster", "local:2", "-v", "800", "--superbpe", "600", "-q"]
    assert train_main(argv) == 0
    assert "counted on local:2" in capsys.readouterr().out
    assert load_merges(out / "merges.txt") == train_bpe(whole, 800, SPECIALS, trainer=REFERENCE, superbpe=600)[1]
