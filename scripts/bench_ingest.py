"""Counting speed and peak memory of every input format, side by side, on one corpus (issue 22).

    python scripts/bench_ingest.py                       # real_mix (../shared/corpus/real_mix.txt.gz)
    python scripts/bench_ingest.py --corpus some.txt.gz --threads 2 --repeats 5

The corpus is split into its documents at `<|endoftext|>` and written in each format to a scratch
directory; every measurement runs in a fresh process, and its peak memory is the process's peak
while counting (VmHWM, reset before), less its memory before. Timed: the counting phase only
(`count_words` / `count_words_from_iterator`, the documents already in memory for the list, generator
and Arrow table, pyarrow and zstandard imported), the best of `--repeats` runs (other work on the
machine only ever makes a run slower). `gzip -dc` and `zstd -dc` into /dev/null are timed too when
those programs exist: a compressed input cannot be counted faster than it decompresses.

    python scripts/bench_ingest.py --peers --repeats 3   # whole training against gigatoken, per format

With `--peers`, instead: whole training (count + merge, `train_bpe` with `--threads` workers) against
gigatoken's `train_bpe` (RAYON_NUM_THREADS set to the same count) at `--vocab-size`, on every input that
gigatoken's trainer reads (a path to a text or Parquet file, `TextFileSource` for .gz/.zst,
`JsonlFileSource`, `ParquetFileSource`; it takes no Python iterator). Each run is a fresh process, ours
and gigatoken's alternating, best of `--repeats`; peak RSS is the whole process's. The merges are then
compared: ours across formats, gigatoken's across formats, and ours against gigatoken's (it breaks ties
its own way: the first difference is checked to be a tie). gigatoken is imported only with `--peers`;
without it the comparison is skipped with a note.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import pickle
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SPECIAL = "<|endoftext|>"
KINDS = ["plain file", "list of str", "generator of str", "pyarrow table", "parquet (snappy)", "jsonl", ".gz", ".zst"]
# The inputs gigatoken's train_bpe reads (0.10: bytes, a path, or a Text/Jsonl/ParquetFileSource).
PEER_KINDS = ["plain file", ".gz", ".zst", "jsonl", ".jsonl.gz", "parquet (snappy)"]
PEER_FILES = {
    "plain file": "corpus.txt",
    ".gz": "corpus.txt.gz",
    ".zst": "corpus.txt.zst",
    "jsonl": "corpus.jsonl",
    ".jsonl.gz": "corpus.jsonl.gz",
    "parquet (snappy)": "corpus.parquet",
}


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


def prepare_jsonl(work: Path) -> None:
    """The documents as JSON lines, `{"text": ...}` per document, plain (a row of the table) and gzip
    (for `--peers`)."""
    jsonl, jsonl_gz = work / PEER_FILES["jsonl"], work / PEER_FILES[".jsonl.gz"]
    if not jsonl.exists():
        documents = (work / "corpus.txt").read_text(encoding="utf-8").split(SPECIAL)
        lines = "".join(json.dumps({"text": document}, ensure_ascii=False) + "\n" for document in documents)
        jsonl.write_bytes(lines.encode("utf-8"))
    if not jsonl_gz.exists():
        jsonl_gz.write_bytes(gzip.compress(jsonl.read_bytes(), compresslevel=6))


def memory_status(field: str) -> int:
    """VmRSS (now) or VmHWM (the peak since the last reset) of this process, in bytes. Not ru_maxrss:
    Linux carries the parent's ru_maxrss over fork and exec into the child."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def reset_peak_memory() -> None:
    """Starts VmHWM again from the current RSS (Linux 4.0+), so the peak is the counting's own."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


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
    elif kind == "parquet (snappy)":
        import pyarrow.parquet  # noqa: F401  (a one-time import, not part of counting)
    elif kind == ".zst":
        import zstandard  # noqa: F401
    reset_peak_memory()
    before = memory_status("VmRSS")
    started = time.perf_counter()
    if source is not None:
        counts = count_words_from_iterator(source, [SPECIAL], num_workers=threads)
    else:
        named = {"plain file": plain, "parquet (snappy)": work / "corpus.parquet", "jsonl": work / "corpus.jsonl"}
        path = named.get(kind) or work / f"corpus.txt{kind}"
        counts = count_words(path, [SPECIAL], num_workers=threads)
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "rss_before": before, "peak_rss": memory_status("VmHWM"), "words": len(counts)}


def run_isolated(kind: str, work: Path, threads: int) -> dict[str, float]:
    output = subprocess.run(
        [sys.executable, __file__, "--one", kind, "--work", str(work), "--threads", str(threads)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def train_one(kind: str, trainer: str, work: Path, threads: int, vocab_size: int, save: Path | None) -> dict:
    """One whole training (count + merge) in this process: seconds and the process's peak memory."""
    path = work / PEER_FILES[kind]
    started = time.perf_counter()
    if trainer == "gigatoken":
        import gigatoken

        if kind == "plain file":
            source: object = path  # memory-mapped, split at the separator
        elif kind in (".gz", ".zst"):
            source = gigatoken.TextFileSource([path], separator=SPECIAL)  # compression from the extension
        elif kind in ("jsonl", ".jsonl.gz"):
            source = gigatoken.JsonlFileSource([path], field="text")
        else:
            source = gigatoken.ParquetFileSource([path], column="text")
        vocab, merges = gigatoken.train_bpe(source, vocab_size, [SPECIAL])
    else:
        from cs336_bpe import train_bpe

        vocab, merges = train_bpe(path, vocab_size, [SPECIAL], num_workers=threads)
    seconds = time.perf_counter() - started
    peak = memory_status("VmHWM")
    if save is not None:
        save.write_bytes(pickle.dumps([(bytes(a), bytes(b)) for a, b in merges]))
    return {"seconds": seconds, "peak_rss": peak, "vocab": len(vocab), "merges": len(merges)}


def run_training(kind: str, trainer: str, work: Path, threads: int, vocab_size: int, save: Path | None) -> dict:
    command = [sys.executable, __file__, "--train-one", kind, "--trainer", trainer, "--work", str(work)]
    command += ["--threads", str(threads), "--vocab-size", str(vocab_size)]
    if save is not None:
        command += ["--save-merges", str(save)]
    environment = dict(os.environ, RAYON_NUM_THREADS=str(threads))  # gigatoken's pool, else every core
    output = subprocess.run(command, check=True, capture_output=True, text=True, env=environment).stdout
    # gigatoken prints progress on stdout; the result is the line that starts with RESULT.
    line = next(line for line in reversed(output.splitlines()) if line.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def pair_count(words: dict[bytes, int], merges: list[tuple[bytes, bytes]], pair: tuple[bytes, bytes]) -> int:
    """How often `pair` occurs once `merges` are applied to the counted words (the words holding it only)."""
    joined, total = pair[0] + pair[1], 0
    for word, count in words.items():
        if joined not in word:
            continue
        parts = [bytes([byte]) for byte in word]
        for first, second in merges:
            if first not in parts:
                continue
            merged, index = [], 0
            while index < len(parts):
                if index + 1 < len(parts) and parts[index] == first and parts[index + 1] == second:
                    merged.append(first + second)
                    index += 2
                else:
                    merged.append(parts[index])
                    index += 1
            parts = merged
        total += count * sum(1 for left, right in zip(parts, parts[1:]) if (left, right) == pair)
    return total


def load_merges(work: Path) -> dict[tuple[str, str], list[tuple[bytes, bytes]]]:
    return {
        (trainer, kind): pickle.loads((work / f"merges-{trainer}-{PEER_KINDS.index(kind)}.pkl").read_bytes())
        for trainer in ("ours", "gigatoken")
        for kind in PEER_KINDS
    }


def compare_merges(work: Path, threads: int) -> None:
    """Ours across formats, gigatoken's across formats, and ours against gigatoken's."""
    loaded = load_merges(work)
    for trainer in ("ours", "gigatoken"):
        reference = loaded[(trainer, "plain file")]
        differ = [kind for kind in PEER_KINDS if loaded[(trainer, kind)] != reference]
        print(
            f"merges   {trainer}: every format equals the plain file"
            if not differ
            else f"merges   {trainer}: DIFFER from its plain file for {', '.join(differ)} (not the same training)"
        )
    ours, theirs = loaded[("ours", "plain file")], loaded[("gigatoken", "plain file")]
    first = next((index for index, (a, b) in enumerate(zip(ours, theirs)) if a != b), None)
    if first is None and len(ours) == len(theirs):
        print(f"merges   ours == gigatoken's ({len(ours)} merges)")
        return
    if first is None:
        print(f"merges   ours and gigatoken's agree on {min(len(ours), len(theirs))} merges, then differ in length")
        return
    from cs336_bpe import count_words

    words = count_words(work / "corpus.txt", [SPECIAL], num_workers=threads).counts
    words = {word if isinstance(word, bytes) else word.encode("utf-8"): count for word, count in words.items()}
    before = ours[:first]
    ours_count, theirs_count = pair_count(words, before, ours[first]), pair_count(words, before, theirs[first])
    verdict = "a tie, broken differently" if ours_count == theirs_count else "NOT a tie"
    print(
        f"merges   ours and gigatoken's first differ at merge {first}: ours {ours[first]} ({ours_count}), "
        f"gigatoken {theirs[first]} ({theirs_count}): {verdict}; {len(set(ours) & set(theirs))} of "
        f"{len(ours)} merges shared. CS336 takes the lexicographically greatest pair; gigatoken's tie_breaking "
        "options ('huggingface' default, 'raw_token_ids', 'assembled_bytes') all take a smallest one"
    )


def peers(args: argparse.Namespace, work: Path) -> None:
    """Whole training, ours against gigatoken, on every input gigatoken's trainer reads."""
    try:
        import gigatoken  # noqa: F401  (only whether it imports; the runs import it in their own processes)
    except ImportError as error:
        print(f"gigatoken cannot be imported ({error}; pip install gigatoken): skipping the side-by-side training")
        return
    prepare_jsonl(work)
    size = (work / "corpus.txt").stat().st_size
    print(f"corpus   {args.corpus.name}: {size / 1e6:.1f} MB of text, documents split at {SPECIAL}")
    print(
        f"cpu      {cpu_model()} ({os.cpu_count()} cores); {args.threads} threads each; vocab {args.vocab_size}; "
        f"best of {args.repeats}, ours and gigatoken alternating, each run a fresh process"
    )
    print(
        f"command  python scripts/bench_ingest.py --peers --threads {args.threads} --repeats {args.repeats} "
        f"--vocab-size {args.vocab_size}"
    )
    runs: dict[tuple[str, str], list[dict]] = {}
    for repeat in range(args.repeats):
        for kind in PEER_KINDS:
            order = ("ours", "gigatoken") if (repeat + PEER_KINDS.index(kind)) % 2 == 0 else ("gigatoken", "ours")
            for trainer in order:
                save = work / f"merges-{trainer}-{PEER_KINDS.index(kind)}.pkl" if repeat == 0 else None
                runs.setdefault((trainer, kind), []).append(
                    run_training(kind, trainer, work, args.threads, args.vocab_size, save)
                )
    loaded = load_merges(work)
    # "= plain": that run's merges equal the same trainer's on the plain file (else it trained on other data).
    print(
        f"\n{'input':<18} {'ours s':>7} {'giga s':>7} {'ours/giga':>9} {'ours MB':>8} {'giga MB':>8} {'ours/giga':>9}"
        f"  {'ours = plain':>12} {'giga = plain':>12}"
    )
    for kind in PEER_KINDS:
        same = {
            trainer: "yes" if loaded[(trainer, kind)] == loaded[(trainer, "plain file")] else "NO"
            for trainer in ("ours", "gigatoken")
        }
        ours, theirs = runs[("ours", kind)], runs[("gigatoken", kind)]
        ours_s, theirs_s = min(run["seconds"] for run in ours), min(run["seconds"] for run in theirs)
        ours_mb, theirs_mb = min(run["peak_rss"] for run in ours) / 1e6, min(run["peak_rss"] for run in theirs) / 1e6
        print(
            f"{kind:<18} {ours_s:>7.2f} {theirs_s:>7.2f} {ours_s / theirs_s:>9.2f} "
            f"{ours_mb:>8.0f} {theirs_mb:>8.0f} {ours_mb / theirs_mb:>9.2f}  {same['ours']:>12} {same['gigatoken']:>12}"
        )
    print()
    compare_merges(work, args.threads)


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
    parser.add_argument(
        "--peers", action="store_true", help="whole training against gigatoken, every format it reads (slower)"
    )
    parser.add_argument("--vocab-size", type=int, default=10_000, help="for --peers")
    parser.add_argument("--one", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--train-one", choices=PEER_KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--trainer", choices=["ours", "gigatoken"], help=argparse.SUPPRESS)
    parser.add_argument("--save-merges", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure_one(args.one, args.work, args.threads)))
        return
    if args.train_one:
        result = train_one(args.train_one, args.trainer, args.work, args.threads, args.vocab_size, args.save_merges)
        print("RESULT " + json.dumps(result))
        return
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    files = prepare(args.corpus, work)
    prepare_jsonl(work)
    if args.peers:
        peers(args, work)
        if args.work is None:
            shutil.rmtree(work)
        return
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
    # peak MB: the process's peak while counting (the list, generator and table hold the documents
    # before it starts); counting MB: how much it grew while counting; vs file: that growth less the
    # plain file's (the bound: at most +64 MB).
    print(
        f"\n{'input':<20} {'count s':>8} {'MB/s':>7} {'vs file':>8} {'peak MB':>8} {'counting MB':>12} {'vs file':>8}"
    )
    for kind, result in results.items():
        print(
            f"{kind:<20} {result['seconds']:>8.3f} {size / result['seconds'] / 1e6:>7.1f} "
            f"{base['seconds'] / result['seconds']:>7.0%} {result['peak_rss'] / 1e6:>8.0f} "
            f"{result['counting_rss'] / 1e6:>+12.0f} {(result['counting_rss'] - base['counting_rss']) / 1e6:>+8.0f}"
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
