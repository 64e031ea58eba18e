"""scripts/make_corpus.py: the benchmark corpora are reproducible from the repository alone."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import pytest

from tests.support import REPO_ROOT

spec = importlib.util.spec_from_file_location("make_corpus", REPO_ROOT / "scripts" / "make_corpus.py")
make_corpus = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make_corpus)

SIZE = 200_000


def generate(tmp_path: Path, profile: str, seed: int, name: str = "corpus.txt") -> bytes:
    path = tmp_path / name
    assert make_corpus.main([str(path), "--profile", profile, "--size", str(SIZE), "--seed", str(seed)]) == 0
    return path.read_bytes()


@pytest.mark.parametrize("profile", ["tinystories", "owt"])
def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path: Path, profile: str) -> None:
    first = generate(tmp_path, profile, 1, "a.txt")
    assert generate(tmp_path, profile, 1, "b.txt") == first
    assert generate(tmp_path, profile, 2, "c.txt") != first


@pytest.mark.parametrize("profile", ["tinystories", "owt"])
def test_whole_documents_up_to_the_size(tmp_path: Path, profile: str) -> None:
    data = generate(tmp_path, profile, 0)
    text = data.decode("utf-8")  # valid UTF-8 throughout
    assert len(data) >= SIZE and text.endswith("\n<|endoftext|>\n")
    documents = text.split("<|endoftext|>\n")[:-1]
    last = len(documents[-1].encode("utf-8")) + len("<|endoftext|>\n")
    assert len(data) - last < SIZE  # stopped at the first boundary past the size
    assert all(document.strip() and "<|" not in document for document in documents)


def test_profiles_differ_as_the_datasets_do(tmp_path: Path) -> None:
    stories = generate(tmp_path, "tinystories", 0, "stories.txt").decode("utf-8")
    web = generate(tmp_path, "owt", 0, "web.txt").decode("utf-8")
    story_words, web_words = set(stories.split()), set(web.split())
    assert len(web_words) > 5 * len(story_words)  # OWT's vocabulary is far wider
    assert stories.count("<|endoftext|>") > 3 * web.count("<|endoftext|>")  # and its documents longer
    assert any(ord(char) > 127 for char in web) and any(char.isdigit() for char in web)


@pytest.mark.parametrize(
    ("text", "size"), [("500K", 500_000), ("2.2G", 2_200_000_000), ("10mb", 10_000_000), ("123", 123)]
)
def test_sizes(text: str, size: int) -> None:
    assert make_corpus.parse_size(text) == size


@pytest.mark.parametrize("text", ["", "0", "-5M", "2T", "lots"])
def test_bad_sizes(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        make_corpus.parse_size(text)
