"""Swap this package's `run_train_bpe` and `get_tokenizer` into the CS336 handout's tests/adapters.py.

    python -m cs336_bpe.commands.swap_in path/to/assignment1-basics             # rewrites tests/adapters.py
    python -m cs336_bpe.commands.swap_in path/to/assignment1-basics --dry-run   # prints the diff, writes nothing

The handout's tests reach a student's code only through the functions of tests/adapters.py. The two
BPE stubs there are replaced by the functions of this package's adapters.py, which import
`cs336_bpe` inside their bodies, so no other line of the file has to change, and none does: only the
lines of the two top-level `def`s (decorators included) are rewritten; every other import, adapter,
comment and blank line keeps its bytes, and the file keeps its line endings and encoding. The file is
read as text and parsed, never imported: the handout's adapters.py imports torch at the top, and
this has to run where torch is not installed yet.

The file is the student's, so:
- A function is replaced when it is the handout's stub (a docstring, then `raise NotImplementedError`,
  `pass` or `...`) or an earlier version of ours (it imports cs336_bpe). A body of the student's own
  is replaced only with --force.
- When both are ours already nothing is written ("already swapped in", exit 0): running it twice, or
  after scripts/add_handout_tests.py did, is harmless.
- Before the first change the file as it was is copied to adapters.py.orig. A backup is never
  overwritten: if adapters.py.orig holds other bytes (the copy of an older handout, say), the file
  goes to adapters.py.orig.1, .orig.2, ..., the first that is free or already holds these bytes.
- Both are written to a temporary file in the same folder and renamed over the target, so a crash or
  a full disk leaves the old file or the new one, never half of one.
- Anything unexpected (no file, a syntax error, a missing or duplicated function) is refused before
  anything is written, with one line on stderr and exit status 1; so is what cannot be the handout's
  file: a FIFO or device (never opened to wait or read forever), a broken symbolic link, a file over
  MAX_SOURCE_BYTES, source nested too deeply for Python's parser.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import difflib
import errno
import io
import itertools
import os
import re
import shutil
import stat
import sys
import tempfile
import tokenize
from pathlib import Path


def _adapter_functions() -> dict[str, str]:
    """The source of each function of adapters.py (this package's copy of the two adapters, the file a
    student pastes from by hand), so a pasted copy and a swapped-in one are the same text."""
    # Run as `python -m cs336_basics.commands.swap_in` from a checkout, this module comes through the package's
    # alias and has no __file__ of its own; the package has one.
    here = __file__ or sys.modules[__package__].__file__
    source = (Path(here).parent.parent / "adapters.py").read_text(encoding="utf-8")
    lines = source.splitlines(keepends=True)
    return {
        node.name: "".join(lines[node.lineno - 1 : node.end_lineno])
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef)
    }


FUNCTIONS = _adapter_functions()
RUN_TRAIN_BPE = FUNCTIONS["run_train_bpe"]
GET_TOKENIZER = FUNCTIONS["get_tokenizer"]
PACKAGE = "cs336_bpe"
BACKUP_SUFFIX = ".orig"
# The handout's adapters.py is about 25 KB; a file many times larger is something else, and parsing it
# would take gigabytes.
MAX_SOURCE_BYTES = 4 << 20

# Lines as Python numbers them: \r\n, \r and \n end a line; str.splitlines would also split at form
# feeds and Unicode separators, which Python's tokenizer does not, and the ast line numbers would
# then point at the wrong lines.
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")


class SwapError(Exception):
    """Why the file is left as it is; the message is the one line the command prints."""


def adapters_path(target: Path) -> Path:
    """The adapters file for what was given: the assignment checkout, its tests/ folder, or the file."""
    if target.is_dir() and not (target / "tests" / "adapters.py").exists() and (target / "adapters.py").exists():
        return target / "adapters.py"
    return target / "tests" / "adapters.py" if target.is_dir() else target


def swap_source(text: str, *, force: bool = False, label: str = "tests/adapters.py") -> str:
    """`text` with run_train_bpe and get_tokenizer replaced by ours; `text` itself when both are ours.

    Raises SwapError, naming `label`, when the text is not a handout-like adapters file."""
    tree = _parse(text, label)
    lines = _LINE.findall(text)
    spans = []  # (first line index, end line index, name), 0-based, end exclusive
    for name, node in _find_functions(tree, label).items():
        start = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)]) - 1
        old = "".join(lines[start : node.end_lineno])
        if _normalized(old) == _normalized(FUNCTIONS[name]):
            continue
        if not force and _kind(node) == "custom":
            raise SwapError(
                f"{name} in {label} is neither the handout's stub nor ours (code of your own?); "
                "pass --force to replace it (the file is backed up first)"
            )
        if name == "run_train_bpe" and not _annotations_resolve(tree):
            raise SwapError(
                f"{label} neither imports os nor has `from __future__ import annotations`, which the "
                "annotation `str | os.PathLike` of our run_train_bpe needs; it does not look like the handout's"
            )
        spans.append((start, node.end_lineno, name))
    if not spans:
        return text
    for start, end, name in sorted(spans, reverse=True):  # from the bottom, so earlier indices hold
        newline = _line_ending(lines[start]) or _line_ending(lines[0]) or "\n"
        replacement = FUNCTIONS[name].replace("\n", newline)
        if not _line_ending(lines[end - 1]):  # the def ends the file without a final newline: keep it so
            replacement = replacement[: -len(newline)]
        lines[start:end] = [replacement]
    new_text = "".join(lines)
    _check(tree, new_text, label)
    return new_text


def swap_bytes(data: bytes, *, force: bool = False, label: str = "tests/adapters.py") -> bytes:
    """The file's bytes with our two functions swapped in, in the file's own encoding; `data` when
    nothing changes. Raises SwapError as `swap_source` does, and for bytes that are not source text."""
    encoding, text = _decode(data, label)
    new_text = swap_source(text, force=force, label=label)
    return data if new_text == text else new_text.encode(encoding)


def unified_diff(old: str, new: str, label: str) -> str:
    """A unified diff of the change, with "\\n" line ends whatever the file uses (it is for reading)."""
    before = [line.rstrip("\r\n") for line in _LINE.findall(old)]
    after = [line.rstrip("\r\n") for line in _LINE.findall(new)]
    lines = difflib.unified_diff(before, after, f"{label} (before)", f"{label} (swapped in)", lineterm="")
    return "".join(f"{line}\n" for line in lines)


def backup_path(path: Path, data: bytes) -> tuple[Path, bool]:
    """Where the file as it was (`data`) is kept, and whether that file still has to be written.

    adapters.py.orig, or the first of .orig.1, .orig.2, ... that is free or holds `data` already:
    an existing backup with other bytes is the only copy of some earlier file, so it is never replaced."""
    for index in itertools.count():
        candidate = path.with_name(f"{path.name}{BACKUP_SUFFIX}" + (f".{index}" if index else ""))
        if not candidate.exists():
            return candidate, True
        if candidate.is_file() and candidate.read_bytes() == data:
            return candidate, False
    raise AssertionError("unreachable")


def read_source(path: Path) -> bytes:
    """The bytes of the adapters file at `path`, refused (SwapError) unless it is a regular file of at
    most MAX_SOURCE_BYTES; a FIFO or device is never read (it could wait, or never end)."""
    try:
        # Not blocking: opening a FIFO for reading would wait for a writer before fstat could refuse it.
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        if path.is_symlink():
            raise SwapError(f"{path} is a symbolic link to {os.readlink(path)}, which does not exist") from None
        raise SwapError(f"{path} not found; give the assignment checkout (the folder with tests/)") from None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise SwapError(f"{path} is a symbolic link loop (it leads back to itself); point it at the file") from None
        raise SwapError(f"cannot read {path}: {error.strerror or error}") from None
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            kind = "a directory" if stat.S_ISDIR(status.st_mode) else "not a regular file (a FIFO, device or socket)"
            raise SwapError(f"{path} is {kind}; give the assignment checkout or its tests/adapters.py")
        if status.st_size > MAX_SOURCE_BYTES:
            raise SwapError(
                f"{path} is {status.st_size:,} bytes, too large for the handout's adapters.py (about 25 KB; "
                f"at most {MAX_SOURCE_BYTES >> 20} MiB here); is it the right file?"
            )
        with os.fdopen(os.dup(descriptor), "rb") as file:
            data = file.read(MAX_SOURCE_BYTES + 1)  # a file growing meanwhile stops here too
    except OSError as error:
        raise SwapError(f"cannot read {path}: {error.strerror or error}") from None
    finally:
        os.close(descriptor)
    if len(data) > MAX_SOURCE_BYTES:
        raise SwapError(f"{path} grew past {MAX_SOURCE_BYTES >> 20} MiB while it was read; is it the right file?")
    return data


def replace_file_contents(path: Path, data: bytes, mode_from: Path | None = None) -> None:
    """Write `data` to `path` through a temporary file in the same folder (os.replace is atomic only
    within one file system), with the permissions of `mode_from` rather than mkstemp's 0600."""
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        if mode_from is not None:
            shutil.copymode(mode_from, temp)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def main(argv: list[str] | None = None) -> int:
    """The command; exit status 0 swapped in (or already was), 1 refused or failed, 2 bad arguments."""
    parser = argparse.ArgumentParser(
        prog="python -m cs336_bpe.commands.swap_in",
        description="Make run_train_bpe and get_tokenizer in the assignment's tests/adapters.py call cs336_bpe.",
    )
    parser.add_argument(
        "assignment", type=Path, help="the assignment checkout (with tests/adapters.py), or the adapters file itself"
    )
    parser.add_argument("--dry-run", action="store_true", help="print the diff only; write nothing")
    parser.add_argument("--force", action="store_true", help="replace the two functions even if they hold your code")
    args = parser.parse_args(argv)

    path = adapters_path(args.assignment)
    try:
        data = read_source(path)
        encoding, text = _decode(data, str(path))
        new_text = swap_source(text, force=args.force, label=str(path))
        if new_text == text:
            # With --dry-run stdout carries the diff alone, so the note goes to stderr.
            note = sys.stderr if args.dry_run else sys.stdout
            print(f"already swapped in: {path} calls {PACKAGE}; nothing to do", file=note)
            return 0
        sys.stdout.write(unified_diff(text, new_text, str(path)))
        if args.dry_run:
            return 0
        real = path.resolve()  # through a symlink: replace the file it points to, not the link
        backup, fresh = backup_path(real, data)
        if fresh:
            replace_file_contents(backup, data, mode_from=real)
        replace_file_contents(real, new_text.encode(encoding), mode_from=real)
    except SwapError as error:
        print(f"error: {_one_line(str(error))}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"error: {path} was not changed: {_one_line(str(error))}", file=sys.stderr)
        return 1
    print(f"swapped in: run_train_bpe and get_tokenizer in {path} call {PACKAGE}; the old file is kept in {backup}")
    return 0


def _parse(text: str, label: str) -> ast.Module:
    try:
        return ast.parse(text)
    except SyntaxError as error:
        raise SwapError(f"{label} does not parse ({error.msg}, line {error.lineno}); fix it first") from None
    except ValueError as error:  # null bytes, before Python 3.12 made that a SyntaxError
        raise SwapError(f"{label} does not parse ({error})") from None
    except (RecursionError, MemoryError):  # e.g. `x = a + a + ... + a` of 200,000 terms
        raise SwapError(f"{label} does not parse: it is nested too deeply for Python's parser") from None


def _decode(data: bytes, label: str) -> tuple[str, str]:
    """(encoding, text), the encoding as Python reads the file: a BOM, a coding cookie, else UTF-8."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return encoding, data.decode(encoding)
    except (SyntaxError, UnicodeDecodeError, LookupError) as error:
        raise SwapError(f"{label} is not Python source text ({error})") from None


def _find_functions(tree: ast.Module, label: str) -> dict[str, ast.FunctionDef]:
    # Top level only: that is where the handout defines them and where its tests import them from.
    found: dict[str, ast.FunctionDef] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in FUNCTIONS:
            if node.name in found:
                raise SwapError(f"{label} defines {node.name} twice; keep one and run this again")
            if isinstance(node, ast.AsyncFunctionDef):
                raise SwapError(f"{label} defines {node.name} as async; it does not look like the handout's")
            found[node.name] = node
    missing = [name for name in FUNCTIONS if name not in found]
    if missing:
        raise SwapError(f"{label} has no top-level {' or '.join(missing)}; it does not look like the handout's")
    return found


def _kind(node: ast.FunctionDef) -> str:
    """What the function is now: "stub" (the handout's placeholder), "ours" (an earlier copy, which
    imports cs336_bpe) or "custom" (anything else: the student's code, never replaced unasked)."""
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    if all(_is_placeholder(statement) for statement in body):
        return "stub"
    for child in ast.walk(node):
        if isinstance(child, ast.ImportFrom) and (child.module or "").split(".")[0] == PACKAGE and child.level == 0:
            return "ours"
        if isinstance(child, ast.Import) and any(alias.name.split(".")[0] == PACKAGE for alias in child.names):
            return "ours"
    return "custom"


def _is_placeholder(statement: ast.stmt) -> bool:
    if isinstance(statement, ast.Pass):
        return True
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
        return statement.value.value is Ellipsis
    if isinstance(statement, ast.Raise) and statement.exc is not None:
        exc = statement.exc.func if isinstance(statement.exc, ast.Call) else statement.exc
        return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"
    return False


def _annotations_resolve(tree: ast.Module) -> bool:
    """Whether our run_train_bpe's `os.PathLike` annotation will not raise NameError when it is defined:
    annotations are lazy under `from __future__ import annotations`, else `os` must be bound."""
    for node in _module_level(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            if any(alias.name == "annotations" for alias in node.names):
                return True
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                if bound == "os" and alias.name.split(".")[0] == "os":
                    return True
    return False


def _module_level(tree: ast.Module):
    """Every node run at import, including those under `if` and `try`, not inside functions or classes."""
    pending = list(tree.body)
    while pending:
        node = pending.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.expr)):
            pending.extend(ast.iter_child_nodes(node))


def _check(old_tree: ast.Module, new_text: str, label: str) -> None:
    """The rewrite touched nothing but the two functions, and they parse back as ours.

    A guard against source the line-based splice misreads; it should never fire."""
    new_tree = _parse(new_text, label)

    def others(tree: ast.Module) -> list[str]:
        return [ast.dump(node) for node in tree.body if getattr(node, "name", None) not in FUNCTIONS]

    new_lines = _LINE.findall(new_text)
    functions = _find_functions(new_tree, label)
    swapped = all(
        _normalized("".join(new_lines[node.lineno - 1 : node.end_lineno])) == _normalized(FUNCTIONS[name])
        for name, node in functions.items()
    )
    if not swapped or others(old_tree) != others(new_tree):
        raise SwapError(f"could not rewrite {label} safely; paste the two functions in by hand")


def _normalized(source: str) -> str:
    return source.replace("\r\n", "\n").replace("\r", "\n").rstrip("\n")


def _line_ending(line: str) -> str:
    return line[len(line.rstrip("\r\n")) :]


def _one_line(message: str) -> str:
    return " ".join(message.split())


if __name__ == "__main__":
    sys.exit(main())
