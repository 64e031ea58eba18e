"""Byte-level BPE training with the exact semantics of Stanford CS336 assignment 1.

    from cs336_basics import train_bpe
    vocab, merges = train_bpe("data.txt", 10_000, ["<|endoftext|>"])            # fastest version here
    vocab, merges = train_bpe("data.txt", 10_000, ["<|endoftext|>"], trainer="bpe_v1")  # the oracle
    counts = count_words(["a.txt", "b.txt"], ["<|endoftext|>"]); counts.save("counts.bin")  # count once
    vocab, merges = train_bpe_from_counts("counts.bin", 10_000)                  # train from the counts
    ids = Tokenizer(vocab, merges, ["<|endoftext|>"]).encode("Once upon a time<|endoftext|>")
"""

from ._common import BPEInputError
from .backend import openmp_enabled
from .tokenizer import Tokenizer
from .trainers import (
    TRAINERS,
    TrainerUnavailable,
    default_trainer,
    train,
    train_bpe,
    train_bpe_from_counts,
    trainer_status,
)
from .word_counts import WordCounts, count_words

__all__ = [
    "TRAINERS",
    "BPEInputError",
    "Tokenizer",
    "TrainerUnavailable",
    "WordCounts",
    "count_words",
    "default_trainer",
    "openmp_enabled",
    "train",
    "train_bpe",
    "train_bpe_from_counts",
    "trainer_status",
]
