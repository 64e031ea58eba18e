"""A new tie-break is one row in `tie_break.ROWS` (docs/RULES.md, "Adding a tie-break"): a toy rule
added as a newcomer would trains through `train_bpe` on every version without native code to bpe_v1's
merges; the native versions refuse it in one line; the rows the C++ is said to have are the ones its
`bpe::tie_break_names()` lists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cs336_basics import BPEInputError, bpe_v1, train_bpe
from cs336_basics.phases import MergeRules
from cs336_basics.rules import tie_break as tie_breaks
from cs336_basics.rules.tie_break import ROWS, TieBreak
from cs336_basics.trainers import REGISTRY

from .support import REPO_ROOT

# The toy rule: even bytes before odd ones, each ascending; a merged token ranks by its id.
EVEN_FIRST = TieBreak(
    "even-first",
    "even bytes before odd ones: a toy rule of the tests",
    tuple(sorted(range(256), key=lambda byte: (byte % 2, byte)).index(byte) for byte in range(256)),
    native=False,
)
COUNTS = {b"ab": 1, b"ca": 1, b"dc": 1, b"be": 1}  # four tied pairs: each rule orders them its own way


@pytest.fixture
def even_first(monkeypatch: pytest.MonkeyPatch) -> TieBreak:
    """The toy row added to the table for one test (the table restored after it)."""
    monkeypatch.setitem(ROWS, EVEN_FIRST.name, EVEN_FIRST)
    return EVEN_FIRST


def test_a_new_row_is_a_rule_of_its_own(even_first: TieBreak) -> None:
    # b (98) and d (100) are even and rank first, then a (97) before c (99).
    got = bpe_v1.merge(COUNTS, 3, rules=MergeRules(even_first.name))
    assert got == [(b"b", b"e"), (b"d", b"c"), (b"a", b"b")]
    for built_in in ("cs336", "smallest-id", "hf"):
        assert bpe_v1.merge(COUNTS, 3, rules=MergeRules(built_in)) != got


def test_a_new_row_trains_on_every_version_without_native_code(
    trainer: str, even_first: TieBreak, tmp_path: Path
) -> None:
    path = tmp_path / "corpus.txt"
    path.write_text("the cat sat on the mat; a bad dad had a bed<|endoftext|>ebb and odd eddies " * 5, encoding="utf-8")
    if "_merge_cpp" in REGISTRY[trainer].native_modules:  # the C++ loop has only its own rules
        with pytest.raises(ValueError, match="has no rule in the C\\+\\+ merge loop"):
            train_bpe(path, 300, ["<|endoftext|>"], trainer=trainer, tie_break=even_first.name)
        return
    expected = train_bpe(path, 300, ["<|endoftext|>"], trainer="bpe_v1", tie_break=even_first.name)
    assert train_bpe(path, 300, ["<|endoftext|>"], trainer=trainer, tie_break=even_first.name) == expected
    assert expected != train_bpe(path, 300, ["<|endoftext|>"], trainer="bpe_v1")


def test_an_unknown_rule_is_refused_in_one_line() -> None:
    with pytest.raises(BPEInputError, match="tie_break must be one of cs336, smallest-id, hf, got 'even-first'"):
        MergeRules("even-first")


def test_the_rows_the_cpp_has_are_the_ones_it_lists() -> None:
    merge_cpp = pytest.importorskip("cs336_basics.native._merge_cpp", reason="the native extension is not built")
    assert {row.name for row in tie_breaks.ROWS.values() if row.native} == set(merge_cpp.tie_break_names())


def test_the_docs_name_the_files_a_tie_break_touches() -> None:
    text = (REPO_ROOT / "docs" / "RULES.md").read_text(encoding="utf-8")
    section = text.split("## Adding a tie-break", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`((?:cs336_basics|cpp)/[\w/.]+)`", section))
    assert named == {"cs336_basics/rules/tie_break.py", "cpp/merge/bpe_merge.hpp", "cpp/merge/merge_tables.hpp"}
