"""The driver: the one table of trainer versions, and `train`, which runs any of them.

Each version (`bpe_v1` ... `bpe_v7`) provides the two phases of `phases.TrainerVersion`. The driver
checks the arguments once for every version, draws the progress bars, times both phases and
assembles the vocabulary, so the versions differ only in how they do the two phases. Whether a
compiled version can run here is the backend's call (`backend.py`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from dataclasses import dataclass, field
from os import PathLike
from typing import TYPE_CHECKING

try:
    import resource
except ImportError:  # Windows: no getrusage; peak memory reads 0 there (docs/PLATFORMS.md)
    resource = None  # type: ignore[assignment]

from . import bpe_v1, bpe_v2, bpe_v3, bpe_v4
from .ingest.counted import CountedInput, VersionReading, counted_input
from .ingest.plan import InputPlan
from .ingest.route import count_inputs  # noqa: F401  (importable from here, its home before ingest/)

# The notes on a run's counts (`count_notes`); each importable from here, its home before.
from .ingest.word_counts import (  # noqa: F401
    absent_special_tokens,
    absent_tokens_note,
    count_notes,
    looks_misspelled,
    token_brackets,
    unmatched_note,
    unmatched_text_bytes,
)
from .native.backend import NativeUnavailable, chosen_trainer, load_native
from .phases import CountParallelism, TrainerVersion
from .progress import progress_bar
from .rules.contract import (
    BPEInputError,
    Merges,
    Vocab,
    check_num_workers,
    check_special_tokens,
    check_vocab_size,
)
from .rules.merge_limits import NO_LIMITS, MergeLimits
from .rules.pattern import Pattern, pattern_label, resolve_pattern
from .rules.presets import (
    TrainingRules,
    preset_special_tokens,
    refuse_by_lines,
    resolve_preset,
    resolve_rules,
)
from .rules.splitting import present_bytes  # noqa: F401  (importable from here, its home before)
from .rules.start_from import (
    Base,
    StartFrom,
    extended_vocab,
    load_base,
    num_new_merges,
    occurring_merges,
    run_special_tokens,
)
from .rules.tie_break import CS336
from .rules.vocab_layout import CS336_LAYOUT, assemble_vocab, trains_below_initial
from .superbpe import check_transition, train_in_two_stages

if TYPE_CHECKING:
    from .ingest.word_counts import WordCounts


class TrainerUnavailable(NativeUnavailable):
    """A registered trainer that cannot run here; the message says why and how to fix it."""


# The compiled versions import their extension modules, so they are loaded only once the backend
# has said those modules can load.
def _load_bpe_v5() -> TrainerVersion:
    from . import bpe_v5

    return bpe_v5


def _load_bpe_v6() -> TrainerVersion:
    from . import bpe_v6

    return bpe_v6


def _load_bpe_v7() -> TrainerVersion:
    from . import bpe_v7

    return bpe_v7


@dataclass(frozen=True)
class Registered:
    load: Callable[[], TrainerVersion]
    native_modules: tuple[str, ...] = ()  # compiled modules it needs (see backend.NATIVE_MODULES)
    # Its merge takes counts held in C++ as they are, not a dict, and frees them once loaded when
    # given release_words=True.
    merges_native_counts: bool = False
    # Its merge loop runs on threads: it takes num_threads= (num_workers), which the others need not.
    merges_on_threads: bool = False


# Every version, oldest first; the last one that can run here is the default.
REGISTRY: dict[str, Registered] = {
    "bpe_v1": Registered(lambda: bpe_v1),
    "bpe_v2": Registered(lambda: bpe_v2),
    "bpe_v3": Registered(lambda: bpe_v3),
    "bpe_v4": Registered(lambda: bpe_v4),
    "bpe_v5": Registered(_load_bpe_v5, ("_merge_cy",)),
    "bpe_v6": Registered(_load_bpe_v6, ("_merge_cpp",)),
    "bpe_v7": Registered(_load_bpe_v7, ("_count_cpp", "_merge_cpp"), merges_native_counts=True, merges_on_threads=True),
}
TRAINERS = tuple(REGISTRY)
COMPILED_TRAINERS = frozenset(name for name, entry in REGISTRY.items() if entry.native_modules)


def load_trainer(name: str) -> TrainerVersion:
    if name not in REGISTRY:
        raise ValueError(f"unknown trainer {name!r}; choose one of {', '.join(TRAINERS)}")
    entry = REGISTRY[name]
    try:
        for module in entry.native_modules:
            load_native(module)
    except NativeUnavailable as error:
        raise TrainerUnavailable(f"{name} cannot run: {error}") from error
    return entry.load()


@dataclass(frozen=True)
class TrainerStatus:
    """Whether a trainer can run here, and if not, why; true when it can."""

    available: bool
    reason: str = ""  # empty when available

    def __bool__(self) -> bool:
        return self.available

    def __str__(self) -> str:
        return "available" if self.available else f"unavailable: {self.reason}"


def trainer_status() -> dict[str, TrainerStatus]:
    """Each registered trainer mapped to its TrainerStatus: `status["bpe_v7"].available`, `.reason`."""
    status: dict[str, TrainerStatus] = {}
    for name in TRAINERS:
        try:
            load_trainer(name)
            status[name] = TrainerStatus(True)
        except TrainerUnavailable as error:
            status[name] = TrainerStatus(False, str(error))
    return status


def default_trainer() -> str:
    """$CS336_TRAINER if set, else the fastest version that can run here."""
    chosen = chosen_trainer()
    if chosen:
        load_trainer(chosen)  # fail now, clearly, if the chosen one cannot run
        return chosen
    for name in reversed(TRAINERS):
        try:
            load_trainer(name)
            return name
        except TrainerUnavailable:
            continue
    raise AssertionError("the pure-Python trainers are always available")


def _own_peak_rss_bytes() -> int:
    # Linux's ru_maxrss survives exec, so a process started by a big parent would report the
    # parent's peak; /proc's VmHWM belongs to this process image alone.
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    if resource is None:
        return 0
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss is bytes on macOS, KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


# The children's peak survives exec too: `pip install -e . && python cs336_basics/test_trainer.py ...`
# in one `bash -c`, whose shell execs the last command, starts the run with the peak of the compiler
# pip ran (about 350 MB). Only a child peak above what this process image started with is a worker's.
_INHERITED_CHILDREN_PEAK = 0 if resource is None else resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss


def peak_rss_bytes() -> int:
    """Peak resident memory of this process or of its largest finished child (worker processes); 0
    where the platform does not report it (Windows)."""
    if resource is None:
        return 0
    scale = 1 if sys.platform == "darwin" else 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    workers = children * scale if children > _INHERITED_CHILDREN_PEAK else 0
    return max(_own_peak_rss_bytes(), workers)


@dataclass
class TrainingResult:
    vocab: Vocab
    merges: Merges
    trainer: str
    seconds: dict[str, float] = field(default_factory=dict)  # pre-tokenize, merge, total
    num_words: int = 0  # distinct pre-tokens
    peak_rss_bytes: int = 0
    special_tokens: list[str] = field(default_factory=list)
    # Special tokens the training text never holds (see absent_special_tokens); noted on stderr.
    absent_special_tokens: list[str] = field(default_factory=list)
    # What it trained by (see presets.resolve_rules): the pre-tokenizer, the tie-break, the vocabulary layout.
    pattern: Pattern = field(default_factory=lambda: resolve_pattern(None))
    tie_break: str = CS336
    layout: str = CS336_LAYOUT
    limits: MergeLimits = NO_LIMITS  # HF's min_frequency, max_token_length; SuperBPE's max_words, no_colon_space
    # The bytes the vocabulary starts from where not all 256 (layout hf-files: the bytes seen).
    alphabet: bytes | None = None
    # The tokenizer it started from (start_from.py); its merges begin `merges`.
    base: Base | None = None
    # Bytes of the training text a custom pattern matched nowhere (counted in no pre-token), where known.
    unmatched_bytes: int = 0
    # The bytes of text they are a share of: the training text less its special tokens.
    matchable_bytes: int = 0
    # SuperBPE (superbpe.py): the first stage's run; this is then the second's, and `base` its tokenizer.
    first_stage: TrainingResult | None = None

    def for_vocab_size(self, vocab_size: int) -> tuple[Vocab, Merges]:
        """`(vocab, merges)` of a run to `vocab_size` (at most this run's) on the same input, in this
        run's layout. Each merge is chosen from the counts and the merges before it, so a smaller
        run's merges are this run's first ones; where this run stopped early, a larger size stops at
        the same place."""
        below = trains_below_initial(self.layout)
        vocab_size = check_vocab_size(vocab_size, len(self.special_tokens), below_initial=below)
        if self.base is not None:
            first = len(self.base.merges)
            new = self.merges[first : first + num_new_merges(self.base, vocab_size, self.special_tokens)]
            return extended_vocab(self.base, self.special_tokens, new, self.layout), [*self.base.merges, *new]
        initial = 256 if self.alphabet is None else len(self.alphabet)
        merges = self.merges[: max(0, vocab_size - initial - len(self.special_tokens))]
        return assemble_vocab(self.special_tokens, merges, self.layout, self.alphabet), merges


def check_vocab_sizes(vocab_size: int | None, vocab_sizes: Iterable[int] | None) -> list[int]:
    """The sizes to produce, ascending: `vocab_sizes` and `vocab_size` (either may be None)."""
    sizes = [] if vocab_sizes is None else list(vocab_sizes)
    if vocab_size is not None:
        sizes.append(vocab_size)
    if not sizes:
        raise BPEInputError("give vocab_size, or vocab_sizes for several vocabularies from one run")
    # Each is checked again with its special tokens and rules (below_initial: positive here).
    return sorted({check_vocab_size(size, 0, below_initial=True) for size in sizes})


def tokenizers_by_size(result: TrainingResult, sizes: Iterable[int]) -> dict[int, tuple[Vocab, Merges]]:
    return {size: result.for_vocab_size(size) for size in sizes}


# The loose keywords of the rules, which `resolve_rules` takes: the public entries take them, and
# `train`, `train_from_counts` and `train_from_iterator` take them among their options too.
RULE_KEYWORDS = (
    "pattern", "tie_break", "like", "min_frequency", "max_token_length", "unicode", "max_words", "no_colon_space"
)  # fmt: skip


def given_rules(rules: TrainingRules | None, keywords: dict[str, object]) -> TrainingRules:
    """The rules of a run: `rules` as resolved (`presets.resolve_rules`), or resolved here, once, from the
    loose keywords among `keywords` (`RULE_KEYWORDS`, taken out of it); not both."""
    loose = {name: keywords.pop(name) for name in RULE_KEYWORDS if name in keywords}
    if rules is None:
        return resolve_rules(**loose)  # type: ignore[arg-type]
    if loose:
        raise TypeError(f"give rules= or the keywords {', '.join(loose)}, not both")
    if not isinstance(rules, TrainingRules):
        raise TypeError(f"rules must be presets.TrainingRules (presets.resolve_rules), got {type(rules).__name__}")
    return rules


def run_setup(
    special_tokens: list[str] | None, start_from: StartFrom | None, rules: TrainingRules
) -> tuple[list[str], Base | None, TrainingRules]:
    """A run's special tokens (a preset's own where none are given), its base (`start_from` loaded, whose
    special tokens join them) and its rules from the base (`TrainingRules.from_base`)."""
    specials = check_special_tokens(preset_special_tokens(rules.like, special_tokens))
    base = None if start_from is None else load_base(start_from, specials)
    if base is not None:  # the base's special tokens split the text too
        specials = run_special_tokens(base, specials)
    return specials, base, rules.from_base(base)


def train(
    input_path: str | PathLike | InputPlan,
    vocab_size: int,
    special_tokens: list[str] | None = None,
    *,
    trainer: str | None = None,
    progress: bool = False,
    format: str | None = None,
    text_field: str = "text",
    skip_bad_records: bool = False,
    rules: TrainingRules | None = None,
    start_from: StartFrom | None = None,
    superbpe: int | None = None,
    **options: object,
) -> TrainingResult:
    """Train with the named version (default: `default_trainer()`). `options` are
    `phases.CountParallelism`: `num_workers`, `num_chunks`; they never change the result.

    `rules`: what it trains by (`presets.resolve_rules`); or, among `options`, the keywords it takes:
    `pattern`: the pre-tokenizer, `gpt2` (the default), `cl100k`, `o200k` or any regex for the
    `regex` package (`pattern.py`); `tie_break`: `cs336` (the default), `smallest-id` or `hf`
    (`tie_break.py`); `like`: `cs336`, `rustbpe` or `hf` sets both and the vocabulary's layout to
    give that tool's result (`presets.py`); a `pattern` or `tie_break` that contradicts it is refused.
    `unicode`: the Unicode version of the pattern's character classes, one of `pattern.UNICODE_VERSIONS`
    (default: `like`'s, 16.0 for the tools' presets, else the installed `regex`'s); recorded in the run.
    `min_frequency`, `max_token_length`: HF's limits; `max_words`, `no_colon_space`: SuperBPE's limits on
    the merged token (never more than that many space-separated words, never ": "; `merge_limits.py`).
    All bound the new merges only, not a base's.

    A compressed, JSON-lines or Parquet file (`format`, `text_field`: see `ingest.plan.inspect_input`)
    is counted by the shared streaming counter and the version runs its merge phase on the counts.
    `skip_bad_records`: leave out JSON-lines records that are not JSON or lack the field, and report
    how many on stderr, instead of stopping at the first (see `counting.count_words`). An input that
    holds no text at all is refused; a special token the text never holds is noted on stderr (see
    `absent_special_tokens`). `input_path` may be an fsspec URL.

    `start_from`: a tokenizer to go on from, `(vocab, merges)` or the path of its files (see
    `start_from.load_base`); its ids and merges are kept, `vocab_size` counts its tokens, its special
    tokens join `special_tokens` (docs/START_FROM.md). `input_path` may be a plan of inputs already
    inspected (`ingest.plan.plan_inputs`): then `format`, `text_field` and `skip_bad_records` are the
    plan's.

    `superbpe`: the vocab_size `T` where SuperBPE's second stage begins (`superbpe.py`): a run to `T`,
    then on from it to `vocab_size` with the superword pattern, which pre-tokenizes whole lines but
    for numbers (docs/SUPERBPE.md)."""
    rules = given_rules(rules, options)
    if superbpe is not None:
        check_transition(superbpe, [vocab_size])

        def run_stage(size: int, stage_rules: TrainingRules, stage_base: Base | None) -> TrainingResult:
            return train(
                input_path, size, special_tokens, trainer=trainer, progress=progress, format=format,
                text_field=text_field, skip_bad_records=skip_bad_records, rules=stage_rules, start_from=stage_base,
                **options,
            )  # fmt: skip

        user_base = None if start_from is None else run_setup(special_tokens, start_from, rules)[1]
        return train_in_two_stages(run_stage, superbpe, vocab_size, rules, user_base)
    specials, base, rules = run_setup(special_tokens, start_from, rules)
    vocab_size = check_vocab_size(vocab_size, len(specials), below_initial=rules.below_initial)
    return _train_on_input(
        input_path, vocab_size, specials, trainer, progress, format, text_field, skip_bad_records, rules, base, options
    )


def _train_on_input(
    input_path: str | PathLike | InputPlan,
    vocab_size: int,
    specials: list[str],
    trainer: str | None,
    progress: bool,
    format: str | None,
    text_field: str,
    skip_bad_records: bool,
    rules: TrainingRules,
    base: Base | None,
    options: dict[str, object],
) -> TrainingResult:
    """`train`'s input counted by `ingest.counted.counted_input` (which decides the route: the version
    reads one local text file itself, by lines for hf-files; anything else is counted first), then the
    version's merge phase on the counts."""

    def reading() -> VersionReading:  # asked once the input is inspected and routed
        count_options = CountParallelism.from_keywords(options)
        name = trainer or default_trainer()
        version = load_trainer(name)
        native_counts = REGISTRY[name].merges_native_counts
        if base is not None and not rules.by_lines:  # a size too small for the base, refused before reading
            num_new_merges(base, vocab_size, specials)
        return VersionReading(name, version, count_options, native_lines=name != "bpe_v1", native_counts=native_counts)

    counted = counted_input(
        input_path,
        specials,
        rules,
        reading,
        format=format,
        text_field=text_field,
        skip_bad_records=skip_bad_records,
        base=base,
        progress=progress,
    )
    return _merge_phase(counted, vocab_size, specials, progress, rules, base)


def lines_base(base: Base, word_counts: Sized, specials: list[str], alphabet: bytes, layout: str) -> Base:
    """HF's `train(files)` going on from `base`, as SuperBPE's trainer does (docs/SUPERBPE.md): the
    vocabulary starts from the special tokens and the bytes the text holds, then the base's merges
    whose pair occurs in the counted words (`start_from.occurring_merges`), renumbered in order."""
    items = (word_counts.to_dict() if hasattr(word_counts, "to_dict") else word_counts).items()  # type: ignore[attr-defined]
    kept = occurring_merges(items, base.merges)
    vocab = assemble_vocab(specials, kept, layout, alphabet)
    return Base(vocab, kept, list(specials), source=base.source)


def _merge_phase(
    counted: CountedInput,
    vocab_size: int,
    specials: list[str],
    progress: bool,
    rules: TrainingRules,
    base: Base | None = None,
) -> TrainingResult:
    """The merge phase of `counted.reading`'s version on the counts, and the result, shared by training
    from text and from counts, by `rules` (the tie-break the merge takes, the layout of the vocabulary),
    from `base` if given (the merges go on from its own), to `vocab_size` tokens: from the bytes the
    text holds where `counted.alphabet` says so (layout hf-files; from a base, its merges that occur
    in the counts, `lines_base`)."""
    name, version, num_workers = counted.reading.name, counted.reading.version, counted.reading.options.num_workers
    word_counts, alphabet = counted.word_counts, counted.alphabet
    if alphabet is not None and base is not None:
        base = lines_base(base, word_counts, specials, alphabet, rules.layout)
        num_merges = max(0, vocab_size - len(base.vocab))
    elif alphabet is not None:
        num_merges = max(0, vocab_size - len(alphabet) - len(specials))
    elif base is not None:
        num_merges = num_new_merges(base, vocab_size, specials)
    else:  # below the initial tokens (HF's presets train it): no merges
        num_merges = max(0, vocab_size - 256 - len(specials))
    num_words = len(word_counts)
    merging = time.perf_counter()
    options: dict[str, object] = {}
    if counted.release_words:
        options["release_words"] = True
    if REGISTRY[name].merges_on_threads and num_workers is not None:
        options["num_threads"] = num_workers
    options["rules"] = rules.merge_rules(base)
    with progress_bar(progress, num_merges, "merges", "merge") as advance:
        merges = version.merge(word_counts, num_merges, advance, **options)  # type: ignore[call-arg]
    finished = time.perf_counter()
    if base is not None:
        vocab = extended_vocab(base, specials, merges, rules.layout)
        merges = [*base.merges, *merges]
    else:
        vocab = assemble_vocab(specials, merges, rules.layout, alphabet)
    started, notes = counted.started, counted.notes
    return TrainingResult(
        vocab=vocab,
        merges=merges,
        trainer=name,
        seconds={counted.first_phase: merging - started, "merge": finished - merging, "total": finished - started},
        num_words=num_words,
        peak_rss_bytes=peak_rss_bytes(),
        special_tokens=list(specials),
        absent_special_tokens=notes.absent_special_tokens,
        pattern=rules.pattern,
        tie_break=rules.tie_break,
        layout=rules.layout,
        limits=rules.limits,
        alphabet=alphabet,
        base=base,
        unmatched_bytes=notes.unmatched_bytes,
        matchable_bytes=notes.matchable_bytes,
    )


def train_bpe(
    input_path: str | PathLike,
    vocab_size: int | None,
    special_tokens: list[str] | None = None,
    *,
    trainer: str | None = None,
    vocab_sizes: Iterable[int] | None = None,
    pattern: str | Pattern | None = None,
    tie_break: str | None = None,
    like: str | None = None,
    start_from: StartFrom | None = None,
    min_frequency: int | None = None,
    max_token_length: int | None = None,
    unicode: str | None = None,
    superbpe: int | None = None,
    max_words: int | None = None,
    no_colon_space: bool | None = None,
    **options: object,
) -> tuple[Vocab, Merges] | dict[int, tuple[Vocab, Merges]]:
    """Train a byte-level BPE tokenizer; returns `(vocab, merges)` exactly as CS336 specifies
    (by default; `pattern`, `tie_break` and `like` train as another tool does, see `train`).
    `start_from=(vocab, merges)` (or a path) goes on from that tokenizer (see `train`).

    `superbpe=T` trains superword tokens (SuperBPE, see `train`): every size must be above `T`.

    With `vocab_sizes` (`vocab_size` may then be None), one run to the largest size gives every
    size's tokenizer, `{size: (vocab, merges)}`, each equal to a separate run of that size."""
    rules = resolve_rules(
        pattern, tie_break, like, min_frequency, max_token_length, unicode, max_words, no_colon_space
    )
    given = {"trainer": trainer, "rules": rules, "start_from": start_from, "superbpe": superbpe}
    if vocab_sizes is None:
        result = train(input_path, vocab_size, special_tokens, **given, **options)  # type: ignore[arg-type]
        return result.vocab, result.merges
    sizes = check_vocab_sizes(vocab_size, vocab_sizes)
    if superbpe is not None:
        check_transition(superbpe, sizes)
    result = train(input_path, sizes[-1], special_tokens, **given, **options)  # type: ignore[arg-type]
    return tokenizers_by_size(result, sizes)


# ---------------------------------------------------------------------------------------------
# Training from word counts (count files, or counts summed from many machines)


def train_from_counts(
    counts: WordCounts | Mapping[bytes, int] | str | PathLike | Sequence[str | PathLike],
    vocab_size: int,
    special_tokens: list[str] | None = None,
    *,
    trainer: str | None = None,
    progress: bool = False,
    num_workers: int | None = None,
    rules: TrainingRules | None = None,
    start_from: StartFrom | None = None,
    **keywords: object,
) -> TrainingResult:
    """Run only the merge phase of a version on word counts: a `WordCounts`, a `{word_bytes: count}`
    mapping, or the path(s) of count files (summed). Every version's `merge` takes a dict (bpe_v7 also
    the table held in C++ that counting and loading make), so the result equals training that
    version on the text the counts came from. `num_workers`: at most this many bpe_v7 merge threads,
    as in `train` (None: every core). `rules` (or the keywords of `RULE_KEYWORDS`) as in `train`.

    `special_tokens` and the pattern default to the ones the counts were made with; other ones are
    refused, since the counts would not be those of the text split on them or pre-tokenized by it (a
    plain mapping carries none, so any special tokens and pattern are taken as given). The Unicode
    version defaults to the counts' where neither `unicode`, `like` nor a base names one; a run by
    another version is refused where the words hold a character the two class differently
    (`refuse_other_unicode`). `start_from` as in `train`: the counts do not depend on it, but its
    special tokens must be among theirs."""
    started = time.perf_counter()
    rules = given_rules(rules, keywords)
    if keywords:
        raise TypeError(f"train_from_counts() got unexpected keyword argument(s) {sorted(keywords)}")
    num_workers = check_num_workers(num_workers)
    counts, specials, base, rules = _counts_setup(counts, special_tokens, start_from, rules)
    refuse_by_lines(rules, "word counts")
    vocab_size = check_vocab_size(vocab_size, len(specials), below_initial=rules.below_initial)
    name = trainer or default_trainer()
    version = load_trainer(name)
    # A version that merges counts held in C++ takes them as they are; every other one takes a dict.
    native = REGISTRY[name].merges_native_counts and counts.native is not None
    word_counts = counts.native if native else counts.counts
    measured = counts.special_token_bytes  # the note on unmatched text needs the special tokens' bytes
    notes = count_notes(word_counts, specials, counts.source_bytes, rules, lambda: measured)
    reading = VersionReading(name, version, CountParallelism(num_workers=num_workers))
    counted = CountedInput(reading, word_counts, counts.source_bytes, notes, started, first_phase="load counts")
    return _merge_phase(counted, vocab_size, specials, progress, rules, base)


def _counts_setup(
    counts: WordCounts | Mapping[bytes, int] | str | PathLike | Sequence[str | PathLike],
    special_tokens: list[str] | None,
    start_from: StartFrom | None,
    rules: TrainingRules,
) -> tuple[WordCounts, list[str], Base | None, TrainingRules]:
    """`train_from_counts`' counts (loaded where paths), special tokens, base and rules: what the counts
    were made with where the user left it open, and refused in one line where they contradict it."""
    from .ingest.word_counts import WordCounts

    if isinstance(counts, (str, PathLike)):
        counts = WordCounts.load(counts)
    elif isinstance(counts, Sequence):
        counts = WordCounts.load_all(counts)
    special_tokens = preset_special_tokens(rules.like, special_tokens)
    if not isinstance(counts, WordCounts):  # a plain mapping: the rules as given
        base = None if start_from is None else load_base(start_from, check_special_tokens(special_tokens))
        rules = rules.from_base(base)
        counts = WordCounts(dict(counts), pattern=rules.pattern.regex, unicode=rules.pattern.unicode)
    else:
        base, special_tokens = _counted_specials(counts, special_tokens, start_from, rules)
        rules = rules.from_base(base).for_counts(counts.pattern, counts.unicode)
        if counts.pattern != rules.pattern.regex:
            raise BPEInputError(
                f"the word counts were made with the pattern {counts.pattern_label}, not "
                f"{pattern_label(rules.pattern.regex)}; count again with this pattern, or train with the counts' one"
            )
        refuse_other_unicode(counts, rules)
    specials = check_special_tokens(special_tokens)
    if base is not None:
        specials = run_special_tokens(base, specials)
    return counts, specials, base, rules


def _counted_specials(
    counts: WordCounts, special_tokens: list[str] | None, start_from: StartFrom | None, rules: TrainingRules
) -> tuple[Base | None, list[str]]:
    """The base and the special tokens of a run on `counts`: the counts' own where none are given (none
    where the preset counts them as text); others refused, as counts split on others are not the run's."""
    like = rules.like
    if special_tokens is None:
        special_tokens = [] if rules.specials_as_text else list(counts.special_tokens)
    base = None if start_from is None else load_base(start_from, check_special_tokens(special_tokens))
    if rules.specials_as_text:
        if counts.special_tokens:
            raise BPEInputError(
                f"like={like!r} counts special tokens as text; the word counts were split on "
                f"{counts.special_tokens}: count again with none"
            )
        return base, special_tokens
    if base is not None and set(run_special_tokens(base, special_tokens)) != set(counts.special_tokens):
        raise BPEInputError(
            f"the word counts were made with special tokens {counts.special_tokens}; the run from "
            f"{base.source} splits on {run_special_tokens(base, special_tokens)}: count again with those"
        )
    if base is not None:
        return base, list(counts.special_tokens)
    if list(special_tokens) != list(counts.special_tokens):
        raise BPEInputError(
            f"the word counts were made with special tokens {counts.special_tokens}, not {list(special_tokens)}; "
            "count again with these special tokens"
        )
    return base, special_tokens


def refuse_other_unicode(counts: WordCounts, rules: TrainingRules) -> None:
    """Refuse, in one line, counts made by another Unicode version's classes (or by one not recorded)
    than the run's `unicode` when their words hold a character the two class differently: the text
    would split otherwise. Elsewhere the versions split alike, and the counts are the run's own."""
    unicode, like = rules.pattern.unicode, rules.like
    found = counts.first_classed_otherwise(unicode)
    if found is None:
        return
    fix = f"count again with --unicode {unicode}"
    run = "the run"
    if resolve_preset(like).unicode is not None:
        run += f" (like={like!r}, as the tool)"
    elif counts.unicode is not None:
        fix += f", or train with --unicode {counts.unicode}"
    if counts.unicode is None:
        made = "by a Unicode version they do not record (a count file of format version 1)"
    else:
        made = f"by Unicode {counts.unicode}'s character classes"
    raise BPEInputError(
        f"the word counts were made {made}, {run} classes by Unicode {unicode}'s, and their words hold "
        f"U+{ord(found):04X}, which the two class differently: {fix}"
    )


def train_bpe_from_counts(
    counts: WordCounts | Mapping[bytes, int] | str | PathLike | Sequence[str | PathLike],
    vocab_size: int | None,
    special_tokens: list[str] | None = None,
    *,
    trainer: str | None = None,
    vocab_sizes: Iterable[int] | None = None,
    num_workers: int | None = None,
    pattern: str | Pattern | None = None,
    tie_break: str | None = None,
    like: str | None = None,
    start_from: StartFrom | None = None,
    min_frequency: int | None = None,
    max_token_length: int | None = None,
    unicode: str | None = None,
    max_words: int | None = None,
    no_colon_space: bool | None = None,
) -> tuple[Vocab, Merges] | dict[int, tuple[Vocab, Merges]]:
    """`train_bpe` from word counts instead of text (`vocab_sizes`, `num_workers`, `pattern`,
    `tie_break`, `like`, `start_from` and HF's limits as there; the pattern defaults to the counts');
    see `train_from_counts`."""
    rules = resolve_rules(
        pattern, tie_break, like, min_frequency, max_token_length, unicode, max_words, no_colon_space
    )
    # The pattern a count file was made with stands unless one is asked for (TrainingRules.for_counts).
    given = {"trainer": trainer, "num_workers": num_workers, "rules": rules, "start_from": start_from}
    if vocab_sizes is None:
        result = train_from_counts(counts, vocab_size, special_tokens, **given)  # type: ignore[arg-type]
        return result.vocab, result.merges
    sizes = check_vocab_sizes(vocab_size, vocab_sizes)
    result = train_from_counts(counts, sizes[-1], special_tokens, **given)  # type: ignore[arg-type]
    return tokenizers_by_size(result, sizes)


# ---------------------------------------------------------------------------------------------
# Training from documents and streamed files: counted by `counting`, merged by the version


def train_after_counting(
    count: Callable[[], WordCounts],
    vocab_size: int,
    special_tokens: list[str] | None,
    *,
    trainer: str | None = None,
    progress: bool = False,
    first_phase: str = "pre-tokenize",
    num_workers: int | None = None,
    rules: TrainingRules | None = None,
    base: Base | None = None,
) -> tuple[TrainingResult, WordCounts]:
    """`count()` (counting any source, or loading count files), then the version's merge phase on
    the counts, on `num_workers` threads, by `rules` (None: the defaults) as `train_from_counts` takes
    them, from `base` (loaded: `start_from.load_base`) if given; the result's phases are `first_phase`
    (what `count` did) and the merging."""
    started = time.perf_counter()
    counts = count()
    counted = time.perf_counter()
    result = train_from_counts(
        counts,
        vocab_size,
        special_tokens,
        trainer=trainer,
        progress=progress,
        num_workers=num_workers,
        rules=rules or resolve_rules(),
        start_from=base,
    )
    result.seconds = {
        first_phase: counted - started,
        "merge": result.seconds["merge"],
        "total": time.perf_counter() - started,
    }
    return result, counts


def train_from_iterator(
    texts: Iterable[str | bytes] | object,
    vocab_size: int,
    special_tokens: list[str] | None = None,
    *,
    trainer: str | None = None,
    progress: bool = False,
    length: int | None = None,
    text_field: str = "text",
    rules: TrainingRules | None = None,
    start_from: StartFrom | None = None,
    superbpe: int | None = None,
    **options: object,
) -> TrainingResult:
    """`train` on documents instead of a file: each item of `texts` is one document (see
    `counting.count_words_from_iterator` for what `texts` may be). The result equals training on
    the text file in which the documents are joined by the first special token; with no special
    token, no pair is counted across documents. The iterable is streamed, read once. `length`: the
    number of documents, for the progress bar (as HF `tokenizers` takes it). `options`: `num_workers`
    (counting and merging threads). `rules` (or the keywords of `RULE_KEYWORDS` among `options`),
    `start_from` and `superbpe` as in `train`; `superbpe` reads the documents once per stage, so they
    must be a collection (a list, a table, a dataset), not a one-pass iterator."""
    from .ingest.counting import count_words_from_iterator

    rules = given_rules(rules, options)
    if superbpe is not None:
        check_transition(superbpe, [vocab_size])
        if isinstance(texts, Iterator):
            raise BPEInputError(
                "superbpe reads the documents twice (once per stage): give a list, a table or a dataset, "
                "not a one-pass iterator or generator"
            )

        def run_stage(size: int, stage_rules: TrainingRules, stage_base: Base | None) -> TrainingResult:
            return train_from_iterator(
                texts, size, special_tokens, trainer=trainer, progress=progress, length=length,
                text_field=text_field, rules=stage_rules, start_from=stage_base, **options,
            )  # fmt: skip

        user_base = None if start_from is None else run_setup(special_tokens, start_from, rules)[1]
        return train_in_two_stages(run_stage, superbpe, vocab_size, rules, user_base)
    specials, base, rules = run_setup(special_tokens, start_from, rules)
    vocab_size = check_vocab_size(vocab_size, len(specials), below_initial=rules.below_initial)
    refuse_by_lines(rules, "documents")
    count_options = CountParallelism.from_keywords(options)
    name = trainer or default_trainer()
    load_trainer(name)  # an unknown or unavailable trainer fails before the documents are read

    def count() -> WordCounts:
        counts = count_words_from_iterator(
            texts,
            rules.counted_special_tokens(specials),
            num_workers=count_options.num_workers,
            progress=progress,
            length=length,
            text_field=text_field,
            pattern=rules.pattern,
        )
        if not counts.source_bytes:
            raise BPEInputError("the documents hold no text: none were given, or every one is empty")
        return counts

    return train_after_counting(
        count,
        vocab_size,
        specials,
        trainer=name,
        progress=progress,
        num_workers=count_options.num_workers,
        rules=rules,
        base=base,
    )[0]


def train_bpe_from_iterator(
    texts: Iterable[str | bytes] | object,
    vocab_size: int,
    special_tokens: list[str] | None = None,
    *,
    trainer: str | None = None,
    pattern: str | Pattern | None = None,
    tie_break: str | None = None,
    like: str | None = None,
    start_from: StartFrom | None = None,
    min_frequency: int | None = None,
    max_token_length: int | None = None,
    unicode: str | None = None,
    superbpe: int | None = None,
    max_words: int | None = None,
    no_colon_space: bool | None = None,
    **options: object,
) -> tuple[Vocab, Merges]:
    """`train_bpe` on documents (an iterable of str, bytes or records, a pyarrow table or array, a HF dataset);
    see `train_from_iterator` (`pattern`, `tie_break`, `like`, `start_from`, `superbpe` as in `train`)."""
    rules = resolve_rules(
        pattern, tie_break, like, min_frequency, max_token_length, unicode, max_words, no_colon_space
    )
    given = {"trainer": trainer, "rules": rules, "start_from": start_from, "superbpe": superbpe}
    result = train_from_iterator(texts, vocab_size, special_tokens, **given, **options)  # type: ignore[arg-type]
    return result.vocab, result.merges
