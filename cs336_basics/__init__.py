"""Byte-level BPE training with the exact semantics of Stanford CS336 assignment 1.

    from cs336_bpe import train_bpe
    vocab, merges = train_bpe("data.txt", 10_000, ["<|endoftext|>"])            # fastest version here
    vocab, merges = train_bpe("data.txt", 10_000, ["<|endoftext|>"], trainer="bpe_v1")  # the oracle
    counts = count_words(["a.txt", "b.txt"], ["<|endoftext|>"]); counts.save("counts.bin")  # count once
    vocab, merges = train_bpe_from_counts("counts.bin", 10_000)                  # train from the counts
    ids = Tokenizer(vocab, merges, ["<|endoftext|>"]).encode("Once upon a time<|endoftext|>")

Installed, the package is `cs336_bpe`; from this checkout it is also `cs336_basics`. Both names are
one package in a process (see _identity.py): the same modules, classes and exceptions.
"""

if __name__ == "cs336_basics":
    # The checkout's name: stand for cs336_bpe, bound to this folder (see _identity.py).
    import importlib.util as _util
    import sys as _sys
    from pathlib import Path as _Path

    _spec = _util.spec_from_file_location(
        "_cs336_identity", _Path(__file__).resolve().parent / "_identity.py"
    )
    _identity = _util.module_from_spec(_spec)
    _spec.loader.exec_module(_identity)
    _sys.modules[__name__] = _identity.adopt_canonical_name(__file__)
else:
    from .backend import openmp_enabled
    from .contract import BPEInputError
    from .counting import count_words, count_words_from_iterator
    from .tokenizer import Tokenizer
    from .trainers import (
        TRAINERS,
        TrainerStatus,
        TrainerUnavailable,
        default_trainer,
        train,
        train_bpe,
        train_bpe_from_counts,
        train_bpe_from_iterator,
        train_from_iterator,
        trainer_status,
    )
    from .word_counts import WordCounts

    __all__ = [
        "TRAINERS",
        "BPEInputError",
        "Tokenizer",
        "TrainerStatus",
        "TrainerUnavailable",
        "WordCounts",
        "count_words",
        "count_words_from_iterator",
        "default_trainer",
        "openmp_enabled",
        "train",
        "train_bpe",
        "train_bpe_from_counts",
        "train_bpe_from_iterator",
        "train_from_iterator",
        "trainer_status",
    ]
