"""The one registry of trainer versions, and the driver that runs any of them.

Every version module exposes two phases with the same signatures:
    pretokenize_and_count(input_path, special_tokens, *, progress, num_workers, num_chunks) -> word counts
    merge(word_counts, num_merges, *, progress) -> merges
The driver checks the arguments, times both phases and assembles the vocabulary, so the versions
differ only in how they do the two phases.
"""

from __future__ import annotations

import importlib
import os
import resource
import sys
import time
from dataclasses import dataclass, field
from os import PathLike
from types import ModuleType

from ._common import Merges, Vocab, assemble_vocab, check_input_file, check_special_tokens, check_vocab_size

TRAINERS = ("bpe_v1", "bpe_v2", "bpe_v3", "bpe_v4", "bpe_v5", "bpe_v6", "bpe_v7")
COMPILED_TRAINERS = frozenset({"bpe_v5", "bpe_v6", "bpe_v7"})

TRAINER_ENV = "CS336_TRAINER"  # which trainer the adapter and the CLI use by default
PURE_PYTHON_ENV = "CS336_PURE_PYTHON"  # any value but "", "0": never load compiled code


class TrainerUnavailable(ImportError):
    """A registered trainer that cannot run here; the message says why and how to fix it."""


def pure_python_forced() -> bool:
    return os.environ.get(PURE_PYTHON_ENV, "").strip().lower() not in ("", "0", "false", "no")


def load_trainer(name: str) -> ModuleType:
    if name not in TRAINERS:
        raise ValueError(f"unknown trainer {name!r}; choose one of {', '.join(TRAINERS)}")
    if name in COMPILED_TRAINERS and pure_python_forced():
        raise TrainerUnavailable(f"{name} is compiled code and {PURE_PYTHON_ENV} is set")
    try:
        return importlib.import_module(f".{name}", __package__)
    except ImportError as error:
        if name not in COMPILED_TRAINERS:
            raise
        raise TrainerUnavailable(
            f"{name} needs the compiled extensions, which are not built here ({error}); "
            "install with a C++ compiler: pip install -e ."
        ) from error


def trainer_status() -> dict[str, str | None]:
    """Each registered trainer mapped to None when it can run, else the reason it cannot."""
    status: dict[str, str | None] = {}
    for name in TRAINERS:
        try:
            load_trainer(name)
            status[name] = None
        except TrainerUnavailable as error:
            status[name] = str(error)
    return status


def default_trainer() -> str:
    """$CS336_TRAINER if set, else the fastest version that can run here."""
    chosen = os.environ.get(TRAINER_ENV, "").strip()
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
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss is bytes on macOS, KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def peak_rss_bytes() -> int:
    """Peak resident memory of this process or of its largest finished child (worker processes)."""
    scale = 1 if sys.platform == "darwin" else 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * scale
    return max(_own_peak_rss_bytes(), children)


@dataclass
class TrainingResult:
    vocab: Vocab
    merges: Merges
    trainer: str
    seconds: dict[str, float] = field(default_factory=dict)  # pre-tokenize, merge, total
    num_words: int = 0  # distinct pre-tokens
    peak_rss_bytes: int = 0


def train(
    input_path: str | PathLike,
    vocab_size: int,
    special_tokens: list[str] | None = None,
    *,
    trainer: str | None = None,
    progress: bool = False,
    **options: object,
) -> TrainingResult:
    """Train with the named version (default: `default_trainer()`); options go to pre-tokenization
    (`num_workers`, `num_chunks`, and for bpe_v7 `num_threads`, `chunk_bytes`)."""
    specials = check_special_tokens(special_tokens)
    vocab_size = check_vocab_size(vocab_size, len(specials))
    check_input_file(input_path)
    name = trainer or default_trainer()
    module = load_trainer(name)

    started = time.perf_counter()
    word_counts = module.pretokenize_and_count(input_path, specials, progress=progress, **options)
    counted = time.perf_counter()
    merges = module.merge(word_counts, vocab_size - 256 - len(specials), progress=progress)
    finished = time.perf_counter()

    return TrainingResult(
        vocab=assemble_vocab(specials, merges),
        merges=merges,
        trainer=name,
        seconds={"pre-tokenize": counted - started, "merge": finished - counted, "total": finished - started},
        num_words=len(word_counts),
        peak_rss_bytes=peak_rss_bytes(),
    )


def train_bpe(
    input_path: str | PathLike,
    vocab_size: int,
    special_tokens: list[str] | None = None,
    *,
    trainer: str | None = None,
    **options: object,
) -> tuple[Vocab, Merges]:
    """Train a byte-level BPE tokenizer; returns `(vocab, merges)` exactly as CS336 specifies.

    Options, none of which changes the result:
      trainer      "bpe_v1" ... "bpe_v7"; default `default_trainer()`: `$CS336_TRAINER`, else the
                   fastest version that can run here
      progress     True shows progress bars for pre-tokenization and merges
      num_workers  processes (bpe_v3-bpe_v6) or threads (bpe_v7); None picks by file size, -1 is
                   every core, -2 all but one; bpe_v1 and bpe_v2 count in this process
      num_chunks   how many pieces the file is cut into (at special tokens) for the workers
      num_threads, chunk_bytes   bpe_v7's own names for the two above
    """
    result = train(input_path, vocab_size, special_tokens, trainer=trainer, **options)
    return result.vocab, result.merges
