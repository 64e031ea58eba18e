"""Presets that reproduce another trainer's output byte for byte: its pre-tokenizer pattern
(`pattern.py`), its tie-break (`tie_break.py`) and how its vocabulary numbers tokens
(`vocab_layout.assemble_vocab`). `like="rustbpe"` trains what rustbpe's `train_from_iterator` trains.

- `cs336`: the assignment (the default).
- `rustbpe`: rustbpe 0.1.0 (nanochat's trainer): its GPT-4 pattern, ties to the smallest ids, ids
  as its mergeable ranks give them (bytes, then merges), special tokens after the merges. Another
  `pattern` goes with it, as rustbpe's `train_from_iterator(pattern=...)` takes one.
- `nanochat`: nanochat's `RustBPETokenizer.train_from_iterator(documents, vocab_size)`: rustbpe with
  nanochat's pattern, and its nine special tokens (`NANOCHAT_SPECIAL_TOKENS`) after the merges,
  counted in `vocab_size`; they are the special tokens unless others are given, which are refused.
- `hf`: HF tokenizers 0.23 `BpeTrainer` with `ByteLevel(add_prefix_space=False)`, its full byte
  alphabet as `initial_alphabet`, `min_frequency=0`, fed the documents (`train_from_iterator`).
- `hf-raw`: `hf` fed documents that hold the special tokens: HF's `train_from_iterator` counts them as
  text (`<|`, `endoftext`, `|>`), and so does this preset, the text never split on them; the
  vocabulary still holds them first.
- `hf-files`: the same tokenizer with a default `BpeTrainer(vocab_size, special_tokens=...)` and
  `tokenizer.train([path])` (what gigabpe 0.1.0 reproduces): the file read line by line, each line
  pre-tokenized alone, special tokens counted as text, and the alphabet the bytes the text holds
  (layout `hf-files`). Only for one text file (`train`, `train_bpe`, the command with one `-d`).
- `superbpe`: the SuperBPE paper's trainer (docs/SUPERBPE.md): `hf-files` with its pre-tokenizer, the
  `superbpe` pattern (HF's `Digits`, a three-digit `Split` with GPT-2's letter, punctuation and space
  alternatives, `ByteLevel` without its regex); with `superbpe=T` its second stage goes on by the
  `superbpe-stage2` pattern, its new tokens of at most four words and never holding `": "`.

Each tool's preset classes characters as the tool does, by Unicode 16.0's tables (`pattern.TOOLS_UNICODE`:
rustbpe's Rust regex crate, HF's Oniguruma; probed, docs/REFERENCES.md); `cs336` by the installed `regex`'s.
HF's `min_frequency` and `max_token_length` go with any preset (`merge_limits.py`). Under the HF
presets a `vocab_size` below the initial tokens (special tokens and bytes) trains, as HF does: no merges.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..phases import MergeRules
from .contract import BPEInputError
from .merge_limits import NO_LIMITS, MergeLimits
from .pattern import (
    GPT2,
    NANOCHAT,
    RUSTBPE,
    SUPERBPE,
    SUPERBPE_STAGE2,
    SUPERWORD,
    TOOLS_UNICODE,
    Pattern,
    check_unicode,
    installed_unicode,
    pattern_from_regex,
    pattern_label,
    resolve_pattern,
)
from .tie_break import CS336, HF, SMALLEST_ID, check_tie_break
from .vocab_layout import CS336_LAYOUT, HF_FILES_LAYOUT, HF_LAYOUT, RUSTBPE_LAYOUT, trains_below_initial

# nanochat's SPECIAL_TOKENS (nanochat/tokenizer.py), in its order: the ids after the merges.
NANOCHAT_SPECIAL_TOKENS = (
    "<|bos|>",
    "<|user_start|>",
    "<|user_end|>",
    "<|assistant_start|>",
    "<|assistant_end|>",
    "<|python_start|>",
    "<|python_end|>",
    "<|output_start|>",
    "<|output_end|>",
)


@dataclass(frozen=True)
class SecondStage:
    """What SuperBPE's second stage trains by under a preset (superbpe.py): its pattern, and the limits
    on its new tokens (`merge_limits.MergeLimits.max_words`, `no_colon_space`) where the preset has them."""

    pattern: str = SUPERWORD
    max_words: int | None = None
    no_colon_space: bool = False


@dataclass(frozen=True)
class Preset:
    pattern: str
    tie_break: str
    layout: str
    # HF's train(files): each line pre-tokenized alone, special tokens counted as text.
    by_lines: bool = False
    # The tool takes a pattern of the caller's (`pattern` is then its default).
    any_pattern: bool = False
    # The tool's own special tokens: the run's when none are given, and no others.
    special_tokens: tuple[str, ...] | None = None
    # HF's train_from_iterator on raw documents: special tokens counted as text, not split out.
    specials_as_text: bool = False
    # The Unicode version of the tool's character classes (None: the installed regex's).
    unicode: str | None = None
    # SuperBPE's second stage under it (superbpe=T).
    second_stage: SecondStage = SecondStage()


PRESETS: dict[str, Preset] = {
    "cs336": Preset(GPT2, CS336, CS336_LAYOUT),
    "rustbpe": Preset(RUSTBPE, SMALLEST_ID, RUSTBPE_LAYOUT, any_pattern=True, unicode=TOOLS_UNICODE),
    "nanochat": Preset(
        NANOCHAT, SMALLEST_ID, RUSTBPE_LAYOUT, special_tokens=NANOCHAT_SPECIAL_TOKENS, unicode=TOOLS_UNICODE
    ),
    "hf": Preset(GPT2, HF, HF_LAYOUT, unicode=TOOLS_UNICODE),
    "hf-raw": Preset(GPT2, HF, HF_LAYOUT, specials_as_text=True, unicode=TOOLS_UNICODE),
    "hf-files": Preset(GPT2, HF, HF_FILES_LAYOUT, by_lines=True, unicode=TOOLS_UNICODE),
    # The paper's trainer: its second stage's pre-tokenizer, and its two limits on new tokens.
    "superbpe": Preset(
        SUPERBPE,
        HF,
        HF_FILES_LAYOUT,
        by_lines=True,
        unicode=TOOLS_UNICODE,
        second_stage=SecondStage(SUPERBPE_STAGE2, max_words=4, no_colon_space=True),
    ),
}


def resolve_preset(like: object) -> Preset:
    if like is None:
        return PRESETS["cs336"]
    if like not in PRESETS:
        raise BPEInputError(f"like must be one of {', '.join(PRESETS)}, got {like!r}")
    return PRESETS[str(like)]


@dataclass(frozen=True)
class TrainingRules:
    """What a run trains by, the one value of it passed inward from where the user hands the rules
    over (`resolve_rules`): its pre-tokenizer (with the Unicode version of its classes,
    `Pattern.unicode`), its tie-break, how its vocabulary numbers tokens, and HF's limits on merging
    (`merge_limits.py`; they apply under every preset and tie-break). A base's record and count files
    fill what the user left to a default (`from_base`, `for_counts`); `merge_rules` is what a
    version's merge takes of it."""

    pattern: Pattern
    tie_break: str
    layout: str
    limits: MergeLimits = NO_LIMITS
    by_lines: bool = False  # Preset.by_lines
    # Preset.special_tokens: the tool's own, which no note calls absent from the text.
    own_special_tokens: tuple[str, ...] = ()
    specials_as_text: bool = False  # Preset.specials_as_text
    # How they were asked for, which two equal rules may differ in: the preset named (None: none), whether a
    # pattern was given (not left to `like`'s or the default), and whether the Unicode version was left
    # to the default (the installed regex's: neither given, nor `like`'s, nor the pattern's).
    like: str | None = field(default=None, compare=False)
    asked_pattern: bool = field(default=True, compare=False)
    default_unicode: bool = field(default=False, compare=False)

    def counted_special_tokens(self, special_tokens: list[str]) -> list[str]:
        """The special tokens the text is split on and counting leaves out: none where they are text."""
        return [] if self.specials_as_text or self.by_lines else list(special_tokens)

    @property
    def below_initial(self) -> bool:
        """Whether a vocab_size below the initial tokens trains (HF's layouts: no merges then)."""
        return trains_below_initial(self.layout)

    @property
    def default_pattern(self) -> bool:
        """Whether the pattern is the default, neither given nor `like`'s: count files keep theirs."""
        return not self.asked_pattern and self.like is None

    def merge_rules(self, base: object = None) -> MergeRules:
        """What a version's merge takes (`phases.MergeRules`): the tie-break, the limits, and the merges of
        `base` (a `start_from.Base`, or None) to start from."""
        return MergeRules(self.tie_break, self.limits, () if base is None else base.merges)  # type: ignore[attr-defined]

    def from_base(self, base: object) -> TrainingRules:
        """The rules of a run from `base` (a `start_from.Base`, or None): its recorded pattern where none is
        given, and its Unicode version where none is named. A pattern given (or `like`'s) that is not the
        base's is refused, naming both: the new merges would be counted on other pre-tokens than the base's."""
        recorded: Pattern | None = getattr(base, "pattern", None)
        if recorded is None:
            return self
        source = base.source  # type: ignore[union-attr]
        if self.asked_pattern:
            if self.pattern.regex != recorded.regex:
                raise BPEInputError(
                    f"pattern {pattern_label(self.pattern.regex)} contradicts {source}, which was trained with the "
                    f"pattern {pattern_label(recorded.regex)}; leave the pattern out to go on with the base's"
                )
            return self
        if self.like is not None and not resolve_preset(self.like).any_pattern and self.pattern.regex != recorded.regex:
            raise BPEInputError(
                f"like={self.like!r} trains with the pattern {self.pattern.label}, but {source} was trained with "
                f"{pattern_label(recorded.regex)}: go on from it with its pattern, or start from another base"
            )
        unicode = (recorded.unicode or self.pattern.unicode) if self.default_unicode else self.pattern.unicode
        return replace(
            self,
            pattern=replace(resolve_pattern(recorded), unicode=unicode),
            asked_pattern=True,
            default_unicode=self.default_unicode and recorded.unicode is None,
        )

    def for_counts(self, regex: str, unicode: str | None) -> TrainingRules:
        """The rules of a run on count files made with the pattern `regex` and classes of the Unicode
        version `unicode` (None: not recorded): theirs where the user left the pattern, or its Unicode
        version, to the default. Whether the counts fit the result is the caller's check."""
        pattern = resolve_pattern(pattern_from_regex(regex)) if self.default_pattern else self.pattern
        # The rules' pattern names a version already (the installed regex's where left to the default).
        version = (unicode or self.pattern.unicode) if self.default_unicode else self.pattern.unicode
        pattern = replace(pattern, unicode=version)
        return replace(self, pattern=pattern, asked_pattern=True, default_unicode=False)


def resolve_rules(
    pattern: str | Pattern | None = None,
    tie_break: str | None = None,
    like: str | None = None,
    min_frequency: int | None = None,
    max_token_length: int | None = None,
    unicode: str | None = None,
    max_words: int | None = None,
    no_colon_space: bool | None = None,
) -> TrainingRules:
    """The rules of a run: `like` sets the first three and the Unicode version of the pattern's classes;
    `pattern`, `tie_break` and `unicode` (one of `pattern.UNICODE_VERSIONS`) may repeat what it sets but
    not contradict it (refused in one line). Without `like`: the pattern (gpt2), the rule (cs336),
    CS336's layout and the Unicode of a Pattern that carries one (a base's record), else the installed
    `regex`'s; the rules' pattern always names its version. HF's `min_frequency` and `max_token_length`
    and SuperBPE's `max_words` and `no_colon_space` (`merge_limits.py`) go with any of them. The one place
    the loose keywords become `TrainingRules`."""
    colon = False if no_colon_space is None else no_colon_space  # a non-bool is refused by MergeLimits
    limits = MergeLimits(min_frequency, max_token_length, max_words, colon)  # type: ignore[arg-type]
    preset = resolve_preset(like)
    chosen = resolve_pattern(preset.pattern if pattern is None else pattern)
    rule = check_tie_break(preset.tie_break if tie_break is None else tie_break)
    asked_unicode = check_unicode(unicode)
    if (
        like is not None
        and asked_unicode is not None
        and preset.unicode is not None
        and asked_unicode != preset.unicode
    ):
        raise BPEInputError(
            f"unicode={asked_unicode!r} contradicts like={like!r}, which classes characters by Unicode "
            f"{preset.unicode}'s tables, as the tool does; give one or the other"
        )
    default_unicode = asked_unicode is None and preset.unicode is None and chosen.unicode is None
    chosen = resolve_unicode(chosen, asked_unicode or preset.unicode)
    if like is not None:
        implied = resolve_pattern(preset.pattern)
        if chosen.regex != implied.regex and not preset.any_pattern:
            raise BPEInputError(
                f"pattern {pattern_label(chosen.regex)} contradicts like={like!r}, which trains with the pattern "
                f"{implied.label}; give one or the other"
            )
        if rule != preset.tie_break:
            raise BPEInputError(
                f"tie_break={rule!r} contradicts like={like!r}, which breaks ties by {preset.tie_break!r}; "
                "give one or the other"
            )
    return TrainingRules(
        chosen,
        rule,
        preset.layout,
        limits,
        preset.by_lines,
        preset.special_tokens or (),
        preset.specials_as_text,
        None if like is None else str(like),
        pattern is not None,
        default_unicode,
    )


def resolve_unicode(pattern: Pattern, unicode: str | None = None) -> Pattern:
    """`pattern` naming the Unicode version of its classes, as a run and a count take it: `unicode`
    (one of `pattern.UNICODE_VERSIONS`) if given, else the pattern's own (a base's record, a count's),
    else the installed `regex`'s. (A run's `like` names its tool's: `resolve_rules`.)"""
    asked = check_unicode(unicode)
    return replace(pattern, unicode=asked or pattern.unicode or installed_unicode())


def preset_special_tokens(like: str | None, special_tokens: list[str] | None) -> list[str] | None:
    """The special tokens of a run `like` a tool with its own (nanochat): those when none are given
    (None), the same list given again, anything else refused in one line. Other presets: as given."""
    own = resolve_preset(like).special_tokens
    if own is None:
        return special_tokens
    if special_tokens is None or list(special_tokens) == list(own):
        return list(own)
    raise BPEInputError(
        f"like={like!r} places its own special tokens after the merges ({', '.join(own)}); special tokens "
        f"{list(special_tokens)} contradict it: leave them out, or train like='rustbpe' with pattern={like!r} "
        "to place others there"
    )


def refuse_by_lines(rules: TrainingRules, given: str) -> None:
    """hf-files (and superbpe, the paper's trainer) read one text file by lines; other inputs (`given`:
    what they are) are refused, naming the preset asked for."""
    if rules.by_lines:
        like = rules.like or "hf-files"
        raise BPEInputError(
            f"like={like!r} reproduces HF's train(files), which reads one text file line by line; "
            f"it cannot train on {given}: give one text file, or use like='hf' (HF's train_from_iterator)"
        )
