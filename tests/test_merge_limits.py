"""The limits on merging (merge_limits.py): HF's `min_frequency` and `max_token_length`, SuperBPE's
`max_words` and `no_colon_space`: known answers by hand on bpe_v1, every version equal to it under every
tie-break, with a base too, the native loop on its threads and pruning, and the public calls and the
command (refusals, bpe_run.json). HF's own outputs with HF's two: tests/test_references.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cs336_basics import (
    BPEInputError,
    bpe_v1,
    train,
    train_bpe,
    train_bpe_from_counts,
    train_bpe_from_iterator,
    trainer_status,
)
from cs336_basics.commands.cli import main as cli_main
from cs336_basics.outputs.serialization import load_merges
from cs336_basics.rules.merge_limits import MergeLimits, count_words
from cs336_basics.rules.splitting import count_words_in_text
from cs336_basics.rules.tie_break import TIE_BREAKS
from cs336_basics.trainers import load_trainer

from .support import merge_rules

V7 = trainer_status()["bpe_v7"]
LIMITS = [(0, None), (0, 1), (0, 3), (0, 4), (2, None), (3, 5), (1, 2)]


def test_max_token_length_keeps_tokens_shorter_than_it_but_two_bytes_always() -> None:
    # (a, b) counts 5 and goes first; then (ab, c) 5 before (c, d) 3, and "abc" would be 3 bytes:
    # refused under 3, which leaves (c, d), and "abcd" (4 bytes) then is refused too.
    words = {b"abcd": 3, b"abc": 2}
    assert bpe_v1.merge(words, 5, rules=merge_rules(tie_break="hf")) == [(b"a", b"b"), (b"ab", b"c"), (b"abc", b"d")]
    assert bpe_v1.merge(words, 5, rules=merge_rules(tie_break="hf", max_token_length=3)) == [(b"a", b"b"), (b"c", b"d")]
    # Under 4, "abc" (3 bytes) is made, "abcd" (4) is not; under 1 or 2 the two-byte merges still are.
    assert bpe_v1.merge(words, 5, rules=merge_rules(tie_break="hf", max_token_length=4)) == [
        (b"a", b"b"),
        (b"ab", b"c"),
    ]
    assert bpe_v1.merge(words, 5, rules=merge_rules(tie_break="hf", max_token_length=1)) == [(b"a", b"b"), (b"c", b"d")]


def test_min_frequency_stops_at_the_first_pair_counting_too_little() -> None:
    words = {b"ab": 5, b"cd": 2, b"ef": 1}
    assert len(bpe_v1.merge(words, 10)) == 3
    assert bpe_v1.merge(words, 10, rules=merge_rules(tie_break="hf", min_frequency=2)) == [(b"a", b"b"), (b"c", b"d")]
    assert bpe_v1.merge(words, 10, rules=merge_rules(tie_break="hf", min_frequency=6)) == []
    assert len(bpe_v1.merge(words, 10, rules=merge_rules(min_frequency=1))) == 3  # 0 and 1 change nothing


@pytest.mark.parametrize(
    ("keywords", "named"),
    [
        ({"min_frequency": -1}, "min_frequency"),
        ({"min_frequency": 2.5}, "min_frequency"),
        ({"min_frequency": True}, "min_frequency"),
        ({"max_token_length": 0}, "max_token_length"),
        ({"max_token_length": "8"}, "max_token_length"),
        ({"max_words": 0}, "max_words"),
        ({"max_words": -2}, "max_words"),
        ({"max_words": True}, "max_words"),
        ({"max_words": "4"}, "max_words"),
        ({"max_words": 2.0}, "max_words"),
        ({"no_colon_space": 1}, "no_colon_space"),
        ({"no_colon_space": "yes"}, "no_colon_space"),
    ],
)
def test_bad_limits_are_refused_in_one_line(trainer: str, keywords: dict, named: str, tmp_path: Path) -> None:
    with pytest.raises(BPEInputError, match=named):
        MergeLimits(**keywords)
    with pytest.raises((BPEInputError, ValueError), match=named):
        load_trainer(trainer).merge({b"ab": 1}, 1, rules=merge_rules(**keywords))
    path = tmp_path / "corpus.txt"
    path.write_text("ab ab", encoding="utf-8")
    with pytest.raises(BPEInputError, match=named):
        train_bpe(path, 260, [], trainer=trainer, **keywords)


def test_a_word_is_a_non_empty_piece_between_spaces() -> None:
    assert [count_words(token) for token in (b"a", b" a", b"a ", b" a ", b"a b", b"a  b", b" ", b"   ")] == [
        1, 1, 1, 1, 2, 2, 0, 0,
    ]  # fmt: skip
    # Only the space byte separates: not a newline, a tab, or a no-break space (b"\xc2\xa0").
    assert [count_words(token) for token in (b"a\nb", b"a\tb", b"a\xc2\xa0b", b"a:b c")] == [1, 1, 1, 2]
    limits = MergeLimits(max_words=2, no_colon_space=True)
    assert limits.allows(b"a b", b"c") and not limits.allows(b"a b", b" c")
    assert limits.allows(b" a", b" b") and limits.allows(b"a  ", b"b ")
    assert not limits.allows(b":", b" ") and not limits.allows(b"a: b", b"c") and limits.allows(b"a :", b"b")
    assert MergeLimits().allows(b"a b c d e", b": ") and not MergeLimits().bounds_tokens


def test_max_words_never_merges_a_token_of_more_words() -> None:
    # (a, space) and (space, b) count 3, (a, space) is greater; then (b, space) 2. Under one word every
    # pair left spans two ("a b", "b a "), so nothing more is merged; under two, three words are refused.
    words = {b"a b a b a b": 3}
    assert bpe_v1.merge(words, 10, rules=merge_rules(max_words=1)) == [(b"a", b" "), (b"b", b" ")]
    assert bpe_v1.merge(words, 10, rules=merge_rules(max_words=2)) == [(b"a", b" "), (b"a ", b"b"), (b"a b", b" ")]
    assert len(bpe_v1.merge(words, 10)) > 3  # no limit: the whole word
    # A refused pair that counts most is skipped for the next best: (a , b) counts 5, (c, d) 3.
    words = {b"a b": 5, b"cd": 3}
    assert bpe_v1.merge(words, 10, rules=merge_rules(max_words=1)) == [(b"a", b" "), (b"c", b"d")]
    # A leading or trailing space adds no word: " a" and " a " are one.
    assert bpe_v1.merge({b" a ": 2}, 10, rules=merge_rules(max_words=1)) == [(b"a", b" "), (b" ", b"a ")]


def test_no_colon_space_never_merges_a_token_holding_it() -> None:
    # ": " counts most and is two bytes, but never merged (unlike max_token_length, which lets two
    # bytes through); "a:" and ": " joined with a space between, though, are allowed.
    assert bpe_v1.merge({b": ": 5, b"ab": 1}, 10, rules=merge_rules(no_colon_space=True)) == [(b"a", b"b")]
    assert bpe_v1.merge({b": ": 5, b"ab": 1}, 10) == [(b":", b" "), (b"a", b"b")]
    merges = bpe_v1.merge({b"key: value": 2, b"a :b": 3}, 30, rules=merge_rules(no_colon_space=True))
    assert merges and all(b": " not in left + right for left, right in merges)
    assert (b"key:", b" value") not in merges and (b"a :", b"b") in merges


WORDS = st.dictionaries(
    st.binary(min_size=1, max_size=9).map(lambda word: word.replace(b"\x00", b"a")),
    st.integers(min_value=1, max_value=6),
    min_size=1,
    max_size=40,
)


# Words of spaces, colons and a few other bytes, so that many pairs cross a space or make ": ".
SPACED_WORDS = st.dictionaries(
    st.lists(st.sampled_from(b"ab :\n\xc2"), min_size=1, max_size=12).map(bytes),
    st.integers(min_value=1, max_value=6),
    min_size=1,
    max_size=30,
)
# SuperBPE's limits, alone, together and beside HF's.
TOKEN_LIMITS = [
    {"max_words": 1},
    {"max_words": 2},
    {"max_words": 4},
    {"no_colon_space": True},
    {"max_words": 4, "no_colon_space": True},
    {"max_words": 2, "no_colon_space": True, "max_token_length": 5, "min_frequency": 2},
]


@pytest.mark.parametrize("rule", TIE_BREAKS)
@pytest.mark.parametrize("limits", TOKEN_LIMITS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=SPACED_WORDS, num_merges=st.integers(min_value=0, max_value=60))
def test_every_version_honours_the_word_and_colon_limits_as_the_oracle(
    trainer: str, rule: str, limits: dict, words: dict, num_merges: int
) -> None:
    rules = merge_rules(tie_break=rule, **limits)
    expected = bpe_v1.merge(words, num_merges, rules=rules)
    assert load_trainer(trainer).merge(dict(words), num_merges, rules=rules) == expected


@pytest.mark.parametrize("limits", TOKEN_LIMITS)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    words=SPACED_WORDS,
    rule=st.sampled_from(TIE_BREAKS),
    base_merges=st.integers(min_value=0, max_value=12),
    num_merges=st.integers(min_value=0, max_value=40),
)
def test_every_version_takes_start_from_and_the_word_and_colon_limits_as_the_oracle(
    trainer: str, limits: dict, words: dict, rule: str, base_merges: int, num_merges: int
) -> None:
    base = bpe_v1.merge(words, base_merges, rules=merge_rules(tie_break=rule))  # unlimited: any token
    rules = merge_rules(tie_break=rule, base_merges=base, **limits)
    expected = bpe_v1.merge(words, num_merges, rules=rules)
    assert load_trainer(trainer).merge(dict(words), num_merges, rules=rules) == expected


@pytest.mark.parametrize("rule", TIE_BREAKS)
@pytest.mark.parametrize(("min_frequency", "max_token_length"), LIMITS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=WORDS, num_merges=st.integers(min_value=0, max_value=60))
def test_every_version_honours_the_limits_as_the_oracle(
    trainer: str, rule: str, min_frequency: int, max_token_length: int | None, words: dict, num_merges: int
) -> None:
    limits = {"tie_break": rule, "min_frequency": min_frequency, "max_token_length": max_token_length}
    expected = bpe_v1.merge(words, num_merges, rules=merge_rules(**limits))
    assert load_trainer(trainer).merge(dict(words), num_merges, rules=merge_rules(**limits)) == expected


@pytest.mark.skipif(not V7.available, reason=V7.reason)
@pytest.mark.parametrize("knobs", [{"num_threads": 2, "parallel_words": 0}, {"prune_pairs": 3}, {"num_threads": 3}])
@pytest.mark.parametrize(("min_frequency", "max_token_length"), LIMITS)
@settings(max_examples=10, deadline=None)
@given(words=WORDS, rule=st.sampled_from(TIE_BREAKS))
def test_the_native_loop_on_threads_and_pruning(
    knobs: dict, min_frequency: int, max_token_length: int | None, words: dict, rule: str
) -> None:
    from cs336_basics.native import _merge_cpp

    limits = {"tie_break": rule, "min_frequency": min_frequency, "max_token_length": max_token_length}
    rules = merge_rules(**limits)
    assert _merge_cpp.merge(words, 80, **knobs, rules=rules) == bpe_v1.merge(words, 80, rules=rules)


@pytest.mark.skipif(not V7.available, reason=V7.reason)
@pytest.mark.parametrize("knobs", [{"num_threads": 2, "parallel_words": 0}, {"prune_pairs": 3}, {"num_threads": 3}])
@pytest.mark.parametrize("limits", TOKEN_LIMITS)
@settings(max_examples=10, deadline=None)
@given(words=SPACED_WORDS, rule=st.sampled_from(TIE_BREAKS), base_merges=st.integers(min_value=0, max_value=8))
def test_the_native_loop_on_threads_and_pruning_under_the_word_and_colon_limits(
    knobs: dict, limits: dict, words: dict, rule: str, base_merges: int
) -> None:
    from cs336_basics.native import _merge_cpp

    base = bpe_v1.merge(words, base_merges, rules=merge_rules(tie_break=rule))
    rules = merge_rules(tie_break=rule, base_merges=base, **limits)
    assert _merge_cpp.merge(words, 80, **knobs, rules=rules) == bpe_v1.merge(words, 80, rules=rules)


def test_train_bpe_and_documents_take_the_limits(trainer: str, tmp_path: Path) -> None:
    text = "the theme then thesis these<|endoftext|>a an and any" * 3
    path = tmp_path / "corpus.txt"
    path.write_text(text, encoding="utf-8")
    limits = {"min_frequency": 4, "max_token_length": 3}
    vocab, merges = train_bpe(path, 300, ["<|endoftext|>"], trainer=trainer, like="hf", **limits)
    assert merges and all(len(left + right) < 3 for left, right in merges)
    assert len(vocab) == 256 + 1 + len(merges) < 300  # stopped by min_frequency
    documents = text.split("<|endoftext|>")
    assert train_bpe_from_iterator(documents, 300, [], trainer=trainer, like="hf", **limits)[1] == merges
    counts = count_words_in_text(text, ["<|endoftext|>"])
    from_counts = train_bpe_from_counts(counts, 300, ["<|endoftext|>"], trainer=trainer, like="hf", **limits)
    assert from_counts == (vocab, merges)


# Lines as pre-tokens, so that tokens may span spaces and hold ": ".
LINES = r"[^\n]+|\n"


def test_train_bpe_and_documents_take_the_word_and_colon_limits(trainer: str, tmp_path: Path) -> None:
    text = "key: value, key: other\nthe cat sat on the mat\n<|endoftext|>the cat: a mat\n" * 4
    path = tmp_path / "corpus.txt"
    path.write_text(text, encoding="utf-8")
    limits = {"pattern": LINES, "max_words": 2, "no_colon_space": True}
    free = train_bpe(path, 400, ["<|endoftext|>"], trainer=trainer, pattern=LINES)[1]
    assert any(count_words(left + right) > 2 for left, right in free)
    assert any(b": " in left + right for left, right in free)
    vocab, merges = train_bpe(path, 400, ["<|endoftext|>"], trainer=trainer, **limits)
    assert merges and all(count_words(left + right) <= 2 and b": " not in left + right for left, right in merges)
    assert merges == train_bpe(path, 400, ["<|endoftext|>"], trainer="bpe_v1", **limits)[1]
    assert train(path, 400, ["<|endoftext|>"], trainer=trainer, **limits).merges == merges  # train's options
    documents = text.split("<|endoftext|>")
    assert train_bpe_from_iterator(documents, 400, [], trainer=trainer, **limits)[1] == merges
    counts = count_words_in_text(text, ["<|endoftext|>"], LINES)
    assert train_bpe_from_counts(counts, 400, ["<|endoftext|>"], trainer=trainer, **limits) == (vocab, merges)
    # None of either is no limit; False of no_colon_space too.
    unset = {"pattern": LINES, "max_words": None, "no_colon_space": None}
    assert train_bpe(path, 400, ["<|endoftext|>"], trainer=trainer, **unset)[1] == free
    assert train_bpe(path, 400, ["<|endoftext|>"], trainer=trainer, pattern=LINES, no_colon_space=False)[1] == free


def test_the_command_takes_the_word_and_colon_limits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "corpus.txt"
    path.write_text("key: value, the cat: a mat\n" * 20, encoding="utf-8")
    base = ["bpe_v1", "-d", str(path), "-v", "320", "-q", "--pattern", LINES]
    assert cli_main([base[0], str(tmp_path / "plain"), *base[1:]]) == 0
    run = json.loads((tmp_path / "plain" / "bpe_run.json").read_text(encoding="utf-8"))
    assert (run["max_words"], run["no_colon_space"]) == (None, False)
    limited = [base[0], str(tmp_path / "limited"), *base[1:], "--max-words", "2", "--no-colon-space"]
    assert cli_main(limited) == 0
    out = capsys.readouterr().out
    assert "max words" in out and "colon space" in out
    assert "no pair left makes a token of at most 2 words" in out and "(--max-words 2, --no-colon-space)" in out
    run = json.loads((tmp_path / "limited" / "bpe_run.json").read_text(encoding="utf-8"))
    assert (run["max_words"], run["no_colon_space"]) == (2, True)
    merges = load_merges(tmp_path / "limited" / "merges.txt")
    assert merges == train_bpe(path, 320, [], trainer="bpe_v1", pattern=LINES, max_words=2, no_colon_space=True)[1]
    assert max(count_words(left + right) for left, right in merges) == 2
    assert cli_main([base[0], str(tmp_path / "bad"), *base[1:], "--max-words", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "max_words" in err
    assert not (tmp_path / "bad" / "vocab.json").exists()


def test_the_command_takes_them_and_bpe_run_json_records_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "corpus.txt"
    path.write_text("the theme then thesis these\n" * 20, encoding="utf-8")
    base = ["bpe_v1", "-d", str(path), "-v", "400", "-q"]
    assert cli_main([base[0], str(tmp_path / "plain"), *base[1:]]) == 0
    run = json.loads((tmp_path / "plain" / "bpe_run.json").read_text(encoding="utf-8"))
    assert (run["min_frequency"], run["max_token_length"]) == (0, None)
    limited = [base[0], str(tmp_path / "limited"), *base[1:], "--min-frequency", "20", "--max-token-length", "4"]
    assert cli_main(limited) == 0
    out = capsys.readouterr().out
    assert "min frequency" in out and "max token length" in out
    run = json.loads((tmp_path / "limited" / "bpe_run.json").read_text(encoding="utf-8"))
    assert (run["min_frequency"], run["max_token_length"]) == (20, 4)
    merges = load_merges(tmp_path / "limited" / "merges.txt")
    assert merges == train_bpe(path, 400, [], trainer="bpe_v1", min_frequency=20, max_token_length=4)[1]
    assert (b"th", b"e") in merges and max(len(left + right) for left, right in merges) == 3
    for bad, named in (("-1", "min_frequency"), ("0", "max_token_length")):
        option = "--min-frequency" if named == "min_frequency" else "--max-token-length"
        assert cli_main([base[0], str(tmp_path / "bad"), *base[1:], option, bad]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and named in err
        assert not (tmp_path / "bad" / "vocab.json").exists()


def test_with_start_from_the_limits_bound_the_new_merges_only() -> None:
    # The base makes "abc" (3 bytes) whatever the limit; after it, (abc, d) counts 3 and is 4 bytes.
    words, base = {b"abcd": 3, b"abc": 2}, [(b"a", b"b"), (b"ab", b"c")]
    assert bpe_v1.merge(words, 5, rules=merge_rules(base_merges=base)) == [(b"abc", b"d")]
    assert bpe_v1.merge(words, 5, rules=merge_rules(base_merges=base, max_token_length=3)) == []
    assert bpe_v1.merge(words, 5, rules=merge_rules(base_merges=base, max_token_length=5)) == [(b"abc", b"d")]
    assert bpe_v1.merge(words, 5, rules=merge_rules(base_merges=base, min_frequency=4)) == []
    assert bpe_v1.merge(words, 5, rules=merge_rules(base_merges=base, min_frequency=3)) == [(b"abc", b"d")]
    # The base makes "a b" and "x: " (two words, ": ") whatever the limits; the new merges are bounded.
    words, base = {b"a b c": 3, b"x: y": 2}, [(b"a", b" "), (b"a ", b"b"), (b"x", b":"), (b"x:", b" ")]
    assert bpe_v1.merge(words, 5, rules=merge_rules(base_merges=base)) == [
        (b"a b", b" "), (b"a b ", b"c"), (b"x: ", b"y")
    ]  # fmt: skip
    assert bpe_v1.merge(words, 5, rules=merge_rules(base_merges=base, max_words=2)) == [
        (b"a b", b" "), (b"x: ", b"y")
    ]  # fmt: skip
    assert bpe_v1.merge(words, 5, rules=merge_rules(base_merges=base, no_colon_space=True)) == [
        (b"a b", b" "), (b"a b ", b"c")
    ]  # fmt: skip


@pytest.mark.parametrize(("min_frequency", "max_token_length"), LIMITS)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    words=WORDS,
    rule=st.sampled_from(TIE_BREAKS),
    base_merges=st.integers(min_value=0, max_value=12),
    num_merges=st.integers(min_value=0, max_value=40),
)
def test_every_version_takes_start_from_and_the_limits_together_as_the_oracle(
    trainer: str,
    min_frequency: int,
    max_token_length: int | None,
    words: dict,
    rule: str,
    base_merges: int,
    num_merges: int,
) -> None:
    base = bpe_v1.merge(
        words, base_merges, rules=merge_rules(tie_break=rule)
    )  # unlimited: its tokens may be longer than the limit
    options = {"tie_break": rule, "min_frequency": min_frequency, "max_token_length": max_token_length}
    expected = bpe_v1.merge(words, num_merges, rules=merge_rules(base_merges=base, **options))
    assert (
        load_trainer(trainer).merge(dict(words), num_merges, rules=merge_rules(base_merges=base, **options)) == expected
    )


def test_hf_files_from_a_base_keeps_its_merges_that_occur(tmp_path: Path) -> None:
    # HF's train(files) from a base, as SuperBPE's trainer does it: the vocabulary from the bytes seen,
    # then the base's merges whose pair occurs in the lines, renumbered; a merge of bytes the text lacks
    # is dropped. (A run from scratch gave the base, on other text.)
    path = tmp_path / "corpus.txt"
    path.write_text("the theme then thesis these\n" * 5, encoding="utf-8")
    other = tmp_path / "other.txt"
    other.write_text("zz zz zz the the\n", encoding="utf-8")
    base = train_bpe(other, 259, [], trainer="bpe_v1")
    assert (b"z", b"z") in base[1]
    vocab, merges = train_bpe(path, 20, [], trainer="bpe_v1", like="hf-files", start_from=base)
    assert (b"z", b"z") not in merges and merges[0] in base[1]
    seen = sorted({bytes([byte]) for byte in path.read_bytes()})
    assert sorted(token for token in vocab.values() if len(token) == 1) == seen
