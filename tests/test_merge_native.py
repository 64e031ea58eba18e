"""The compiled merge loops (bpe_v5's Cython, the C++ loop on one thread as bpe_v6 runs it and on
several threads as bpe_v7 runs it) against a tiny reference, on the cases where a compiled loop goes
wrong and Python cannot: 64-bit counts, byte order in ties, overlapping runs, running out of pairs,
and the progress callback."""

from __future__ import annotations

import functools
import random
from collections import Counter
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cs336_basics import bpe_v1, bpe_v4
from cs336_basics.native.backend import effective_num_threads, pure_python_forced
from cs336_basics.trainers import load_trainer
from tests.support import greedy_merges

MergeFunction = Callable[..., list[tuple[bytes, bytes]]]


def reference_merges(word_counts: dict[bytes, int], num_merges: int) -> list[tuple[bytes, bytes]]:
    """The definition, on bytes tokens: `max` over (count, (left, right)) is exactly the CS336 rule."""
    words: Counter[tuple[bytes, ...]] = Counter()
    for word, count in word_counts.items():
        if count > 0:
            words[tuple(bytes([byte]) for byte in word)] += count
    return greedy_merges(words, num_merges)


# The C++ loop's threads: every merge, however few words it touches, takes the parallel path.
PARALLEL_EVERYWHERE = {"num_threads": 2, "parallel_words": 0}


@pytest.fixture(
    params=[("_merge_cy", {}), ("_merge_cpp", {}), ("_merge_cpp", PARALLEL_EVERYWHERE)],
    ids=["bpe_v5-cython", "bpe_v6-cpp", "bpe_v7-cpp-threads"],
)
def native_merge(request: pytest.FixtureRequest) -> MergeFunction:
    if pure_python_forced():
        pytest.skip("CS336_PURE_PYTHON is set: compiled code is not loaded")
    name, options = request.param
    module = pytest.importorskip(
        f"cs336_basics.native.{name}", reason=f"native.{name} is not built (pip install -e . with a C++ compiler)"
    )
    return functools.partial(module.merge, **options)


def check(native_merge: MergeFunction, word_counts: dict[bytes, int], num_merges: int) -> list[tuple[bytes, bytes]]:
    got = native_merge(word_counts, num_merges)
    assert got == reference_merges(word_counts, num_merges)
    return got


# (a) counts past 2^31 and 2^32: a 32-bit count would wrap and pick another pair.


def test_counts_beyond_32_bits(native_merge: MergeFunction) -> None:
    word_counts = {b"ab": 2**31 + 5, b"abc": 2**33, b"xy": 3, b"yz": 2**32 + 1, b"zq": 2}
    merges = check(native_merge, word_counts, 10)
    assert merges[:2] == [(b"a", b"b"), (b"ab", b"c")]  # 2^33 + 2^31 + 5, then 2^33
    assert (b"y", b"z") in merges


def test_counts_up_to_the_int64_limit(native_merge: MergeFunction) -> None:
    assert native_merge({b"ab": 2**62, b"cab": 2**62 - 1}, 1) == [(b"a", b"b")]  # (a, b): 2^63 - 1
    with pytest.raises(OverflowError, match="64 bits"):
        native_merge({b"ab": 2**64}, 1)


# (b) ties decided only by the byte order of (left, right).


@pytest.mark.parametrize(
    ("word_counts", "expected"),
    [
        # Unsigned bytes: 0x80 > 0x7f (a signed char comparison says the opposite).
        ({b"\x80a": 1, b"\x7fa": 1}, [(b"\x80", b"a"), (b"\x7f", b"a")]),
        ({b"a\xff": 1, b"a\x01": 1}, [(b"a", b"\xff"), (b"a", b"\x01")]),
        # Left tokens b"a" and b"ab" tie on (., b"x"): a proper prefix is smaller, so b"ab" wins.
        ({b"ab": 10, b"abx": 1, b"ax": 1}, [(b"a", b"b"), (b"ab", b"x"), (b"a", b"x")]),
        # The same on the right: b"ab" > b"a".
        ({b"ab": 10, b"xab": 1, b"xa": 1}, [(b"a", b"b"), (b"x", b"ab"), (b"x", b"a")]),
        # b"a\x00" > b"a": a real zero byte is not the end of the token.
        ({b"a\x00": 10, b"a\x00z": 1, b"az": 1}, [(b"a", b"\x00"), (b"a\x00", b"z"), (b"a", b"z")]),
        # The left tokens tie, so the right ones decide.
        ({b"ca": 1, b"cb": 1, b"c\x80": 1}, [(b"c", b"\x80"), (b"c", b"b"), (b"c", b"a")]),
    ],
)
def test_ties_go_to_the_greatest_byte_pair(
    native_merge: MergeFunction, word_counts: dict[bytes, int], expected: list[tuple[bytes, bytes]]
) -> None:
    assert check(native_merge, word_counts, len(expected)) == expected


def test_ties_between_long_tokens_that_differ_after_eight_bytes(native_merge: MergeFunction) -> None:
    stem = b"abcdefghij"  # longer than any fixed-width prefix a fast comparison might use
    word_counts = {stem + b"\x80" + b"z": 100, stem + b"\x7f" + b"z": 100, stem + b"\x80": 7, stem + b"\x7f": 7}
    merges = check(native_merge, word_counts, 40)
    assert (stem + b"\x80", b"z") in merges


# (c) overlapping runs merge left to right without overlap.


@pytest.mark.parametrize(
    ("word_counts", "expected"),
    [
        ({b"aaa": 1}, [(b"a", b"a"), (b"aa", b"a")]),
        ({b"aaaa": 1}, [(b"a", b"a"), (b"aa", b"aa")]),
        ({b"aaaaa": 1}, [(b"a", b"a"), (b"aa", b"aa"), (b"aaaa", b"a")]),
        # "a ba ba ba": (ba, ba) occurs twice, overlapping, and merges once.
        ({b"abababa": 1}, [(b"b", b"a"), (b"ba", b"ba"), (b"baba", b"ba"), (b"a", b"bababa")]),
    ],
)
def test_overlapping_runs(
    native_merge: MergeFunction, word_counts: dict[bytes, int], expected: list[tuple[bytes, bytes]]
) -> None:
    assert check(native_merge, word_counts, 10) == expected


def test_runs_mixed_with_other_words(native_merge: MergeFunction) -> None:
    check(native_merge, {b"aaaaaaa": 3, b"abab": 2, b"bababab": 1, b"aab": 5, b"baa": 4}, 30)


# (d) fewer merges when no pair is left.


@pytest.mark.parametrize(
    ("word_counts", "expected_length"),
    [({}, 0), ({b"a": 5, b"b": 1}, 0), ({b"abc": 1, b"d": 5}, 2), ({b"ab": 0, b"cd": 1}, 1)],
)
def test_stops_when_no_pair_is_left(
    native_merge: MergeFunction, word_counts: dict[bytes, int], expected_length: int
) -> None:
    assert len(check(native_merge, word_counts, 100)) == expected_length


def test_zero_merges(native_merge: MergeFunction) -> None:
    assert native_merge({b"abc": 3}, 0) == []


# (e) the progress callback.


def test_progress_adds_up_to_the_merges_done(native_merge: MergeFunction) -> None:
    word_counts = {bytes(random.Random(seed).choices(b"abcdefgh", k=40)): seed + 1 for seed in range(30)}
    reports: list[int] = []
    merges = native_merge(word_counts, 450, reports.append)
    assert len(merges) == 450
    assert sum(reports) == 450
    assert len(reports) > 1 and all(report > 0 for report in reports)

    reports.clear()
    assert len(native_merge({b"abc": 1}, 100, reports.append)) == 2  # ran out of pairs
    assert sum(reports) == 2


def test_an_error_in_progress_propagates(native_merge: MergeFunction) -> None:
    def fail(done: int) -> None:
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        native_merge({b"abcdefgh": 1}, 5, fail)


# Bad input.


@pytest.mark.parametrize(
    ("word_counts", "num_merges", "error"),
    [
        ({"ab": 1}, 1, TypeError),
        ({b"ab": 1.5}, 1, TypeError),
        ({b"ab": -1}, 1, ValueError),
        ({b"ab": 1}, -1, ValueError),
        ({b"ab": 1}, True, ValueError),
    ],
)
def test_bad_input(native_merge: MergeFunction, word_counts: dict, num_merges: int, error: type) -> None:
    with pytest.raises(error):
        native_merge(word_counts, num_merges)


# Broad agreement: random words with few letters (many ties), high and zero bytes, long tokens.


@pytest.mark.parametrize("seed", range(40))
def test_random_words_match_the_reference(native_merge: MergeFunction, seed: int) -> None:
    rng = random.Random(seed)
    alphabet = rng.choice([b"ab", b"abc", b"a\x00\x7f\x80\xff", bytes(range(256))])
    word_counts = {
        bytes(rng.choices(alphabet, k=rng.randint(1, 16))): rng.choice([1, 2, 3, rng.randint(1, 2**40)])
        for _ in range(rng.randint(0, 15))
    }
    check(native_merge, word_counts, rng.randint(0, 80))


def test_many_words_match_the_python_versions(native_merge: MergeFunction) -> None:
    rng = random.Random(2024)
    word_counts: Counter[bytes] = Counter()
    for _ in range(3000):
        word_counts[bytes(rng.choices(b"etaoinshrd\x80\xff", k=rng.randint(1, 12)))] += rng.choice([1, 1, 2, 30])
    expected = bpe_v4.merge(dict(word_counts), 800)
    assert native_merge(word_counts, 800) == expected  # any Mapping, here a Counter
    assert bpe_v1.merge(dict(word_counts), 60) == expected[:60]


@pytest.mark.parametrize("trainer", ["bpe_v5", "bpe_v6", "bpe_v7"])
def test_trainer_modules_report_every_merge(trainer: str) -> None:
    if pure_python_forced():
        pytest.skip("CS336_PURE_PYTHON is set: compiled code is not loaded")
    module = load_trainer(trainer)
    word_counts = {b"hello": 3, b" world": 2, b"lol": 1}
    expected = reference_merges(word_counts, 20)
    assert module.merge(word_counts, 20) == expected
    reports: list[int] = []
    assert module.merge(word_counts, 20, reports.append) == expected
    assert sum(reports) == len(expected)


@pytest.mark.parametrize("num_threads", [1, 2, 3])
def test_initial_pairs_counted_on_several_threads_give_the_same_merges(num_threads: int) -> None:
    # bpe_v7 counts the initial pairs on its threads (a few thousand words per thread at least):
    # 20,000 distinct words give every thread a share.
    if pure_python_forced():
        pytest.skip("CS336_PURE_PYTHON is set: no native code is loaded")
    native = pytest.importorskip("cs336_basics.native._count_cpp", reason="the native extension is not built")
    rng = random.Random(7)
    text = " ".join(
        "".join(rng.choices("etaoinshrdlucmé", k=rng.randint(1, 9))) for _ in range(60_000)
    ).encode()
    counts = native.count_words_in_buffer(text, [], num_threads)
    assert len(counts) > 3 * 4096 and counts.num_threads == effective_num_threads(num_threads)
    assert counts.merge(400) == bpe_v4.merge(counts.to_dict(), 400)


# (c) pruning: the C++ loop stops tracking pairs that count too little to be merged once its pair
# table is large, and counts every pair again if that ever proves wrong. A tiny table limit makes
# small inputs prune after nearly every merge and recount often.


@pytest.mark.parametrize("threads", [{}, PARALLEL_EVERYWHERE], ids=["one-thread", "threads"])
@pytest.mark.parametrize("prune_pairs", [0, 1, 6, 40])
@pytest.mark.parametrize("seed", range(25))
def test_pruning_never_changes_the_merges(seed: int, prune_pairs: int, threads: dict) -> None:
    if pure_python_forced():
        pytest.skip("CS336_PURE_PYTHON is set: compiled code is not loaded")
    merge_cpp = pytest.importorskip("cs336_basics.native._merge_cpp", reason="the native merge loop is not built")
    rng = random.Random(seed)
    alphabet = rng.choice([b"ab", b"abcd", b"etaoin\x00\xff"])
    word_counts = {
        bytes(rng.choices(alphabet, k=rng.randint(1, 14))): rng.choice([1, 1, 2, 5, rng.randint(1, 3000)])
        for _ in range(rng.randint(1, 60))
    }
    num_merges = rng.randint(1, 120)
    assert merge_cpp.merge(word_counts, num_merges, prune_pairs=prune_pairs, **threads) == reference_merges(
        word_counts, num_merges
    )


def random_native_counts(seed: int, num_words: int):
    """Native counts (two threads) of `num_words` random words of up to 8 letters; skips the test
    without the native extension."""
    if pure_python_forced():
        pytest.skip("CS336_PURE_PYTHON is set: no native code is loaded")
    native = pytest.importorskip("cs336_basics.native._count_cpp", reason="the native extension is not built")
    rng = random.Random(seed)
    text = " ".join("".join(rng.choices("etaoinshrd", k=rng.randint(1, 8))) for _ in range(num_words))
    return native.count_words_in_buffer(text.encode(), [], 2)


def test_pruning_on_native_word_counts() -> None:
    counts = random_native_counts(11, 5_000)
    expected = bpe_v4.merge(counts.to_dict(), 300)
    assert counts.merge(300, prune_pairs=50) == expected
    with pytest.raises(ValueError, match="prune_pairs"):
        counts.merge(3, prune_pairs=-1)


@pytest.mark.parametrize("num_merges", [0, 200])
def test_native_word_counts_freed_once_loaded(num_merges: int) -> None:
    # release_words=True frees the counts once the merge loop holds the words: the same merges, and
    # the spent object refuses any further use instead of looking empty.
    counts = random_native_counts(12, 3_000)
    expected = counts.merge(num_merges)
    with pytest.raises(ValueError, match="num_merges"):
        counts.merge(-1, release_words=True)  # refused before loading: the words stay
    assert not counts.released
    assert counts.merge(num_merges, release_words=True) == expected
    assert counts.released
    for use in (len, lambda c: c.to_dict(), lambda c: c.merge(1), lambda c: c.total_count(), lambda c: c.to_arrays()):
        with pytest.raises(ValueError, match="release_words"):
            use(counts)


def test_native_word_counts_spent_when_progress_stops_the_loop() -> None:
    counts = random_native_counts(12, 3_000)

    def stop(_merges_done: int) -> None:
        raise RuntimeError("stopped")

    with pytest.raises(RuntimeError, match="stopped"):
        counts.merge(200, stop, release_words=True)
    assert counts.released  # the loop had loaded (and freed) the words before it stopped


def test_held_words_come_only_from_native_word_counts() -> None:
    # The merge binding borrows a NativeWordCounts' table through a named capsule; anything else is
    # refused before the loop reads memory through it.
    random_native_counts(13, 10)  # skips when the extension is not built
    import datetime

    from cs336_basics.native import _merge_cpp

    arguments = (5, None, 1, None, None, False, "cs336", None, None, None)
    # datetime's C API is a capsule under another name.
    for impostor in (b"ab", None, {b"ab": 1}, datetime.datetime_CAPI):
        with pytest.raises((ValueError, TypeError)):
            _merge_cpp.merge_held_words(impostor, *arguments)


# (f) the threads: each merge's words rewritten in shares, the count changes applied side by side.


def native_or_skip():
    if pure_python_forced():
        pytest.skip("CS336_PURE_PYTHON is set: no native code is loaded")
    return pytest.importorskip("cs336_basics.native._count_cpp", reason="the native extension is not built")


@pytest.mark.parametrize("parallel_words", [0, 64])  # 0: every merge on the threads
def test_merges_do_not_depend_on_the_thread_count(parallel_words: int) -> None:
    native = native_or_skip()
    rng = random.Random(5)
    text = " ".join(
        "".join(rng.choices("etaoinshrdlucmé", k=rng.randint(1, 12))) for _ in range(40_000)
    ).encode()
    expected = bpe_v4.merge(native.count_words_in_buffer(text, [], 1).to_dict(), 600)
    for num_threads in (1, 2, 4):
        counts = native.count_words_in_buffer(text, [], num_threads)
        assert counts.merge(600, parallel_words=parallel_words) == expected, num_threads
        assert counts.merge(600, parallel_words=parallel_words, prune_pairs=100) == expected, num_threads


@pytest.mark.parametrize("num_threads", [1, 2, 4])
def test_threads_on_long_words_with_runs(num_threads: int) -> None:
    # Long words hold many occurrences of a pair, adjacent ones and runs: the in-place rewrite's
    # hard cases, split between threads at every word.
    native_or_skip()
    from cs336_basics.native import _merge_cpp

    rng = random.Random(3)
    word_counts = {
        bytes(rng.choices(b"aab\x80", k=rng.randint(2, 90))): rng.choice([1, 2, 7, 2**33]) for _ in range(400)
    }
    got = _merge_cpp.merge(word_counts, 300, num_threads=num_threads, parallel_words=0)
    assert got == bpe_v4.merge(word_counts, 300)


def test_threads_report_progress_and_stop() -> None:
    native_or_skip()
    from cs336_basics.native import _merge_cpp

    word_counts = {bytes(random.Random(seed).choices(b"abcdefgh", k=40)): seed + 1 for seed in range(30)}
    reports: list[int] = []
    merges = _merge_cpp.merge(word_counts, 450, reports.append, num_threads=2, parallel_words=0)
    assert len(merges) == 450 and sum(reports) == 450

    def interrupt(done: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _merge_cpp.merge(word_counts, 450, interrupt, num_threads=2, parallel_words=0)


# (g) symbol width: the C++ loop stores tokens in 16 bits up to 65,280 merges (256 bytes + merges
# <= 65,536 tokens) and in 32 bits beyond.


# 66,280 merges of 40,000 words, twice: on threads (the default tier's thread tests use 16-bit
# symbols) it is the exhaustive tier's.
@pytest.mark.parametrize(
    "threads",
    [{}, pytest.param(PARALLEL_EVERYWHERE, marks=pytest.mark.exhaustive)],
    ids=["one-thread", "threads"],
)
def test_both_symbol_widths_give_the_same_merges(threads: dict) -> None:
    native_or_skip()
    from cs336_basics.native import _merge_cpp

    rng = random.Random(13)
    word_counts = {bytes(rng.choices(b"etaoinshrdlu", k=rng.randint(4, 14))): rng.randint(1, 3) for _ in range(40_000)}
    narrow_limit = 65_536 - 256
    narrow = _merge_cpp.merge(word_counts, narrow_limit, **threads)
    wide = _merge_cpp.merge(word_counts, narrow_limit + 1000, **threads)
    assert len(narrow) == narrow_limit and len(wide) == narrow_limit + 1000  # tokens past 65,535 in use
    assert wide[:narrow_limit] == narrow
    assert _merge_cpp.merge(word_counts, 3000) == bpe_v4.merge(word_counts, 3000)


@pytest.mark.parametrize(("option", "value"), [("num_threads", 0), ("num_threads", True), ("parallel_words", -1)])
def test_bad_thread_options(option: str, value: object) -> None:
    native_or_skip()
    from cs336_basics.native import _merge_cpp

    with pytest.raises(ValueError, match=option):
        _merge_cpp.merge({b"abc": 1}, 1, **{option: value})


# (h) the threads' merge step (each thread rewrites a share of the words and applies the changes of
# the pairs it owns): every merge forced onto 1, 2, 3 and 7 threads, odd counts and more threads
# than cores included, against the reference.

THREAD_COUNTS = [1, 2, 3, 7]


@st.composite
def word_count_dicts(draw: st.DrawFn) -> dict[bytes, int]:
    alphabet = draw(st.sampled_from([b"ab", b"abc", b"aab\x80", b"etaoin\x00\xff", bytes(range(256))]))
    words = draw(st.lists(st.binary(min_size=1, max_size=30), min_size=1, max_size=60))
    counts = draw(st.lists(st.sampled_from([1, 1, 2, 3, 7, 1000, 2**33]), min_size=len(words), max_size=len(words)))
    # Bytes outside the alphabet fold into it: few distinct bytes make runs and ties.
    return {bytes(alphabet[byte % len(alphabet)] for byte in word): count for word, count in zip(words, counts)}


@pytest.mark.parametrize("num_threads", THREAD_COUNTS)
@settings(max_examples=60, deadline=None)
@given(word_counts=word_count_dicts(), num_merges=st.integers(min_value=1, max_value=80), prune=st.booleans())
def test_threads_match_the_reference_on_generated_words(
    num_threads: int, word_counts: dict[bytes, int], num_merges: int, prune: bool
) -> None:
    native_or_skip()
    from cs336_basics.native import _merge_cpp

    options = {"num_threads": num_threads, "parallel_words": 0, "prune_pairs": 8 if prune else None}
    assert _merge_cpp.merge(word_counts, num_merges, **options) == reference_merges(word_counts, num_merges)


@pytest.fixture(scope="module")
def demo_text(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    from cs336_basics.commands.demo import write_demo_corpus

    return write_demo_corpus(tmp_path_factory.mktemp("demo") / "demo.txt", size_bytes=600_000).read_bytes()


@pytest.mark.parametrize("num_threads", THREAD_COUNTS)
def test_threads_match_one_thread_on_the_demo_corpus(num_threads: int, demo_text: bytes) -> None:
    native = native_or_skip()
    counts = native.count_words_in_buffer(demo_text, ["<|endoftext|>"], num_threads)
    one_thread = native.count_words_in_buffer(demo_text, ["<|endoftext|>"], 1)
    expected = one_thread.merge(1500, parallel_words=10**9)
    assert expected[:300] == bpe_v4.merge(one_thread.to_dict(), 300)
    assert counts.merge(1500, parallel_words=0) == expected
    assert counts.merge(1500, parallel_words=0, prune_pairs=64) == expected


@pytest.mark.parametrize("parallel_words", [16, 256])
def test_a_busy_machine_sends_the_merges_to_one_thread_and_back(parallel_words: int) -> None:
    # The watch on the cores (cpp/merge/parallel_choice.hpp), on a simulated clock: the first two parallel
    # merges stall as beside a job holding a core, so every merge goes to one thread, and a probe
    # after the cooldown finds the threads back. The merges are one thread's all along.
    native = native_or_skip()
    from cs336_basics.native import _merge_cpp

    rng = random.Random(5)
    text = " ".join(
        "".join(rng.choices("etaoinshrdlucmé", k=rng.randint(1, 12))) for _ in range(40_000)
    ).encode()
    expected = native.count_words_in_buffer(text, [], 1).merge(600, parallel_words=10**9)
    counts = native.count_words_in_buffer(text, [], 2)
    previous = _merge_cpp.simulate_busy_machine(2)
    try:
        got = counts.merge(600, parallel_words=parallel_words)
        use = _merge_cpp.last_thread_use()
    finally:
        _merge_cpp.simulate_busy_machine(previous)
    assert got == expected
    if effective_num_threads(2) > 1:
        assert use["starved"] == 1 and use["resumed"] == 1, use
        assert use["parallel_merges"] > 1, use
