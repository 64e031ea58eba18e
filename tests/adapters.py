"""The CS336 assignment's tokenizer adapters, backed by cs336_basics.

Copy `run_train_bpe` and `get_tokenizer` into the assignment's `tests/adapters.py` (or this whole
file, if you only run the tokenizer tests). The trainer is `$CS336_TRAINER` when set (bpe_v1 ...
bpe_v7), else the fastest version that can run on this machine; `CS336_PURE_PYTHON=1` keeps
everything in pure Python.
"""

from __future__ import annotations

import os
from typing import Any

from cs336_basics import train_bpe
from cs336_basics.tokenizer import Tokenizer


def run_train_bpe(
    input_path: str | os.PathLike,
    vocab_size: int,
    special_tokens: list[str],
    **kwargs: Any,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Train a byte-level BPE tokenizer on `input_path`; returns `(vocab, merges)`.

    Extra keyword arguments go to the trainer (`trainer="bpe_v4"`, `num_workers=2`, ...).
    """
    return train_bpe(input_path, vocab_size, special_tokens, **kwargs)


def get_tokenizer(
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    special_tokens: list[str] | None = None,
) -> Tokenizer:
    """A tokenizer over `vocab` and `merges`; `encode`, `encode_iterable` and `decode` as the
    assignment specifies. Compiled when built, pure Python under `CS336_PURE_PYTHON=1`."""
    return Tokenizer(vocab, merges, special_tokens)
