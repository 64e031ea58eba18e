"""The CS336 assignment's tokenizer adapters, backed by this project (installed as `cs336_bpe`).

Paste `run_train_bpe` and `get_tokenizer` over the two stubs of the same name in the assignment's
`tests/adapters.py` (or copy this whole file there, if you only run the BPE and tokenizer tests).
They import `cs336_bpe`, the name this project is installed under (`pip install -e .` here, or
`pip install <this checkout>` / `uv add <this checkout>` into the assignment's environment), so
they work beside your own `cs336_basics` package and never import it.

The trainer is `$CS336_TRAINER` when set (bpe_v1 ... bpe_v7), else the fastest version that can run
on this machine; `CS336_PURE_PYTHON=1` keeps everything in pure Python.
"""

from __future__ import annotations

import os


def run_train_bpe(
    input_path: str | os.PathLike,
    vocab_size: int,
    special_tokens: list[str],
    **kwargs: object,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Train a byte-level BPE tokenizer on `input_path`; returns `(vocab, merges)`.

    Extra keyword arguments go to the trainer: `trainer="bpe_v4"` picks a version; `num_workers`
    sets processes (v3-v6) or threads (v7), -1 for every core; `num_chunks` how many pieces the
    file is cut into for them; `progress=True` shows progress bars. None changes the result.
    """
    from cs336_bpe import train_bpe

    return train_bpe(input_path, vocab_size, special_tokens, **kwargs)


def get_tokenizer(
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    special_tokens: list[str] | None = None,
):
    """A tokenizer over `vocab` and `merges`: `encode`, `encode_iterable` and `decode` as the
    assignment specifies. Compiled when built, pure Python under `CS336_PURE_PYTHON=1`."""
    from cs336_bpe import Tokenizer

    return Tokenizer(vocab, merges, special_tokens)
