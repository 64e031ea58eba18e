"""SuperBPE (Liu et al. 2025): superword tokens, trained in two stages (docs/SUPERBPE.md).

Stage 1 is a plain run to the transition size `T` by the run's rules. Stage 2 goes on from stage 1's
tokenizer (`start_from`: its ids and merges kept, each pre-token starting as its merges encode it) to
the target size, by the same rules but for the pattern: `superword` (`pattern.py`), whose pre-tokens
are whole runs of text up to a line end or a number, spaces included, so that merges cross words.
A tokenizer it makes encodes with the superword pattern, which `bpe_run.json` records.

Both stages are ordinary runs: every version, input route, thread count and tie-break trains them,
and the result equals the composition written out by hand (tests/test_superbpe.py holds every
version to a reference written there). A preset names its own second stage (`presets.SecondStage`):
like='superbpe', the paper's trainer, goes on by lines with the paper's pattern and its two limits on
new tokens, from stage 1's merges that occur (`trainers.lines_base`; tests/test_superbpe_reference.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from .errors import BPEInputError
from .rules.pattern import resolve_pattern
from .rules.presets import resolve_preset
from .rules.start_from import Base

if TYPE_CHECKING:
    from .rules.presets import TrainingRules
    from .trainers import TrainingResult

# One stage: a run to a size, by rules, from a base (None: from the bytes).
Stage = Callable[[int, "TrainingRules", "Base | None"], "TrainingResult"]

FIRST_STAGE_SOURCE = "SuperBPE's first stage"


def check_transition(transition: object, vocab_sizes: Iterable[int]) -> int:
    """`superbpe=T` checked against the sizes asked for: a positive int below every one of them."""
    if isinstance(transition, bool) or not isinstance(transition, int) or transition < 1:
        raise BPEInputError(f"superbpe must be a positive int (the first stage's vocab_size), got {transition!r}")
    sizes = sorted(vocab_sizes)
    if sizes and sizes[0] <= transition:
        raise BPEInputError(
            f"superbpe={transition:,}: every vocab_size must be above it, got {sizes[0]:,} "
            "(a size up to it is a plain run: train it without superbpe)"
        )
    return transition


def first_stage_rules(rules: TrainingRules) -> TrainingRules:
    """The first stage's rules: the run's without the limits on superwords (`max_words`,
    `no_colon_space`), which the paper's trainer applies to its second stage's merges only."""
    return replace(rules, limits=replace(rules.limits, max_words=None, no_colon_space=False))


def superword_rules(rules: TrainingRules) -> TrainingRules:
    """The second stage's rules: the run's, with its preset's second-stage pattern (`superword` but
    under like='superbpe', the paper's) in the Unicode version of the run's pattern, and the preset's
    limits on new tokens where the run sets none."""
    stage = resolve_preset(rules.like).second_stage
    pattern = replace(resolve_pattern(stage.pattern), unicode=rules.pattern.unicode)
    limits = rules.limits
    if limits.max_words is None and stage.max_words is not None:
        limits = replace(limits, max_words=stage.max_words)
    if stage.no_colon_space:
        limits = replace(limits, no_colon_space=True)
    return replace(rules, pattern=pattern, asked_pattern=True, limits=limits)


def first_stage_base(first: TrainingResult) -> Base:
    """Stage 1's tokenizer as the base stage 2 goes on from (recording no pattern: stage 2's is its own)."""
    return Base(first.vocab, first.merges, list(first.special_tokens), source=FIRST_STAGE_SOURCE)


def train_in_two_stages(
    run_stage: Stage, transition: int, vocab_size: int, rules: TrainingRules, base: Base | None
) -> TrainingResult:
    """Stage 1 to `transition` by `first_stage_rules` (from `base`, the user's, if any), then stage 2 to
    `vocab_size` from it by `superword_rules`: the result of stage 2, its `first_stage` stage 1's,
    its seconds both stages'."""
    first = run_stage(transition, first_stage_rules(rules), base)
    second = run_stage(vocab_size, superword_rules(rules), first_stage_base(first))
    seconds = {
        "stage 1": first.seconds.get("total", 0.0),
        **{f"stage 2 {phase}": value for phase, value in second.seconds.items() if phase != "total"},
    }
    seconds["total"] = first.seconds.get("total", 0.0) + second.seconds.get("total", 0.0)
    return replace(
        second,
        first_stage=first,
        seconds=seconds,
        peak_rss_bytes=max(first.peak_rss_bytes, second.peak_rss_bytes),
        absent_special_tokens=first.absent_special_tokens,
    )


def superbpe_record(result: TrainingResult) -> dict[str, object] | None:
    """What bpe_run.json records of the first stage (None for a plain run): its tokens, merges, pattern
    and seconds; the run's own `pattern` is the second stage's, which the tokenizer encodes with."""
    first = result.first_stage
    if first is None:
        return None
    pattern = first.pattern
    return {
        "first_stage": {
            "tokens": len(first.vocab),
            "merges": len(first.merges),
            "pattern": {"name": pattern.name, "regex": pattern.regex, "unicode": pattern.unicode_version},
            "seconds": first.seconds.get("total", 0.0),
        },
    }
