"""Encode a (large) UTF-8 text file into a NumPy `.npy` array of token ids, on every core.

The command `cs336-encode-dataset`; also `python -m cs336_bpe.commands.encode_cli` (installed) or
`python -m cs336_basics.commands.encode_cli` (in a checkout).

    cs336-encode-dataset data/TinyStoriesV2-GPT4-train.txt out/tinystories_train.npy --tokenizer out
    cs336-encode-dataset data/owt_train.txt out/owt_train.npy --vocab out/vocab.json --merges out/merges.txt

`--tokenizer OUT_DIR` reads a training run's output directory (its vocab.json and merges.txt, or the
pickles when those are missing); `--vocab` and `--merges` name the files instead. The special tokens
are those of the training run (its `bpe_run.json` beside the vocabulary); `--special-token`
(repeatable) chooses others, `--no-special-tokens` none. Text holding `<|endoftext|>` (or another
`<|...|>` token of the vocabulary) that is not a special token then gets a one-line note naming the
`--special-token` to pass: it is encoded as ordinary text, GPT-2's as 7 ids. A compressed input is refused by name
before any work: decompress it first.

The array is uint16 when every id fits, else uint32; load it with `numpy.load(path, mmap_mode="r")`
(numpy is needed to read it, not to write it). The compiled encoder memory-maps the file, cuts it
where cutting cannot change the ids and encodes the pieces on `--threads` threads
(Tokenizer.encode_file_to); the pure-Python one reads it in blocks. The ids go to a temporary `.npy`
beside the output, whose header gets the final length at the end; the temporary file then replaces
OUT in one rename, so an interrupted run never leaves a half-written array. Memory stays at a few
chunks' worth of ids.

Exit status: 0 done; 1 the run failed (out of memory, a file could not be read or written); 2 bad
arguments or input; 130 interrupted by SIGINT (Ctrl-C), 143 by SIGTERM (no array written; a
signal once the array is in place is only noted: the run has succeeded, exit 0).
"""

from __future__ import annotations

import argparse
import mmap
import os
import re
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ..outputs.serialization import _signals_held, check_output_dir
from ..progress import progress_bar
from ..rules.contract import ENDOFTEXT, BPEInputError, check_text_file
from ..tokenizer import Tokenizer
from ..trainers import peak_rss_bytes
from .command_line import InterruptHandling, output_path_argument

NPY_HEADER_BYTES = 128  # room for any length; fixed, so the final header overwrites the placeholder
NPY_TYPES = {"H": "u2", "I": "u4"}  # array typecode -> numpy type, byte order added from the machine's
# What --tokenizer looks for in a training output directory, in order of preference: the GPT-2 text
# files are the documented default, the pickles are what a run keeps when the text ones were removed.
TOKENIZER_FILES = (("vocab.json", "merges.txt"), ("vocab.pkl", "merges.pkl"))


def npy_header(typecode: str, length: int) -> bytes:
    """A version 1.0 `.npy` header for a 1-D array of `typecode` ints in the machine's byte order,
    padded to NPY_HEADER_BYTES (see NEP 1)."""
    order = "<" if sys.byteorder == "little" else ">"
    description = f"{{'descr': '{order}{NPY_TYPES[typecode]}', 'fortran_order': False, 'shape': ({length},), }}"
    prefix = b"\x93NUMPY\x01\x00"
    size = NPY_HEADER_BYTES - len(prefix) - 2
    text = description.ljust(size - 1) + "\n"
    assert len(text) == size, "the header outgrew NPY_HEADER_BYTES"
    return prefix + size.to_bytes(2, "little") + text.encode("latin1")


def encode_file(
    tokenizer: Tokenizer,
    data: Path,
    out: Path,
    *,
    num_threads: int | None = None,
    chunk_bytes: int | None = None,
    progress: bool = True,
    on_commit: Callable[[], object] | None = None,
) -> tuple[int, int]:
    """Write the ids of `data` to `out` (.npy, dtype from `tokenizer.id_typecode`); returns (input
    bytes, tokens). `out` appears only once complete; `on_commit` is called once it is in place,
    before a signal held back meanwhile is delivered (see `serialization.write_atomically`)."""
    typecode = tokenizer.id_typecode
    handle, temporary = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as sink:
            sink.write(npy_header(typecode, 0))
            with progress_bar(progress, data.stat().st_size, "encode", "B", unit_scale=True) as advance:
                tokens = tokenizer.encode_file_to(
                    data, sink, num_threads=num_threads, chunk_bytes=chunk_bytes, progress=advance
                )
            sink.seek(0)
            sink.write(npy_header(typecode, tokens))
            sink.flush()
            os.fsync(sink.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # mkstemp's 0600 is meant for secrets, not datasets
        with _signals_held():
            os.replace(temporary, out)
            if on_commit is not None:
                on_commit()
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return data.stat().st_size, tokens


# A token that reads like a special one: <|endoftext|>, <|im_start|>, <|fim_prefix|> ...
SPECIAL_LOOKING = re.compile(rb"<\|[^\s<>|]{1,64}\|>")


def undeclared_special_tokens(tokenizer: Tokenizer, data: Path) -> list[str]:
    """The special-looking tokens the text holds that are not special here: <|endoftext|>, and the
    vocabulary's tokens of its form (GPT-2's vocab.json lists it among ordinary tokens). Found with
    one memory-mapped search per token, each stopping at its first occurrence."""
    declared = set(tokenizer.special_tokens)
    candidates = {ENDOFTEXT.encode()} | {
        token for token in tokenizer.vocab.values() if SPECIAL_LOOKING.fullmatch(token)
    }
    candidates = {token for token in candidates if token.decode("utf-8", "replace") not in declared}
    if not candidates or data.stat().st_size == 0:
        return []
    with data.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as text:
        return sorted(token.decode() for token in candidates if text.find(token) != -1)


def undeclared_note(tokenizer: Tokenizer, tokens: list[str]) -> str:
    """One line: which special-looking tokens are encoded as ordinary text, and the flag to change it."""
    shown = ", ".join(f"{token!r} ({len(tokenizer.encode(token))} ids)" for token in tokens)
    flags = " ".join(f"--special-token '{token}'" for token in tokens)
    return (
        f"note: {shown} occurs in the text but is not a special token here, so it is encoded as ordinary "
        f"text; pass {flags} to encode it as one id (--no-special-tokens silences this note)"
    )


def tokenizer_files(directory: Path) -> tuple[Path, Path]:
    """The vocabulary and merges files of a training output directory."""
    if not directory.is_dir():
        raise BPEInputError(f"--tokenizer {directory}: not a directory (give a training run's output directory)")
    for vocab_name, merges_name in TOKENIZER_FILES:
        vocab, merges = directory / vocab_name, directory / merges_name
        if vocab.exists() or merges.exists():
            # One of a pair present: load it, so that the loader names the missing one.
            return vocab, merges
    names = " or ".join(f"{vocab_name} and {merges_name}" for vocab_name, merges_name in TOKENIZER_FILES)
    raise BPEInputError(f"--tokenizer {directory}: no {names} there; is it a training run's output directory?")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="cs336-encode-dataset", description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path, help="UTF-8 text file to encode")
    parser.add_argument("out", type=output_path_argument, help="output .npy file")
    parser.add_argument(
        "--tokenizer", type=Path, metavar="OUT_DIR", help="a training output directory (instead of --vocab/--merges)"
    )
    parser.add_argument("--vocab", type=Path, help="GPT-2 vocab.json (or vocab.pkl)")
    parser.add_argument("--merges", type=Path, help="GPT-2 merges.txt (or merges.pkl)")
    parser.add_argument(
        "--special-token",
        action="append",
        default=None,
        help="a special token (repeat for several); default: the training run's, from bpe_run.json",
    )
    parser.add_argument("--no-special-tokens", action="store_true", help="encode special tokens as plain text")
    parser.add_argument(
        "--threads", type=int, default=None, help="threads of the compiled encoder (default: every core; -1 too)"
    )
    parser.add_argument(
        "--block-mb", type=float, default=None, help="chunk (compiled) or block (pure) size in MB (default: automatic)"
    )
    parser.add_argument("--pure", action="store_true", help="use the pure-Python encoder")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)

    if args.tokenizer is not None:
        if args.vocab is not None or args.merges is not None:
            parser.error("--tokenizer excludes --vocab and --merges")
    elif args.vocab is None or args.merges is None:
        parser.error("say which tokenizer: --tokenizer OUT_DIR (a training run's output), or --vocab and --merges")
    if args.threads == 0:
        parser.error("--threads 0 is not allowed: leave it out or use -1 for every core")
    if args.no_special_tokens and args.special_token:
        parser.error("--special-token and --no-special-tokens exclude each other")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    special_tokens = [] if args.no_special_tokens else args.special_token
    try:
        with InterruptHandling() as interrupts:
            code = _encode(args, special_tokens, interrupts)
    except KeyboardInterrupt as interrupt:  # SIGINT or SIGTERM: encode_file has removed the partial array
        print("interrupted", file=sys.stderr)
        return 128 + getattr(interrupt, "signum", signal.SIGINT)
    note = interrupts.late_note()
    if note is not None:
        print(note, file=sys.stderr)
    return code


def _encode(args: argparse.Namespace, special_tokens: list[str] | None, interrupts: InterruptHandling) -> int:
    try:
        # Input and output are checked before the tokenizer is loaded: loading a large vocabulary
        # takes a while, and a typo should not wait for it.
        check_text_file(args.data, "input file")
        if args.out.suffix != ".npy":
            raise BPEInputError(f"the output should end in .npy, got {args.out}")
        check_output_dir(args.out.parent)
        vocab, merges = tokenizer_files(args.tokenizer) if args.tokenizer is not None else (args.vocab, args.merges)
        tokenizer = Tokenizer.from_files(vocab, merges, special_tokens, native=False if args.pure else None)
        if not args.quiet:
            print(f"special tokens: {', '.join(tokenizer.special_tokens) or 'none'}", file=sys.stderr)
        undeclared = [] if args.no_special_tokens else undeclared_special_tokens(tokenizer, args.data)
        if undeclared:  # shown even with -q: the ids would differ from what the user likely meant
            print(undeclared_note(tokenizer, undeclared), file=sys.stderr)
        started = time.perf_counter()
        chunk_bytes = max(1, int(args.block_mb * 1e6)) if args.block_mb else None
        size, tokens = encode_file(
            tokenizer,
            args.data,
            args.out,
            num_threads=args.threads,
            chunk_bytes=chunk_bytes,
            progress=not args.quiet,
            on_commit=interrupts.output_in_place,
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
    dtype = "uint16" if tokenizer.id_typecode == "H" else "uint32"
    print(f"{args.out}: {tokens:,} tokens ({dtype}) from {size:,} bytes")
    print(f"compression: {size / max(tokens, 1):.3f} bytes/token")
    print(f"throughput: {size / 1e6 / max(seconds, 1e-9):.2f} MB/s ({seconds:.1f} s, {path} encoder)")
    print(f"peak RSS: {peak_rss_bytes() / 2**20:.0f} MiB")  # VmHWM: this process's real peak
    return 0


if __name__ == "__main__":
    sys.exit(main())
