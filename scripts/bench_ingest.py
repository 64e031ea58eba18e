"""Counting speed and peak memory of every input format, side by side, on one corpus (issue 22).

    python scripts/bench_ingest.py                       # real_mix (../shared/corpus/real_mix.txt.gz)
    python scripts/bench_ingest.py --corpus some.txt.gz --threads 2 --repeats 5

The corpus is split into its documents at `<|endoftext|>` and written in each format to a scratch
directory; every measurement runs in a fresh process, so its peak memory (ru_maxrss) is its own.
Timed: the counting phase only (`count_words` / `count_words_from_iterator`, the documents already
in memory for the list, generator and Arrow table), the best of `--repeats` runs (other work on the
machine only ever makes a run slower). `gzip -dc` and `zstd -dc` into /dev/null are timed too when
those programs exist: a compressed input cannot be counted faster than it decompresses.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SPECIAL = "<|endoftext|>"
KINDS = ["plain file", "list of str", "generator of str", "pyarrow table", "parquet (snappy)", ".gz", ".zst"]


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def prepare(corpus: Path, work: Path) -> dict[str, Path]:
    """The corpus in every format (made once; kept in `work` between runs)."""
    work.mkdir(parents=True, exist_ok=True)
    files = {
        "plain file": work / "corpus.txt",
        "parquet (snappy)": work / "corpus.parquet",
        ".gz": work / "corpus.txt.gz",
        ".zst": work / "corpus.txt.zst",
    }
    if not files["plain file"].exists():
        opener = gzip.open if corpus.read_bytes()[:2] == b"\x1f\x8b" else open
        with opener(corpus, "rb") as source:
            files["plain file"].write_bytes(source.read())
    data = files["plain file"].read_bytes()
    if not files[".gz"].exists():
        files[".gz"].write_bytes(gzip.compress(data, compresslevel=6))  # gzip's default level
    if not files[".zst"].exists():
        import zstandard

        files[".zst"].write_bytes(zstandard.ZstdCompressor(level=3).compress(data))  # zstd's default level
    if not files["parquet (snappy)"].exists():
        import pyarrow
        import pyarrow.parquet as parquet

        documents = data.decode("utf-8").split(SPECIAL)
        # Row groups of 10,000 documents, as Hugging Face datasets' shards hold them (not one group).
        table = pyarrow.table({"text": documents})
        parquet.write_table(table, files["parquet (snappy)"], compression="snappy", row_group_size=10_000)
    return files


def measure_one(kind: str, work: Path, threads: int) -> dict[str, float]:
    """One counting run in this process: seconds, and peak memory before and after counting."""
    from cs336_bpe import count_words, count_words_from_iterator

    plain = work / "corpus.txt"
    source: object = None
    if kind in ("list of str", "generator of str"):
        documents = plain.read_text(encoding="utf-8").split(SPECIAL)
        source = documents if kind == "list of str" else (document for document in documents)
    elif kind == "pyarrow table":
        import pyarrow

        source = pyarrow.table({"text": plain.read_text(encoding="utf-8").split(SPECIAL)})
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    started = time.perf_counter()
    if source is not None:
        counts = count_words_from_iterator(source, [SPECIAL], num_threads=threads)
    else:
        named = {"plain file": plain, "parquet (snappy)": work / "corpus.parquet"}
        path = named.get(kind) or work / f"corpus.txt{kind}"
        counts = count_words(path, [SPECIAL], num_threads=threads)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"seconds": seconds, "rss_before": before, "peak_rss": peak, "words": len(counts)}


def run_isolated(kind: str, work: Path, threads: int) -> dict[str, float]:
    output = subprocess.run(
        [sys.executable, __file__, "--one", kind, "--work", str(work), "--threads", str(threads)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def time_command(command: list[str], repeats: int) -> float | None:
    if shutil.which(command[0]) is None:
        return None
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        with open(os.devnull, "wb") as sink:
            subprocess.run(command, check=True, stdout=sink)
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default_corpus = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "real_mix.txt.gz"
    parser.add_argument("--corpus", type=Path, default=default_corpus, help="text (or .gz) joined by <|endoftext|>")
    parser.add_argument("--work", type=Path, default=None, help="scratch directory (default: a temporary one)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3, help="runs per format; the best is shown")
    parser.add_argument("--one", choices=KINDS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure_one(args.one, args.work, args.threads)))
        return
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    files = prepare(args.corpus, work)
    size = files["plain file"].stat().st_size
    print(f"corpus   {args.corpus.name}: {size / 1e6:.1f} MB of text, documents split at {SPECIAL}")
    print(f"cpu      {cpu_model()} ({os.cpu_count()} cores); {args.threads} counting threads; best of {args.repeats}")
    print(f"command  python scripts/bench_ingest.py --threads {args.threads} --repeats {args.repeats}")
    results = {}
    for kind in KINDS:
        runs = [run_isolated(kind, work, args.threads) for _ in range(args.repeats)]
        results[kind] = min(runs, key=lambda run: run["seconds"])
        results[kind]["peak_rss"] = min(run["peak_rss"] for run in runs)
        results[kind]["counting_rss"] = min(run["peak_rss"] - run["rss_before"] for run in runs)
    base = results["plain file"]
    # peak MB: the process's peak (the list, generator and table hold the documents before counting);
    # counting MB: how much the peak grew while counting.
    print(f"\n{'input':<20} {'count s':>8} {'MB/s':>7} {'vs file':>8} {'peak MB':>8} {'counting MB':>12}")
    for kind, result in results.items():
        print(
            f"{kind:<20} {result['seconds']:>8.3f} {size / result['seconds'] / 1e6:>7.1f} "
            f"{base['seconds'] / result['seconds']:>7.0%} {result['peak_rss'] / 1e6:>8.0f} "
            f"{result['counting_rss'] / 1e6:>+12.0f}"
        )
    for name, command in (
        ("gzip -dc > /dev/null", ["gzip", "-dc", str(files[".gz"])]),
        ("zstd -dc > /dev/null", ["zstd", "-qdc", str(files[".zst"])]),
    ):
        seconds = time_command(command, args.repeats)
        print(f"{name:<20} {'n/a' if seconds is None else f'{seconds:8.3f}':>8}")
    if args.work is None:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
