"""What the commands share (`cs336-train-bpe`, `cs336-count-words`, `cs336-encode-dataset`,
`cs336-bpe-report`): the exit statuses, the arguments they have in common, how sizes are shown,
and how SIGINT and SIGTERM end a run ("interrupted", 130 or 143, nothing half-written)."""

from __future__ import annotations

import _thread
import argparse
import contextlib
import errno
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from ..ingest.table import known_formats
from ..rules.contract import ENDOFTEXT
from ..rules.merge_limits import MAX_LIMIT
from ..rules.pattern import TOOLS_UNICODE, UNICODE_VERSIONS, pattern_rows
from ..rules.presets import PRESETS
from ..rules.tie_break import TIE_BREAKS

EXIT_FAILED = 1
EXIT_BAD_INPUT = 2


def how_invoked() -> str:
    """The command as the user typed it, to repeat it in advice: `python path/file.py` or the script name."""
    program = sys.argv[0] if sys.argv and sys.argv[0] else "cs336-train-bpe"
    return f"python {program}" if program.endswith(".py") else Path(program).name


def broken_link_message(path: str | os.PathLike, what: str) -> str:
    """Why the symbolic link `path` leads to no file: a loop, or a target that does not exist."""
    try:
        os.stat(path)
    except OSError as error:
        if error.errno == errno.ELOOP:
            return f"the {what} {path} is a symbolic link loop (it leads back to itself); point it at a file"
    with contextlib.suppress(OSError):
        return f"the {what} {path} is a symbolic link to {os.readlink(path)}, which does not exist"
    return f"the {what} {path} is a symbolic link that leads to no file"


def human_bytes(size: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.2f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")


def add_special_tokens_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--special",
        nargs="*",
        default=[ENDOFTEXT],
        metavar="TOKEN",
        help=f"special tokens, in vocabulary order ({ENDOFTEXT}); give none to use none",
    )


def unicode_argument(text: str) -> str:
    """A value that must be Unicode text: one holding bytes that are not UTF-8 (a shell's `$'\\xff'`,
    which Python passes on as lone surrogates) is refused here, not when the run writes it out."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        try:
            shown = repr(text.encode("utf-8", "surrogateescape"))  # the bytes as given on the command line
        except UnicodeEncodeError:
            shown = repr(text)
        raise argparse.ArgumentTypeError(f"not valid UTF-8 text: {shown} (at character {error.start})") from None
    return text


def add_pattern_argument(parser: argparse.ArgumentParser) -> None:
    named = ", ".join(f"{row.name} ({row.about})" for row in pattern_rows())
    aliases = ", ".join(alias for row in pattern_rows() for alias in row.aliases)
    parser.add_argument(
        "--pattern",
        type=unicode_argument,
        default=None,
        metavar="NAME|REGEX",
        help=f"the pre-tokenizer: {named}, their aliases {aliases} (tiktoken's names), or a regex for the "
        "regex module (counted through that module, the slower path)",
    )


def limit_argument(text: str) -> int:
    """`--min-frequency` / `--max-token-length` / `--max-words`: a whole number at most MAX_LIMIT, refused here, before
    any work (a larger one would overflow the C++ loop after counting); the lower bounds are
    `merge_limits.MergeLimits`', as for the Python API."""
    try:
        value = int(text)
    except ValueError:  # not a number, or more digits than Python converts
        value = MAX_LIMIT + 1
    if value > MAX_LIMIT:
        shown = text if len(text) <= 40 else f"{text[:40]}..."
        raise argparse.ArgumentTypeError(f"expected a whole number up to 2**63 - 1, got {shown!r}")
    return value


def add_unicode_argument(parser: argparse.ArgumentParser, default: str) -> None:
    """`--unicode VERSION` (see `presets.resolve_unicode`); `default` says what it is without one."""
    parser.add_argument(
        "--unicode",
        choices=UNICODE_VERSIONS,
        default=None,
        metavar="VERSION",
        help=f"the Unicode version the pattern classes characters by: {', '.join(UNICODE_VERSIONS)} "
        f"(default: {default})",
    )


def add_rule_arguments(parser: argparse.ArgumentParser) -> None:
    """`--pattern`, `--tie-break`, `--like`, `--unicode`, `--min-frequency`, `--max-token-length`,
    `--max-words` and `--no-colon-space` (see `presets.resolve_rules` and `merge_limits.py`)."""
    add_pattern_argument(parser)
    parser.add_argument(
        "--tie-break",
        choices=TIE_BREAKS,
        default=None,
        help="which pair a merge takes among pairs of equal count: cs336 (default: the greatest bytes), "
        "smallest-id (rustbpe, nanochat), hf (HF tokenizers)",
    )
    parser.add_argument(
        "--like",
        choices=list(PRESETS),
        default=None,
        help="train exactly as another tool does: sets the pattern, the tie-break and the vocabulary's ids; "
        "rustbpe (its train_from_iterator; --pattern as its pattern=), nanochat (RustBPETokenizer, its nine "
        "special tokens), hf (HF tokenizers' BpeTrainer.train_from_iterator on the text split on the special "
        "tokens), hf-raw (the same on raw documents: special tokens counted as text), hf-files (HF's "
        "tokenizer.train(files), as gigabpe: one text file read by lines), cs336 (default)",
    )
    add_unicode_argument(
        parser,
        f"--like's, {TOOLS_UNICODE} for rustbpe, nanochat and hf*, as the tools do; else the --counts' version; "
        "else the installed regex's",
    )
    parser.add_argument(
        "--min-frequency",
        type=limit_argument,
        default=None,
        metavar="N",
        help="stop at the first best pair that counts fewer than N, as HF's BpeTrainer(min_frequency=N) "
        "(any preset; docs/REFERENCES.md)",
    )
    parser.add_argument(
        "--max-token-length",
        type=limit_argument,
        default=None,
        metavar="N",
        help="never merge a pair into a token of N bytes or more (two-byte tokens excepted), as HF's "
        "BpeTrainer(max_token_length=N) (any preset; docs/REFERENCES.md)",
    )
    parser.add_argument(
        "--max-words",
        type=limit_argument,
        default=None,
        metavar="N",
        help="never merge a pair into a token of more than N words, the non-empty pieces between spaces "
        "(as SuperBPE's second stage, N=4; any preset; docs/RULES.md)",
    )
    parser.add_argument(
        "--no-colon-space",
        action="store_true",
        default=None,
        help='never merge a pair into a token that holds ": " (as SuperBPE\'s second stage; any preset)',
    )


def add_format_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format",
        choices=known_formats(),
        default=None,
        help="what the data files hold (default: detected; .gz .bz2 .xz .zst are decompressed as read)",
    )
    parser.add_argument(
        "--text-field", default="text", metavar="NAME", help="the JSON-lines field or Parquet column of the text (text)"
    )
    parser.add_argument(
        "--skip-bad-records",
        action="store_true",
        help="leave out JSON-lines records that are not JSON or lack the text field, and report how many "
        "(default: stop at the first, naming file:line)",
    )


def cluster_spec_argument(text: str) -> str:
    """`--cluster`'s value; an empty one is refused (it would silently mean "no cluster")."""
    if not text.strip():
        raise argparse.ArgumentTypeError("give local, local:N or a scheduler address like tcp://host:8786")
    return text


def output_path_argument(text: str) -> Path:
    """An output path; an empty one is refused (it would silently mean the current directory)."""
    if not text:
        raise argparse.ArgumentTypeError("expected a path, got an empty one (it would mean the current directory)")
    return Path(text)


def seconds_argument(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return seconds


def add_cluster_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cluster",
        type=cluster_spec_argument,
        metavar="SPEC",
        help="count on Dask: local, local:N or tcp://host:8786",
    )
    parser.add_argument(
        "--cluster-timeout",
        type=seconds_argument,
        default=None,
        metavar="SECONDS",
        help="how long to try reaching the --cluster scheduler (30)",
    )


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived; `signum` says which."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _inside(frame: FrameType | None, code: object) -> bool:
    """Whether `frame` runs `code` or is called from it."""
    while frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back
    return False


class InterruptHandling:
    """While active, SIGINT and SIGTERM raise `Interrupted` in the main thread, and are remembered.
    Raised where Python ignores an exception (a finalizer: `__del__`, a weakref callback, a generator
    the garbage collector closes), the signal is sent to the main thread again from another thread, so
    the run stops where it runs or waits (a Dask client waiting for its counting tasks would have
    waited for the whole count), and the driver calls `check()` between phases besides. A second
    signal ends the process at once.

    Once the run's output is in place (`output_in_place`, called while the signals are held back
    around the final rename) the run has succeeded: a signal is then only noted (`late`, see
    `late_note`), so that no run reports "interrupted" with its new output already written."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.received: int | None = None
        self.late: int | None = None
        self._in_place = False
        self._previous: dict[int, object] = {}
        self._previous_hook: Callable[[Any], object] | None = None
        self._raise_again = False  # a finalizer swallowed the interrupt: raise it when its signal comes back
        self._in_flight = 0  # signals sent again and not yet taken by the handler
        self._count_lock = threading.RLock()  # the handler may run again inside itself
        self._again = threading.Event()
        self._sender: threading.Thread | None = None
        self._closing = False

    def __enter__(self) -> InterruptHandling:
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
            self._previous_hook = sys.unraisablehook
            sys.unraisablehook = self._unraisable
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._closing = True  # a signal sent again from now on is taken, not raised
        if self._sender is not None:
            self._again.set()
            self._sender.join()
        if self._previous_hook is not None:
            sys.unraisablehook = self._previous_hook
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._in_flight:  # the sender's
            with self._count_lock:
                self._in_flight -= 1
            if not self._raise_again or self._closing or self._in_place:  # raised meanwhile (`check`), or too late
                return
            if _inside(frame, self._unraisable.__code__):  # raised here it would be ignored again
                self._again.set()
                return
            self._raise_again = False
            raise Interrupted(signum)
        if self.received is not None or self.late is not None:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        if self._in_place:
            self.late = signum
            return
        self.received = signum
        raise Interrupted(signum)

    def _unraisable(self, unraisable: Any) -> None:
        """Python's report of an exception a finalizer raised: an `Interrupted` is sent again, silently,
        anything else goes to the hook there was before."""
        if not isinstance(unraisable.exc_value, Interrupted) or self._closing:
            if self._previous_hook is not None:
                self._previous_hook(unraisable)
            return
        self._raise_again = True
        if self._sender is None:
            self._sender = threading.Thread(target=self._send_again, name="interrupt again", daemon=True)
            self._sender.start()  # it waits for `_again`
        # The last call here: the sender needs the interpreter lock, which this thread keeps until the hook
        # has returned (or 5 ms more), so the handler runs where the finalizer is over.
        self._again.set()

    def _send_again(self) -> None:
        """In its own thread: the swallowed signal, sent to the main thread again (waking it if it
        waits), each time a finalizer swallows it, until the handling ends."""
        while True:
            self._again.wait()
            self._again.clear()
            if self._closing:
                return
            with self._count_lock:
                self._in_flight += 1
            signum = self.received or signal.SIGINT
            if hasattr(signal, "pthread_kill"):
                signal.pthread_kill(threading.main_thread().ident, signum)
            else:  # Windows: the handler runs at the main thread's next bytecode
                _thread.interrupt_main(signum)

    def output_in_place(self) -> None:
        """The output is written: from now on the run ends as a success, whatever signal comes."""
        self._in_place = True

    def late_note(self) -> str | None:
        """The note for a signal that came once the output was in place, or None."""
        if self.late is None:
            return None
        name = signal.Signals(self.late).name
        return f"note: {name} came after the output was in place; the run is complete"

    def check(self) -> None:
        if self.received is not None:
            self._raise_again = False  # raised here: the signal sent again is only taken
            raise Interrupted(self.received)
