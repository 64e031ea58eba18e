"""Count files and the Unicode version of the pattern's classes: a count records the version it was
made by (`--unicode` / `unicode=`, else the installed `regex`'s) and the file round-trips it; counts
of two versions do not add; training by another version is refused where the words hold a character
the two class differently (and trains where none does); a count file of format version 1 still loads,
its version not known; the Dask path counts by the client's version."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

from cs336_basics import WordCounts, count_words, train_bpe, train_bpe_from_counts, train_bpe_from_iterator
from cs336_basics.commands.cli import main as train_main
from cs336_basics.commands.count_cli import main as count_main
from cs336_basics.errors import BPEInputError
from cs336_basics.ingest.counting import count_words_from_iterator
from cs336_basics.ingest.word_counts import FORMAT_VERSION, MAGIC
from cs336_basics.outputs.serialization import load_merges
from cs336_basics.rules.pattern import TOOLS_UNICODE, UNICODE_VERSIONS, installed_unicode
from tests.test_unicode_versions import code_points_where, recent_documents

SPECIALS = ["<|endoftext|>"]
NEWEST = UNICODE_VERSIONS[0]
# A letter in the 18.0 table, in neither 16.0's nor 17.0's: the older tables split words at it.
RECENT_LETTER = "\U00018e86"


def recent_text(seed: int = 0) -> str:
    """Documents joined by the special token, their words holding characters 16.0 and the newest
    table class differently (U+18E86 among them)."""
    return SPECIALS[0].join([*recent_documents(seed), f"ab{RECENT_LETTER}cd x{RECENT_LETTER}y ab{RECENT_LETTER}cd"])


def as_format_version_1(data: bytes) -> bytes:
    """A format-version-2 count file's bytes as version 1 wrote them: no Unicode version, new CRC."""
    (pattern_length,) = struct.unpack_from("<I", data, 12)
    at = 16 + pattern_length
    (unicode_length,) = struct.unpack_from("<I", data, at)
    body = MAGIC + struct.pack("<I", 1) + data[12:at] + data[at + 4 + unicode_length : -4]
    return body + struct.pack("<I", zlib.crc32(body))


def test_the_sample_text_splits_otherwise_under_the_two_versions(tmp_path: Path) -> None:
    assert RECENT_LETTER in code_points_where(TOOLS_UNICODE, NEWEST)
    path = tmp_path / "text.txt"
    path.write_text(recent_text(), encoding="utf-8")
    tools = count_words(path, SPECIALS, unicode=TOOLS_UNICODE)
    assert tools.counts != count_words(path, SPECIALS, unicode=NEWEST).counts


@pytest.mark.parametrize("unicode", UNICODE_VERSIONS)
def test_a_count_file_records_its_version_and_round_trips(tmp_path: Path, unicode: str) -> None:
    path = tmp_path / "text.txt"
    path.write_text(recent_text(), encoding="utf-8")
    counts = count_words(path, SPECIALS, unicode=unicode)
    assert counts.unicode == unicode
    saved = counts.save(tmp_path / "c.bin")
    assert struct.unpack_from("<I", saved.read_bytes(), 8) == (FORMAT_VERSION,) != (1,)
    loaded = WordCounts.load(saved)
    assert loaded.unicode == unicode
    assert loaded == counts
    assert loaded.to_bytes() == saved.read_bytes()
    # Without one, counting takes the installed regex's, as training does, and says which.
    assert count_words(path, SPECIALS).unicode == installed_unicode()
    assert count_words_from_iterator(["a b"], unicode=unicode).unicode == unicode


def test_counting_by_the_tools_version_then_training_like_hf_is_hf_on_the_text(tmp_path: Path, capsys) -> None:
    path = tmp_path / "text.txt"
    path.write_text(recent_text(1), encoding="utf-8")
    expected = train_bpe(path, 420, SPECIALS, like="hf")
    counts = tmp_path / "c.bin"
    assert count_main([str(path), "-o", str(counts), "--unicode", TOOLS_UNICODE, "-q"]) == 0
    assert f"{TOOLS_UNICODE}'s character classes" in capsys.readouterr().out or installed_unicode() == TOOLS_UNICODE
    assert train_bpe_from_counts(counts, 420, like="hf") == expected
    out = tmp_path / "out"
    assert train_main(["auto", str(out), "--counts", str(counts), "-v", "420", "--like", "hf", "-q"]) == 0
    assert load_merges(out / "merges.txt") == expected[1]


def test_counting_documents_by_the_tools_version_then_training_like_rustbpe_is_rustbpe_on_them() -> None:
    documents = recent_documents(2)
    counts = count_words_from_iterator(documents, [], pattern="rustbpe", unicode=TOOLS_UNICODE)
    expected = train_bpe_from_iterator(documents, 400, [], like="rustbpe")
    assert train_bpe_from_counts(counts, 400, like="rustbpe") == expected


def test_training_by_another_version_is_refused_naming_both(tmp_path: Path, capsys) -> None:
    path = tmp_path / "text.txt"
    path.write_text(recent_text(), encoding="utf-8")
    counts = count_words(path, SPECIALS, unicode=NEWEST)
    with pytest.raises(BPEInputError, match=rf"Unicode {NEWEST}'s .*like='hf'.* Unicode {TOOLS_UNICODE}'s") as refused:
        train_bpe_from_counts(counts, 400, like="hf")
    assert str(refused.value).endswith(f"count again with --unicode {TOOLS_UNICODE}")
    with pytest.raises(BPEInputError, match=f"--unicode {TOOLS_UNICODE}, or train with --unicode {NEWEST}$"):
        train_bpe_from_counts(counts, 400, unicode=TOOLS_UNICODE)
    counts.save(tmp_path / "c.bin")
    out = tmp_path / "out"
    assert train_main(["auto", str(out), "--counts", str(tmp_path / "c.bin"), "-v", "400", "--like", "hf"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and f"Unicode {NEWEST}'s" in error and f"Unicode {TOOLS_UNICODE}'s" in error
    assert not out.exists()
    # Without --unicode or --like, training takes the counts' version, as it takes their pattern.
    assert train_bpe_from_counts(counts, 400) == train_bpe(path, 400, SPECIALS, unicode=NEWEST)


def test_counts_by_the_installed_regex_are_not_trained_like_hf_silently(tmp_path: Path) -> None:
    if installed_unicode() == TOOLS_UNICODE:
        pytest.skip(f"the installed regex classes by Unicode {TOOLS_UNICODE}, as the tools do")
    path = tmp_path / "text.txt"
    path.write_text(recent_text(3), encoding="utf-8")
    counts = count_words(path, SPECIALS)  # no unicode: the installed regex's
    try:
        trained = train_bpe_from_counts(counts, 400, like="hf")
    except BPEInputError as refused:
        assert f"--unicode {TOOLS_UNICODE}" in str(refused)
    else:
        assert trained == train_bpe(path, 400, SPECIALS, like="hf")


def test_another_version_trains_where_the_words_split_alike(tmp_path: Path) -> None:
    path = tmp_path / "text.txt"
    path.write_text("héllo wörld, naïve 12 façade\n" * 50 + SPECIALS[0] + "ünïcode ok" * 20, encoding="utf-8")
    counts = count_words(path, SPECIALS, unicode=NEWEST)
    assert counts.first_classed_otherwise(TOOLS_UNICODE) is None
    assert train_bpe_from_counts(counts, 300, like="hf") == train_bpe(path, 300, SPECIALS, like="hf")


def test_counts_of_two_versions_do_not_add() -> None:
    other = next(version for version in UNICODE_VERSIONS if version != TOOLS_UNICODE)
    with pytest.raises(BPEInputError, match=f"different Unicode versions: {TOOLS_UNICODE} and {other}"):
        WordCounts({b"a": 1}, unicode=TOOLS_UNICODE) + WordCounts({b"a": 1}, unicode=other)
    assert (WordCounts({}) + WordCounts({b"a": 1}, unicode=other)).unicode == other  # an empty start takes it
    assert (WordCounts({b"b": 1}) + WordCounts({b"a": 1}, unicode=other)).unicode is None  # one not known


def test_a_format_version_1_file_loads_its_version_not_known(tmp_path: Path) -> None:
    plain = tmp_path / "plain.txt"
    plain.write_text("hello world, the old counts\n" * 40, encoding="utf-8")
    old = tmp_path / "old.bin"
    old.write_bytes(as_format_version_1(count_words(plain, SPECIALS).to_bytes()))
    loaded = WordCounts.load(old)
    assert loaded.unicode is None
    assert loaded.counts == count_words(plain, SPECIALS).counts
    # Words no two tables class differently train by any version.
    assert train_bpe_from_counts(old, 280, like="hf") == train_bpe(plain, 280, SPECIALS, like="hf")

    recent = tmp_path / "recent.txt"
    recent.write_text(recent_text(), encoding="utf-8")
    old.write_bytes(as_format_version_1(count_words(recent, SPECIALS, unicode=TOOLS_UNICODE).to_bytes()))
    with pytest.raises(BPEInputError, match=f"do not record .*count again with --unicode {TOOLS_UNICODE}$"):
        train_bpe_from_counts(old, 400, like="hf")


def test_the_cluster_counts_by_the_clients_version(tmp_path: Path) -> None:
    pytest.importorskip("distributed", reason="Dask is an optional extra: pip install -e '.[cluster]'")
    from distributed import Client, LocalCluster

    from cs336_basics.ingest.cluster import count_words_on_cluster

    path = tmp_path / "text.txt"
    path.write_text(recent_text(), encoding="utf-8")
    documents = tmp_path / "docs.jsonl"
    documents.write_text("".join(f'{{"text": "{line}"}}\n' for line in recent_documents(4)), encoding="utf-8")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster:
        with Client(cluster) as client:
            for source in (path, documents):
                for unicode in (TOOLS_UNICODE, NEWEST):
                    counts = count_words_on_cluster(client, [source], SPECIALS, task_bytes=4_000, unicode=unicode)
                    assert counts == count_words(source, SPECIALS, unicode=unicode)
                    assert counts.unicode == unicode
            assert count_words_on_cluster(client, [path], SPECIALS).unicode == installed_unicode()
