"""Byte-level BPE training with the exact semantics of Stanford CS336 assignment 1.

    from cs336_basics import train_bpe
    vocab, merges = train_bpe("data.txt", 10_000, ["<|endoftext|>"])            # fastest version here
    vocab, merges = train_bpe("data.txt", 10_000, ["<|endoftext|>"], trainer="bpe_v1")  # the oracle
    ids = Tokenizer(vocab, merges, ["<|endoftext|>"]).encode("Once upon a time<|endoftext|>")
"""

from ._common import BPEInputError
from .tokenizer import Tokenizer
from .trainers import TRAINERS, TrainerUnavailable, default_trainer, train, train_bpe, trainer_status

__all__ = [
    "TRAINERS",
    "BPEInputError",
    "Tokenizer",
    "TrainerUnavailable",
    "default_trainer",
    "openmp_enabled",
    "train",
    "train_bpe",
    "trainer_status",
]


def openmp_enabled() -> bool:
    """Whether the native extension was built with OpenMP (False when it is not built at all)."""
    from .trainers import pure_python_forced

    if pure_python_forced():
        return False
    from ._compiled import import_compiled

    try:
        native = import_compiled("_native")
    except ImportError:
        return False
    return bool(native.openmp_enabled())
