"""bpe_v7 — unlike bpe_v6: pre-tokenization and counting are C++ threads (OpenMP), not Python.

With the merge loop native (v6), nearly all the time is pre-tokenization: the `regex` package
manages a few MB/s per core, and v3's worker processes add pickling of their counters. v7 memory-maps
the file, cuts it into chunks at special tokens (or whitespace that splits no pre-token), and lets
OpenMP threads run a hand-written GPT-2 pre-tokenizer (`cpp/scan/pretokenize.hpp`, its Unicode classes
generated from the `regex` package) and count words into per-thread tables (from eight threads on
after one table of words they share) that are merged at the end. The word counts never become Python
objects: they go straight to the C++ merge loop, which v7 runs on the same threads: a merge that
touches many words has them rewritten by every thread, and its count changes applied side by side
(`cpp/merge/bpe_merge.cpp`; bpe_v6 runs the loop on one thread).
Without OpenMP in the build it runs the same code on one thread, and says so once. Another pattern
than GPT-2's is counted as bpe_v3 counts it (`regex`, worker processes), and merged here.
"""

from __future__ import annotations

import os
import sys
import warnings
from os import PathLike

from . import bpe_v3
from .native import _count_cpp, _merge_cpp
from .native.backend import effective_num_threads, openmp_enabled
from .phases import DEFAULT_MERGE_RULES, DEFAULT_OPTIONS, Advance, CountParallelism, MergeRules, ignore_progress
from .rules.contract import Merges, WordCountDict, check_input_file
from .rules.pattern import Pattern, native_pattern_names, pattern_label, resolve_pattern

__all__ = ["merge", "pretokenize_and_count"]

_warned_single_thread = False


def _warn_once_without_openmp() -> None:
    global _warned_single_thread
    if not openmp_enabled() and not _warned_single_thread:
        _warned_single_thread = True
        warnings.warn(
            "cs336_basics was built without OpenMP: bpe_v7 counts on one thread "
            "(reinstall with a compiler that supports -fopenmp for parallel counting)",
            RuntimeWarning,
            stacklevel=3,
        )


def pretokenize_and_count(
    input_path: str | PathLike,
    special_tokens: list[str],
    options: CountParallelism = DEFAULT_OPTIONS,
    advance: Advance = ignore_progress,
    *,
    pattern: Pattern | None = None,
) -> _count_cpp.NativeWordCounts | WordCountDict:
    """Word counts held in C++, counted on `options.num_workers` threads in chunks of about
    size / `options.num_chunks` bytes (None: automatic). A pattern the native scanner does not run
    is counted by bpe_v3's worker processes with `regex` instead, into a dict, said in one line."""
    pattern = resolve_pattern(pattern)
    if not pattern.native:
        named = pattern_label(pattern.regex)
        print(
            f"note: the pattern {named} runs through the regex module on worker processes, the slower path "
            f"(the native scanner runs {native_pattern_names()})",
            file=sys.stderr,
        )
        return bpe_v3.pretokenize_and_count(input_path, special_tokens, options, advance, pattern=pattern)
    path = check_input_file(input_path)
    _warn_once_without_openmp()
    threads = effective_num_threads(options.num_workers)
    chunk_bytes = None
    if options.num_chunks:
        chunk_bytes = max(1, -(-path.stat().st_size // options.num_chunks))
    return _count_cpp.count_file(
        os.fspath(path), special_tokens, threads, chunk_bytes, advance, pattern.scanner, unicode=pattern.unicode_version
    )


def merge(
    word_counts: _count_cpp.NativeWordCounts | WordCountDict,
    num_merges: int,
    advance: Advance = ignore_progress,
    *,
    release_words: bool = False,
    num_threads: int | None = None,
    rules: MergeRules = DEFAULT_MERGE_RULES,
) -> Merges:
    """The C++ merge loop, fed directly from the native word counts (a dict is converted first), on
    the threads they were counted on and at most `num_threads` (None: no limit, every core for a dict;
    -1, -2, ... as for counting). `release_words`: free the native counts once the loop has loaded
    them (they can do nothing after that), so that its peak memory does not hold them too.
    `rules` (`phases.MergeRules`: the tie-break, HF's limits, a base's merges) are read by the binding."""
    threads = None if num_threads is None else effective_num_threads(num_threads)
    if isinstance(word_counts, dict):
        return _merge_cpp.merge(
            word_counts,
            num_merges,
            advance,
            num_threads=effective_num_threads(threads),
            rules=rules,
        )
    return word_counts.merge(
        num_merges,
        advance,
        release_words=release_words,
        num_threads=threads,
        rules=rules,
    )
