#!/usr/bin/env python3
"""Encode a (large) UTF-8 text file into a NumPy array of token ids, streaming.

    python scripts/encode_dataset.py data/TinyStoriesV2-GPT4-train.txt out/tinystories_train.npy \\
        --vocab out/vocab.json --merges out/merges.txt

The special tokens are those of the training run (its `bpe_run.json` beside the vocabulary);
`--special-token` (repeatable) chooses others, `--no-special-tokens` none. A compressed input is
refused by name before any work: decompress it first.

The array is uint16 when every id fits, else uint32; load it with `numpy.load(path, mmap_mode="r")`.
The file is read in blocks and re-cut where cutting cannot change the ids (Tokenizer.split_stream),
each piece is encoded (compiled when built) and appended to a temporary `.npy` beside the output,
whose header gets the final length at the end; the temporary file then replaces OUT in one rename,
so an interrupted run never leaves a half-written array. Memory stays at a few blocks' worth.
"""

from __future__ import annotations

import argparse
import codecs
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from cs336_basics import BPEInputError  # noqa: E402
from cs336_basics._common import check_text_file  # noqa: E402
from cs336_basics.cli import InterruptHandling  # noqa: E402
from cs336_basics.serialization import check_output_dir  # noqa: E402
from cs336_basics.tokenizer import Tokenizer  # noqa: E402
from cs336_basics.trainers import peak_rss_bytes  # noqa: E402

NPY_HEADER_BYTES = 128  # room for any length; fixed, so the final header overwrites the placeholder


def npy_header(dtype: np.dtype, length: int) -> bytes:
    """A version 1.0 `.npy` header for a 1-D array, padded to NPY_HEADER_BYTES (see NEP 1)."""
    description = f"{{'descr': '{dtype.str}', 'fortran_order': False, 'shape': ({length},), }}"
    prefix = b"\x93NUMPY\x01\x00"
    size = NPY_HEADER_BYTES - len(prefix) - 2
    text = description.ljust(size - 1) + "\n"
    assert len(text) == size, "the header outgrew NPY_HEADER_BYTES"
    return prefix + size.to_bytes(2, "little") + text.encode("latin1")


def read_text(file: BinaryIO, block_bytes: int, progress: tqdm) -> Iterator[str]:
    """The file's text in blocks, decoded incrementally (a character may straddle two blocks)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0
    while True:
        block = file.read(block_bytes)
        try:
            text = decoder.decode(block, final=not block)
        except UnicodeDecodeError as error:
            raise BPEInputError(
                f"input is not valid UTF-8: invalid UTF-8 at byte offset {offset + error.start} ({error.reason})"
            ) from None
        offset += len(block)
        progress.update(len(block))
        if text:
            yield text
        if not block:
            return


def encode_file(
    tokenizer: Tokenizer, data: Path, out: Path, *, block_bytes: int, progress: bool = True
) -> tuple[int, int]:
    """Write the ids of `data` to `out` (.npy); returns (input bytes, tokens)."""
    dtype = np.dtype(np.uint16 if max(tokenizer.vocab) < 1 << 16 else np.uint32)
    handle, temporary = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    tokens = 0
    try:
        with os.fdopen(handle, "wb") as sink, data.open("rb") as source:
            sink.write(npy_header(dtype, 0))
            bar = tqdm(total=data.stat().st_size, unit="B", unit_scale=True, disable=not progress, desc="encode")
            with bar:
                for piece in tokenizer.split_stream(read_text(source, block_bytes, bar)):
                    ids = np.frombuffer(tokenizer.encode_array(piece), dtype=np.uint32)
                    ids.astype(dtype, copy=False).tofile(sink)
                    tokens += len(ids)
            sink.seek(0)
            sink.write(npy_header(dtype, tokens))
            sink.flush()
            os.fsync(sink.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # mkstemp's 0600 is meant for secrets, not datasets
        os.replace(temporary, out)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return data.stat().st_size, tokens


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path, help="UTF-8 text file to encode")
    parser.add_argument("out", type=Path, help="output .npy file")
    parser.add_argument("--vocab", type=Path, required=True, help="GPT-2 vocab.json (or vocab.pkl)")
    parser.add_argument("--merges", type=Path, required=True, help="GPT-2 merges.txt (or merges.pkl)")
    parser.add_argument(
        "--special-token",
        action="append",
        default=None,
        help="a special token (repeat for several); default: the training run's, from bpe_run.json",
    )
    parser.add_argument("--no-special-tokens", action="store_true", help="encode special tokens as plain text")
    parser.add_argument("--block-mb", type=float, default=4.0, help="read size in MB (default 4)")
    parser.add_argument("--pure", action="store_true", help="use the pure-Python encoder")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)

    if args.no_special_tokens and args.special_token:
        parser.error("--special-token and --no-special-tokens exclude each other")
    special_tokens = [] if args.no_special_tokens else args.special_token
    try:
        with InterruptHandling():
            return _encode(args, special_tokens)
    except KeyboardInterrupt as interrupt:  # SIGINT or SIGTERM: encode_file has removed the partial array
        print("interrupted", file=sys.stderr)
        return 128 + getattr(interrupt, "signum", signal.SIGINT)


def _encode(args: argparse.Namespace, special_tokens: list[str] | None) -> int:
    try:
        check_text_file(args.data, "input file")
        if args.out.suffix != ".npy":
            raise BPEInputError(f"the output should end in .npy, got {args.out}")
        check_output_dir(args.out.parent)
        tokenizer = Tokenizer.from_files(args.vocab, args.merges, special_tokens, native=False if args.pure else None)
        if not args.quiet:
            print(f"special tokens: {', '.join(tokenizer.special_tokens) or 'none'}", file=sys.stderr)
        started = time.perf_counter()
        size, tokens = encode_file(
            tokenizer, args.data, args.out, block_bytes=int(args.block_mb * 1e6), progress=not args.quiet
        )
        seconds = time.perf_counter() - started
    except BPEInputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except MemoryError:
        print(f"error: out of memory while encoding {args.data}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"error: {error.filename + ': ' if error.filename else ''}{error.strerror or error}", file=sys.stderr)
        return 1

    path = "compiled" if tokenizer.native else "pure Python"
    print(f"{args.out}: {tokens:,} tokens ({np.load(args.out, mmap_mode='r').dtype}) from {size:,} bytes")
    print(f"compression: {size / max(tokens, 1):.3f} bytes/token")
    print(f"throughput: {size / 1e6 / seconds:.2f} MB/s ({seconds:.1f} s, {path} encoder)")
    print(f"peak RSS: {peak_rss_bytes() / 2**20:.0f} MiB")  # VmHWM: this process's real peak
    return 0


if __name__ == "__main__":
    sys.exit(main())
