"""Chunk boundaries: counting the chunks separately must give exactly the counts of the whole."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from cs336_basics.rules.splitting import count_words_in_text, find_chunk_boundaries

PIECES = ["word", " word", "w0rd", "42", " ", "  ", "\n", "\n\n", " \n", "é", "中", "'s", "!!", "\t", "\u3000",
          "<|endoftext|>", "<|endoftext|><|endoftext|>", "<|end"]
SPECIALS = [[], ["<|endoftext|>"], ["<|endoftext|>", "<|endoftext|><|endoftext|>"], ["d\n"]]


def chunked_counts(data: bytes, num_chunks: int, special_tokens: list[str]) -> tuple[Counter, list[int]]:
    boundaries = find_chunk_boundaries(data, num_chunks, special_tokens)
    total: Counter = Counter()
    for start, end in zip(boundaries[:-1], boundaries[1:]):
        total.update(count_words_in_text(data[start:end].decode("utf-8"), special_tokens))
    return total, boundaries


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(st.sampled_from(PIECES), min_size=1, max_size=200),
    special_tokens=st.sampled_from(SPECIALS),
    num_chunks=st.integers(min_value=1, max_value=40),
)
def test_chunks_count_like_the_whole(pieces: list[str], special_tokens: list[str], num_chunks: int) -> None:
    data = "".join(pieces).encode("utf-8")
    counts, boundaries = chunked_counts(data, num_chunks, special_tokens)
    assert counts == count_words_in_text(data.decode("utf-8"), special_tokens)
    assert boundaries[0] == 0 and boundaries[-1] == len(data)
    assert boundaries == sorted(set(boundaries))
    assert len(boundaries) - 1 <= num_chunks


def test_text_without_special_tokens_is_still_cut() -> None:
    data = ("The cat sat on the mat. " * 10_000).encode()
    _, boundaries = chunked_counts(data, 8, ["<|endoftext|>"])
    assert len(boundaries) == 9


def test_special_token_boundaries_are_preferred() -> None:
    data = ("a story of some length\n<|endoftext|>" * 1000).encode()
    boundaries = find_chunk_boundaries(data, 5, ["<|endoftext|>"])
    assert all(data.startswith(b"<|endoftext|>", cut) for cut in boundaries[1:-1])


def test_text_with_no_safe_cut_stays_whole() -> None:
    data = ("中文" * 5000).encode()
    assert find_chunk_boundaries(data, 8, []) == [0, len(data)]
