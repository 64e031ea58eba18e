"""The tie-break rules (cs336_basics/rules/tie_break.py) in every version's merge loop: each version gives
bpe_v1's merges under every rule, on one thread and on bpe_v7's threads."""

from __future__ import annotations

import functools
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cs336_basics import bpe_v1, bpe_v4
from cs336_basics.native.backend import pure_python_forced
from cs336_basics.outputs.serialization import gpt2_bytes_to_unicode
from cs336_basics.phases import MergeRules
from cs336_basics.rules.contract import BPEInputError
from cs336_basics.rules.tie_break import CS336, HF, SMALLEST_ID, TIE_BREAKS, TieBreak
from cs336_basics.trainers import load_trainer

WordCounts = dict[bytes, int]

# Alphabets whose bytes rank differently under each rule: letters, bytes HF puts after every printable
# one (space, NUL, DEL, 0x80, 0xAD), and high bytes (a signed comparison would misplace them).
ALPHABETS = [b"ab", b"abc", b"a \x00!\x7f\x80\xad\xff", b"etaoin \n", bytes(range(256))]


@st.composite
def word_counts(draw: st.DrawFn) -> WordCounts:
    alphabet = list(draw(st.sampled_from(ALPHABETS)))
    symbols = st.sampled_from(alphabet)
    words = st.one_of(
        st.lists(symbols, min_size=1, max_size=12).map(bytes),
        # Repeated symbols: runs ("aaaa") and repeated units ("ababab"), where occurrences overlap.
        st.builds(
            lambda unit, times: bytes(unit) * times, st.lists(symbols, min_size=1, max_size=3), st.integers(2, 6)
        ),
    )
    # Ties galore: every word the same count, or a few small counts; sometimes counts past 32 bits.
    counts = draw(
        st.sampled_from(
            [st.just(1), st.just(7), st.integers(1, 3), st.integers(1, 2**40), st.sampled_from([0, 1, 2**33])]
        )
    )
    return draw(st.dictionaries(words, counts, max_size=30))


def merge_of(trainer: str):
    return load_trainer(trainer).merge


# `trainer` only names the version, so it need not be reset between examples.
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(counts=word_counts(), num_merges=st.integers(0, 50), tie_break=st.sampled_from(TIE_BREAKS))
def test_every_version_gives_the_oracles_merges_under_every_rule(
    trainer: str, counts: WordCounts, num_merges: int, tie_break: str
) -> None:
    expected = bpe_v1.merge(counts, num_merges, rules=MergeRules(tie_break))
    assert merge_of(trainer)(counts, num_merges, rules=MergeRules(tie_break)) == expected


@pytest.mark.parametrize("tie_break", TIE_BREAKS)
def test_many_equal_counts(trainer: str, tie_break: str) -> None:
    # 400 words of count 1 over a few letters: nearly every merge is a tie among many pairs.
    rng = random.Random(17)
    counts = {bytes(rng.choices(b"ab \x80xyz", k=rng.randint(2, 9))): 1 for _ in range(400)}
    expected = bpe_v1.merge(counts, 120, rules=MergeRules(tie_break))
    assert merge_of(trainer)(counts, 120, rules=MergeRules(tie_break)) == expected


# Known answers, checkable by hand.


def test_three_rules_three_first_merges(trainer: str) -> None:
    # Every pair counts 1. cs336 takes the greatest bytes, (z, z); smallest-id the smallest byte
    # values, (" " = 32, a = 97); hf the smallest in HF's order, where the space (a byte-level
    # character past U+00FF, "Ġ") comes after every letter: (a, b), then (z, z).
    counts = {b"ab": 1, b" a": 1, b"zz": 1}
    merge = merge_of(trainer)
    assert merge(counts, 3) == [(b"z", b"z"), (b"a", b"b"), (b" ", b"a")]
    assert merge(counts, 3, rules=MergeRules(CS336)) == [(b"z", b"z"), (b"a", b"b"), (b" ", b"a")]
    assert merge(counts, 3, rules=MergeRules(SMALLEST_ID)) == [(b" ", b"a"), (b"a", b"b"), (b"z", b"z")]
    assert merge(counts, 3, rules=MergeRules(HF)) == [(b"a", b"b"), (b"z", b"z"), (b" ", b"a")]


def test_every_byte_in_the_rules_order(trainer: str) -> None:
    # One word per byte, that byte twice, each counted once: 256 tied pairs, merged in the order
    # the rule ranks the bytes.
    counts = {bytes([byte, byte]): 1 for byte in range(256)}
    characters = gpt2_bytes_to_unicode()
    orders = {
        CS336: sorted(range(256), reverse=True),
        SMALLEST_ID: list(range(256)),
        HF: sorted(range(256), key=lambda byte: characters[byte]),  # by code point
    }
    for tie_break, order in orders.items():
        expected = [(bytes([byte]), bytes([byte])) for byte in order]
        assert merge_of(trainer)(counts, 256, rules=MergeRules(tie_break)) == expected, tie_break


def test_merged_tokens_rank_by_their_ids(trainer: str) -> None:
    # (a, b) first (count 3); then (ab, c), (c, a) and (x, y) tie at 1. By id the merged token
    # (256) ranks after every byte: (c, a) and (x, y) go first; cs336 compares bytes: x > c > ab.
    counts = {b"ab": 2, b"abc": 1, b"ca": 1, b"xy": 1}
    merge = merge_of(trainer)
    assert merge(counts, 4, rules=MergeRules(CS336)) == [(b"a", b"b"), (b"x", b"y"), (b"c", b"a"), (b"ab", b"c")]
    assert merge(counts, 4, rules=MergeRules(SMALLEST_ID)) == [(b"a", b"b"), (b"c", b"a"), (b"x", b"y"), (b"ab", b"c")]
    assert merge(counts, 4, rules=MergeRules(HF)) == [(b"a", b"b"), (b"c", b"a"), (b"x", b"y"), (b"ab", b"c")]


def test_the_rule_is_checked(trainer: str) -> None:
    merge = merge_of(trainer)
    with pytest.raises(BPEInputError, match="smallest-id"):
        merge({b"ab": 1}, 1, rules=MergeRules("largest-id"))
    assert merge({b"ab": 1, b"ba": 1}, 2, rules=MergeRules(None)) == merge({b"ab": 1, b"ba": 1}, 2)  # None: cs336


# bpe_v7's threads: every merge on the threads (parallel_words=0), the initial pairs counted on as
# many as the words allow.


def native_or_skip():
    if pure_python_forced():
        pytest.skip("CS336_PURE_PYTHON is set: no native code is loaded")
    return pytest.importorskip("cs336_basics.native._count_cpp", reason="the native extension is not built")


THREADS = [1, 2, 3, 7]


@pytest.mark.parametrize("num_threads", THREADS)
@settings(max_examples=60, deadline=None)
@given(counts=word_counts(), num_merges=st.integers(0, 50), tie_break=st.sampled_from(TIE_BREAKS))
def test_threads_give_the_oracles_merges_under_every_rule(
    num_threads: int, counts: WordCounts, num_merges: int, tie_break: str
) -> None:
    native_or_skip()
    from cs336_basics.native import _merge_cpp

    got = _merge_cpp.merge(counts, num_merges, num_threads=num_threads, parallel_words=0, rules=MergeRules(tie_break))
    assert got == bpe_v1.merge(counts, num_merges, rules=MergeRules(tie_break))


def random_text(seed: int, num_words: int) -> bytes:
    rng = random.Random(seed)
    return " ".join("".join(rng.choices("abcdeé", k=rng.randint(1, 8))) for _ in range(num_words)).encode()


# Over 30,000 distinct words of few letters, so that each of 7 threads counts a share of the initial
# pairs (4,096 words each at least); many merges are ties.
MANY_WORDS = random_text(23, 60_000)


@functools.cache
def python_merges(tie_break: str) -> list[tuple[bytes, bytes]]:
    # bpe_v4 is the reference here (bpe_v1 would take minutes); the tests above hold it to bpe_v1.
    native = native_or_skip()
    return bpe_v4.merge(native.count_words_in_buffer(MANY_WORDS, [], 1).to_dict(), 300, rules=MergeRules(tie_break))


@pytest.mark.parametrize("num_threads", THREADS)
@pytest.mark.parametrize("tie_break", TIE_BREAKS)
def test_threads_on_native_counts_under_every_rule(num_threads: int, tie_break: str) -> None:
    native = native_or_skip()
    counts = native.count_words_in_buffer(MANY_WORDS, [], num_threads)
    expected = python_merges(tie_break)
    assert counts.merge(300, parallel_words=0, rules=MergeRules(tie_break)) == expected
    assert counts.merge(300, parallel_words=0, prune_pairs=20, rules=MergeRules(tie_break)) == expected


def test_native_counts_check_the_rule() -> None:
    native = native_or_skip()
    counts = native.count_words_in_buffer(b"ab ab", [], 1)
    with pytest.raises(BPEInputError, match="tie_break"):
        MergeRules("HF")  # a name no row has: refused where the rules are made
    not_native = TieBreak("by-value", "a rule the C++ loop does not have", tuple(range(256)), native=False)
    with pytest.raises(ValueError, match="no rule in the C\\+\\+ merge loop"):
        counts.merge(1, rules=MergeRules(not_native), release_words=True)
    assert not counts.released  # refused before the words were loaded
    with pytest.raises(TypeError, match="MergeRules"):
        counts.merge(1, rules="hf")
    assert counts.merge(1, rules=MergeRules(HF)) == [(b"a", b"b")]
