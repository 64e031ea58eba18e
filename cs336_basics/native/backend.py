"""The one place that decides whether compiled code may load here, says why not, and how many
threads or processes a run uses.

Environment variables (any value but "", "0", "false", "no" switches a flag on):
  CS336_PURE_PYTHON        never load compiled code (and `setup.py` builds none)
  CS336_TRAINER            the trainer version the driver, the CLI and the test adapter use by default
  CS336_NO_OPENMP          build without OpenMP even when the compiler has it (read by `setup.py`)
  CS336_REQUIRE_OPENMP     fail the build instead of falling back to one thread (read by `setup.py`)
  CS336_EXPECT_COMPILED    tests: fail, instead of skipping, when compiled code is missing
  CS336_ALLOW_NO_OPENMP    tests: accept a build without OpenMP
  CS336_SCALAR_SCANNER     the native pre-tokenizer of `_count_cpp` takes its character-by-character path
                           (read when `_count_cpp` is imported; tests run it on every path anyway)
  CS336_REGEX_TIMEOUT      seconds a custom pattern (`pattern.py`) may take per MiB of text it matches, and at
                           least per call, before it is stopped as runaway backtracking (default 60; a number)

`setup.py` cannot import the package (it is not built yet), so it loads this file on its own: this
module imports nothing of the package at import time.
"""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType

PURE_PYTHON_ENV = "CS336_PURE_PYTHON"
TRAINER_ENV = "CS336_TRAINER"
NO_OPENMP_ENV = "CS336_NO_OPENMP"
REQUIRE_OPENMP_ENV = "CS336_REQUIRE_OPENMP"
EXPECT_COMPILED_ENV = "CS336_EXPECT_COMPILED"
ALLOW_NO_OPENMP_ENV = "CS336_ALLOW_NO_OPENMP"
REGEX_TIMEOUT_ENV = "CS336_REGEX_TIMEOUT"
# A sane regex matches megabytes a second in `regex`; one that needs a minute for a MiB backtracks without end.
DEFAULT_REGEX_TIMEOUT = 60.0

# The compiled modules, each a binding of the one C++ library in cpp/ (see setup.py).
NATIVE_MODULES = {
    "_merge_cy": "bpe_v5's merge loop (Cython)",
    "_merge_cpp": "bpe_v6's merge loop (C++)",
    "_count_cpp": "bpe_v7's parallel word counting (C++, OpenMP)",
    "_encode": "the tokenizer's compiled encoder (C++)",
}


def env_flag(name: str) -> bool:
    """Whether the environment variable `name` is set to something other than "", "0", "false", "no"."""
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def pure_python_forced() -> bool:
    return env_flag(PURE_PYTHON_ENV)


def chosen_trainer() -> str | None:
    """The trainer named by $CS336_TRAINER, or None."""
    return os.environ.get(TRAINER_ENV, "").strip() or None


def regex_timeout() -> float:
    """$CS336_REGEX_TIMEOUT as seconds (DEFAULT_REGEX_TIMEOUT when unset); ValueError for a value that
    is not a positive number."""
    text = os.environ.get(REGEX_TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_REGEX_TIMEOUT
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < float("inf"):
        raise ValueError(f"{REGEX_TIMEOUT_ENV} must be a positive number of seconds, got {text!r}")
    return seconds


class NativeUnavailable(ImportError):
    """Compiled code that cannot load here; the message says why and how to fix it."""


# Cython names each extension after its folder, so they are compiled as cs336_basics.<name>, while
# the package is imported as cs336_bpe when installed (beside the assignment's own cs336_basics).
# Loading under another name works (the init symbol is the same), but Cython also registers the
# module in sys.modules under its compiled name; beside a student's package that would put ours
# under their name, so the entry is removed again. No extension imports another as it loads (what
# they share is declarations and inline functions in .pxd files), so nothing else is needed.
COMPILED_UNDER = "cs336_basics.native"


def _import_compiled(name: str) -> ModuleType:
    package = __package__ or COMPILED_UNDER  # setup.py loads this file on its own, outside the package
    module = importlib.import_module(f"{package}.{name}")
    compiled_name = f"{COMPILED_UNDER}.{name}"
    if package != COMPILED_UNDER and sys.modules.get(compiled_name) is module:
        del sys.modules[compiled_name]
    return module


def load_native(name: str) -> ModuleType:
    """The compiled module `<this package>.<name>`, or NativeUnavailable saying why it cannot load."""
    if name not in NATIVE_MODULES:
        raise ValueError(f"unknown compiled module {name!r}; known: {', '.join(NATIVE_MODULES)}")
    if pure_python_forced():
        raise NativeUnavailable(f"{NATIVE_MODULES[name]} is compiled code and {PURE_PYTHON_ENV} is set")
    try:
        return _import_compiled(name)
    except ImportError as error:
        raise NativeUnavailable(
            f"{NATIVE_MODULES[name]} is not built here ({error}); install with a C++ compiler: pip install -e ."
        ) from error


def native_available(name: str) -> bool:
    try:
        load_native(name)
    except NativeUnavailable:
        return False
    return True


def openmp_enabled() -> bool:
    """Whether the native word counter was built with OpenMP (False when it cannot load at all)."""
    try:
        return bool(load_native("_count_cpp").openmp_enabled())
    except NativeUnavailable:
        return False


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def resolve_parallelism(requested: object, *, name: str = "num_workers", default: int | None = None) -> int:
    """scikit-learn's convention for a number of workers: None = `default` (every usable core when
    not given), n > 0 = n, n < 0 = cores + 1 + n (so -1 = every core, -2 = all but one), at least 1.
    0, bools and non-integers are errors."""
    if requested is None:
        return default if default is not None else usable_cores()
    if isinstance(requested, bool) or not isinstance(requested, int):
        raise TypeError(f"{name} must be an int or None, got {requested!r}")
    if requested == 0:
        raise ValueError(f"{name}=0 is not allowed: use None or -1 for every core, or a positive count")
    if requested > 0:
        return requested
    return max(usable_cores() + 1 + requested, 1)


def effective_num_threads(requested: object = None) -> int:
    """Threads the native code really runs on: `resolve_parallelism`, with None meaning OpenMP's
    default (OMP_NUM_THREADS, else every core); 1 when the build has no OpenMP, as scikit-learn's
    `_openmp_effective_n_threads`. Bad values raise even then."""
    if not openmp_enabled():
        resolve_parallelism(requested, name="num_threads", default=1)
        return 1
    default = int(load_native("_count_cpp").omp_default_threads())
    return threads_that_fit(resolve_parallelism(requested, name="num_threads", default=default))


# What a thread costs beyond its stack (guard page, thread-local storage, the runtime's bookkeeping,
# its first allocations), and what the work itself needs before the team starts; measured under
# prlimit --as on the demo corpus, with room to spare.
_THREAD_MARGIN_BYTES = 4 << 20
_WORK_RESERVE_BYTES = 16 << 20
_DEFAULT_STACK_BYTES = 8 << 20


def _address_space_bytes() -> int | None:
    """This process's address space now (Linux: VmSize), or None where it cannot be read."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _thread_stack_bytes() -> int:
    """The stack an OpenMP thread gets: OMP_STACKSIZE (kilobytes unless it says B, K, M or G), else
    the stack limit, which is the C library's default for new threads."""
    text = os.environ.get("OMP_STACKSIZE", "").strip().upper()
    if text:
        units = {"B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
        scale = units.get(text[-1], 1 << 10)
        digits = text[:-1] if text[-1] in units else text
        if digits.isdigit():
            return int(digits) * scale
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_STACK)
    return soft if soft != resource.RLIM_INFINITY and soft > 0 else _DEFAULT_STACK_BYTES


def threads_that_fit(threads: int) -> int:
    """At most `threads`: as many as an address-space limit (`ulimit -v`, prlimit --as) leaves room
    for. OpenMP ends the whole process when it cannot create a thread ("Thread creation failed"), so
    a team that would not fit runs smaller instead; the result never depends on the thread count."""
    try:
        import resource
    except ImportError:  # not on this platform: no such limit to respect
        return threads
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:  # the usual case: nothing to read
        return threads
    used = _address_space_bytes()
    if used is None:
        return threads
    per_thread = _thread_stack_bytes() + _THREAD_MARGIN_BYTES
    # The calling thread is one of the team: a team of n starts n - 1 threads.
    return max(1, min(threads, 1 + max(0, soft - used - _WORK_RESERVE_BYTES) // per_thread))
