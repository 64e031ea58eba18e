#!/usr/bin/env python3
"""One benchmark harness for every trainer version, corpus and peer.

Each (trainer, corpus) run happens in a fresh subprocess, so peak memory is the run's own and a
timeout can stop it. Our versions must agree with each other merge for merge; the table says so.

    python scripts/benchmark.py --corpus ../shared/fixtures/corpus.en@500 \\
        --corpus '../shared/corpus/real_mix.txt.gz#10M@10000' --trainers bpe_v1 bpe_v2 bpe_v3 bpe_v4 \\
        --timeout 600 --out results/foundation

A corpus is `PATH[#HEAD]@VOCAB`: a text file or a .gz (decompressed once into the cache), optionally
cut to its first HEAD bytes (K/M/G suffixes; the cut moves back to a UTF-8 character start).
`--merge-only` times the merge phase alone on word counts computed once per corpus and cached.
Peers (`hf-tokenizers`, `rustbpe`, `gigatoken`, `ffbpe`) run when installed (the `bench` extra),
with the GPT-2 pattern and the same vocab. ffbpe is the exact peer: with `tie_break="largest_content"`
it breaks ties as CS336 does, so its merges are checked against ours; the others break ties their own
way. Below the table each of our versions is set against each peer (how many times faster, per
round). `--rounds N` runs the whole list N times, trainer after trainer, so that a ratio compares runs
made minutes apart at most on a machine whose load varies.
Writes `results.md`, `results.json` and, when matplotlib is installed, `results.png` into --out.

`--threads-table` runs one trainer (bpe_v7 unless --trainers names another) end to end at 1, 2, 4,
... threads up to the cores (or the counts given), each in its own process, and prints counting and
merge seconds with the speed-up over one thread, checking that every thread count made the same merges:

    python scripts/benchmark.py --corpus data/owt_like.txt@32000 --threads-table --out results/threads
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import pickle
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SPECIAL_TOKENS = ["<|endoftext|>"]
# Each peer and the module it is imported as. Only ffbpe reports its merges (it alone breaks ties as
# CS336 does), so only its merges are checked against ours.
PEER_MODULES = {"hf-tokenizers": "tokenizers", "rustbpe": "rustbpe", "gigatoken": "gigatoken", "ffbpe": "ffbpe"}
PEERS = tuple(PEER_MODULES)


@dataclass
class Corpus:
    spec: str
    path: Path
    vocab_size: int
    label: str


@dataclass
class Run:
    trainer: str
    corpus: str
    vocab_size: int
    status: str = "ok"  # ok, timeout, error: ..., unavailable: ...
    seconds: dict[str, float] = field(default_factory=dict)
    peak_rss_bytes: int = 0
    num_words: int = 0
    merges_digest: str = ""
    round: int = 1


def parse_size(text: str) -> int:
    units = {"K": 10**3, "M": 10**6, "G": 10**9}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units else int(text)


def prepare_corpus(spec: str, cache: Path) -> Corpus:
    """Resolve `PATH[#HEAD]@VOCAB` to a plain text file (decompressed and cut once, then cached)."""
    location, _, vocab = spec.rpartition("@")
    if not location or not vocab.isdigit():
        raise SystemExit(f"corpus {spec!r} must look like PATH[#HEAD]@VOCAB")
    source, _, head = location.partition("#")
    source_path = Path(source)
    if not source_path.exists():
        raise SystemExit(f"corpus file not found: {source_path}")
    label = source_path.name.removesuffix(".gz") + (f"[:{head}]" if head else "")
    if source_path.suffix != ".gz" and not head:
        return Corpus(spec, source_path, int(vocab), label)
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / label.replace("[:", "_head").replace("]", "")
    if not target.exists():
        limit = parse_size(head) if head else None
        opener = gzip.open if source_path.suffix == ".gz" else open
        with opener(source_path, "rb") as reader:
            data = reader.read(limit) if limit else reader.read()
        if limit:
            while data and (data[-1] & 0xC0) == 0x80:  # drop a cut multi-byte character's tail bytes
                data = data[:-1]
            if data and data[-1] >= 0xC0:  # ... and its lead byte
                data = data[:-1]
        partial = target.with_suffix(".partial")
        partial.write_bytes(data)
        partial.rename(target)
    return Corpus(spec, target, int(vocab), label)


def digest(merges: list[tuple[bytes, bytes]]) -> str:
    hasher = hashlib.sha256()
    for left, right in merges:
        hasher.update(len(left).to_bytes(4, "little") + left + len(right).to_bytes(4, "little") + right)
    return hasher.hexdigest()[:16]




# ------------------------------------------------------------------------------------------------
# What runs inside the subprocess


def run_ours(trainer: str, path: Path, vocab_size: int, merge_only: Path | None, workers: int | None) -> dict:
    from cs336_basics.trainers import load_trainer, peak_rss_bytes, train

    if merge_only is None:
        options = {} if workers is None else {"num_workers": workers}
        result = train(path, vocab_size, SPECIAL_TOKENS, trainer=trainer, **options)
        return {
            "seconds": result.seconds,
            "peak_rss_bytes": result.peak_rss_bytes,
            "num_words": result.num_words,
            "merges_digest": digest(result.merges),
        }
    with merge_only.open("rb") as file:
        word_counts = pickle.load(file)
    module = load_trainer(trainer)
    started = time.perf_counter()
    merges = module.merge(word_counts, vocab_size - 256 - len(SPECIAL_TOKENS))
    elapsed = time.perf_counter() - started
    return {
        "seconds": {"merge": elapsed, "total": elapsed},
        "peak_rss_bytes": peak_rss_bytes(),
        "num_words": len(word_counts),
        "merges_digest": digest(merges),
    }


def run_hf_tokenizers(path: Path, vocab_size: int) -> dict:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    from cs336_basics.trainers import peak_rss_bytes

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    started = time.perf_counter()
    tokenizer.train([str(path)], trainer)
    elapsed = time.perf_counter() - started
    return {"seconds": {"total": elapsed}, "peak_rss_bytes": peak_rss_bytes()}


def run_rustbpe(path: Path, vocab_size: int) -> dict:
    import rustbpe

    from cs336_basics.contract import GPT2_SPLIT_PATTERN
    from cs336_basics.trainers import peak_rss_bytes

    def documents():
        with path.open(encoding="utf-8") as file:
            yield from file

    tokenizer = rustbpe.Tokenizer()
    started = time.perf_counter()
    tokenizer.train_from_iterator(documents(), vocab_size, pattern=GPT2_SPLIT_PATTERN)
    elapsed = time.perf_counter() - started
    return {"seconds": {"total": elapsed}, "peak_rss_bytes": peak_rss_bytes()}


def run_gigatoken(path: Path, vocab_size: int) -> dict:
    import gigatoken

    from cs336_basics.trainers import peak_rss_bytes

    started = time.perf_counter()
    gigatoken.train_bpe(path, vocab_size, SPECIAL_TOKENS)
    elapsed = time.perf_counter() - started
    return {"seconds": {"total": elapsed}, "peak_rss_bytes": peak_rss_bytes()}


def run_ffbpe(path: Path, vocab_size: int) -> dict:
    """ffbpe counts the file (its own threads), then merges with CS336's tie-break; its merges come
    back through its GPT-2-format merges file."""
    import tempfile

    import ffbpe

    from cs336_basics.serialization import decode_token
    from cs336_basics.trainers import peak_rss_bytes

    started = time.perf_counter()
    words = ffbpe.PreTokenizer(SPECIAL_TOKENS).get_words_from_file(str(path))
    counted = time.perf_counter()
    trainer = ffbpe.BpeTrainer(SPECIAL_TOKENS, tie_break="largest_content")
    trainer.add_words(words)
    trainer.train(vocab_size)
    model = trainer.validate_model()
    finished = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        merges_file = Path(folder) / "merges.txt"
        model.save_merges_txt(merges_file, format="gpt2")
        lines = merges_file.read_text(encoding="utf-8").splitlines()
    # Each line is `LEFT RIGHT => COUNT` in GPT-2's printable bytes.
    merges = []
    for line in lines:
        left, right = line.split(" => ")[0].split(" ")
        merges.append((decode_token(left), decode_token(right)))
    return {
        "seconds": {"pre-tokenize": counted - started, "merge": finished - counted, "total": finished - started},
        "peak_rss_bytes": peak_rss_bytes(),
        "num_words": len(words),
        "merges_digest": digest(merges),
    }


def child_main(argv: list[str]) -> None:
    trainer, path, vocab_size, merge_only, workers = argv
    merge_only_path = Path(merge_only) if merge_only else None
    worker_count = int(workers) if workers else None
    if trainer == "hf-tokenizers":
        result = run_hf_tokenizers(Path(path), int(vocab_size))
    elif trainer == "rustbpe":
        result = run_rustbpe(Path(path), int(vocab_size))
    elif trainer == "gigatoken":
        result = run_gigatoken(Path(path), int(vocab_size))
    elif trainer == "ffbpe":
        result = run_ffbpe(Path(path), int(vocab_size))
    else:
        result = run_ours(trainer, Path(path), int(vocab_size), merge_only_path, worker_count)
    print("RESULT " + json.dumps(result))


# ------------------------------------------------------------------------------------------------
# The parent: plan, run, check, report


def availability(trainer: str) -> str | None:
    """None when the trainer or peer can run here, else why not."""
    if trainer in PEERS:
        module = PEER_MODULES[trainer]
        try:
            __import__(module)
        except ImportError:
            return f"unavailable: {module} is not installed (pip install {module})"
        return None
    from cs336_basics import trainer_status

    status = trainer_status().get(trainer)
    if status is None:
        return f"unknown trainer {trainer}"
    return None if status.available else str(status)


def cached_word_counts(corpus: Corpus, cache: Path) -> Path:
    """Word counts of a corpus computed once (by the fastest trainer here) and pickled."""
    target = cache / f"{corpus.label.replace('[:', '_head').replace(']', '')}.words.pkl"
    if not target.exists():
        from cs336_basics.trainers import default_trainer, load_trainer

        name = default_trainer()
        print(f"counting words of {corpus.label} with {name} for --merge-only ...", flush=True)
        counts = load_trainer(name).pretokenize_and_count(corpus.path, SPECIAL_TOKENS)
        if not isinstance(counts, dict):
            counts = counts.to_dict()
        cache.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        with partial.open("wb") as file:
            pickle.dump(counts, file, protocol=pickle.HIGHEST_PROTOCOL)
        partial.rename(target)
    return target


def run_one(trainer: str, corpus: Corpus, timeout: float, merge_only: Path | None, workers: int | None) -> Run:
    run = Run(trainer, corpus.label, corpus.vocab_size)
    reason = availability(trainer)
    if reason is not None:
        run.status = reason
        return run
    if merge_only is not None and trainer in PEERS:
        run.status = "n/a: peers have no separate merge phase"
        return run
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        trainer,
        str(corpus.path),
        str(corpus.vocab_size),
        str(merge_only or ""),
        "" if workers is None else str(workers),
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    started = time.perf_counter()
    try:
        completed = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        run.status = f"timeout (> {timeout:.0f} s)"
        run.seconds = {"total": time.perf_counter() - started}
        return run
    lines = [line for line in completed.stdout.splitlines() if line.startswith("RESULT ")]
    if completed.returncode != 0 or not lines:
        last = (completed.stderr.strip().splitlines() or ["no output"])[-1]
        run.status = f"error: {last}"
        return run
    result = json.loads(lines[-1].removeprefix("RESULT "))
    run.seconds = result["seconds"]
    run.peak_rss_bytes = result["peak_rss_bytes"]
    run.num_words = result.get("num_words", 0)
    run.merges_digest = result.get("merges_digest", "")
    return run


def agreement(runs: list[Run]) -> dict[str, str]:
    """Per corpus and vocab size: whether every run that reports merges (our versions and the exact
    peers, in every round) made the same ones."""
    verdicts = {}
    for corpus, vocab_size in dict.fromkeys((run.corpus, run.vocab_size) for run in runs):
        compared = [run for run in runs if (run.corpus, run.vocab_size) == (corpus, vocab_size) and run.merges_digest]
        digests = {run.merges_digest for run in compared}
        names = ", ".join(dict.fromkeys(run.trainer for run in compared)) or "none"
        verdict = "all agree" if len(digests) == 1 else ("none finished" if not digests else "DISAGREE")
        verdicts[f"{corpus} @ {vocab_size}"] = f"{verdict} ({names})"
    return verdicts


def speedups(runs: list[Run]) -> list[str]:
    """Each of our versions against each peer on each corpus: the peer's total seconds over ours, one
    figure per round (a round runs every trainer once, one after another)."""
    lines = []
    for corpus, vocab_size in dict.fromkeys((run.corpus, run.vocab_size) for run in runs):
        finished = [
            run for run in runs if (run.corpus, run.vocab_size) == (corpus, vocab_size) and run.status == "ok"
        ]
        ours = [name for name in dict.fromkeys(run.trainer for run in finished) if name not in PEERS]
        peers = [name for name in dict.fromkeys(run.trainer for run in finished) if name in PEERS]
        for mine in ours:
            for peer in peers:
                ratios = [
                    theirs.seconds["total"] / own.seconds["total"]
                    for own in finished
                    if own.trainer == mine
                    for theirs in finished
                    if theirs.trainer == peer and theirs.round == own.round
                ]
                if ratios:
                    shown = ", ".join(f"{ratio:.2f}x" for ratio in ratios)
                    lines.append(f"- {corpus} @ {vocab_size}: {mine} against {peer}: {shown}")
    return lines


def markdown(runs: list[Run], verdicts: dict[str, str], header: str) -> str:
    rounds = max((run.round for run in runs), default=1) > 1
    lines = [
        header,
        "",
        "| corpus | vocab | trainer | " + ("round | " if rounds else "")
        + "pre-tokenize s | merge s | total s | peak RSS MB | status |",
        "|---|---:|---|" + ("---:|" if rounds else "") + "---:|---:|---:|---:|---|",
    ]

    def cell(run: Run, phase: str) -> str:
        value = run.seconds.get(phase)
        return "" if value is None else f"{value:.3f}" if value < 10 else f"{value:.1f}"

    for run in runs:
        rss = f"{run.peak_rss_bytes / 1e6:,.0f}" if run.peak_rss_bytes else ""
        lines.append(
            f"| {run.corpus} | {run.vocab_size} | {run.trainer} | " + (f"{run.round} | " if rounds else "")
            + f"{cell(run, 'pre-tokenize')} | {cell(run, 'merge')} | {cell(run, 'total')} | {rss} | {run.status} |"
        )
    lines.append("")
    lines.extend(f"- {corpus}: merges: {verdict}" for corpus, verdict in verdicts.items())
    faster = speedups(runs)
    if faster:
        lines.extend(["", "Times faster (the peer's total seconds over ours, per round):", "", *faster])
    return "\n".join(lines) + "\n"


def thread_counts(requested: list[int] | None) -> list[int]:
    """1, 2, 4, ... up to the cores, and the core count itself, unless given."""
    if requested:
        return requested
    cores = os.cpu_count() or 1
    counts = [1]
    while counts[-1] * 2 < cores:
        counts.append(counts[-1] * 2)
    return counts + [cores] if cores > 1 else counts


def threads_markdown(runs: list[tuple[int, Run]], header: str) -> str:
    """Phases by thread count, each against the one-thread run; merges checked against the first run."""
    lines = [
        header,
        "",
        "| corpus | vocab | threads | count s | merge s | total s | count × | merge × | total × "
        "| peak RSS MB | merges |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    baseline: dict[str, Run] = {}
    for threads, run in runs:
        first = baseline.setdefault(run.corpus, run)
        count = next((value for phase, value in run.seconds.items() if phase not in ("merge", "total")), None)
        first_count = next((value for phase, value in first.seconds.items() if phase not in ("merge", "total")), None)

        def ratio(mine: float | None, theirs: float | None) -> str:
            return f"{theirs / mine:.2f}" if mine and theirs else ""

        def seconds(value: float | None) -> str:
            return "" if value is None else f"{value:.3f}"

        same = "" if run.status != "ok" else ("same" if run.merges_digest == first.merges_digest else "DIFFERENT")
        rss = f"{run.peak_rss_bytes / 1e6:,.0f}" if run.peak_rss_bytes else ""
        merge, total = run.seconds.get("merge"), run.seconds.get("total")
        lines.append(
            f"| {run.corpus} | {run.vocab_size} | {threads} | {seconds(count)} | {seconds(merge)} | "
            f"{seconds(total)} | {ratio(count, first_count)} | {ratio(merge, first.seconds.get('merge'))} | "
            f"{ratio(total, first.seconds.get('total'))} | {rss} | {same or run.status} |"
        )
    return "\n".join(lines) + "\n"


def plot(runs: list[Run], target: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    corpora = list(dict.fromkeys(run.corpus for run in runs))
    trainers = list(dict.fromkeys(run.trainer for run in runs))
    figure, axis = plt.subplots(figsize=(max(6, 1.3 * len(trainers) * len(corpora)), 4.5))
    width = 0.8 / max(1, len(corpora))
    for index, corpus in enumerate(corpora):
        xs, ys = [], []
        for position, trainer in enumerate(trainers):
            run = next((r for r in runs if r.corpus == corpus and r.trainer == trainer and r.status == "ok"), None)
            if run is not None:
                xs.append(position + index * width)
                ys.append(run.seconds["total"])
        axis.bar(xs, ys, width=width, label=corpus)
    axis.set_xticks([position + width * (len(corpora) - 1) / 2 for position in range(len(trainers))])
    axis.set_xticklabels(trainers, rotation=20)
    axis.set_yscale("log")
    axis.set_ylabel("seconds (log scale)")
    axis.set_title("BPE training time per version")
    axis.legend()
    figure.tight_layout()
    figure.savefig(target, dpi=120)
    return True


def main() -> None:
    sys.path.insert(0, str(REPO_ROOT))  # the checkout's package, installed or not
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", action="append", required=True, help="PATH[#HEAD]@VOCAB, repeatable")
    parser.add_argument("--trainers", nargs="+", default=["bpe_v4", "bpe_v5", "bpe_v6", "bpe_v7", *PEERS])
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per run before it is stopped")
    parser.add_argument("--merge-only", action="store_true", help="time the merge phase on cached word counts")
    parser.add_argument("--workers", type=int, default=None, help="processes (v3-v6) / threads (v7)")
    parser.add_argument("--rounds", type=int, default=1, help="run every trainer this many times, alternately")
    parser.add_argument("--out", type=Path, default=Path("results"), help="folder for results.md/.json/.png")
    parser.add_argument("--cache", type=Path, default=None, help="folder for decompressed corpora (OUT/cache)")
    parser.add_argument(
        "--threads-table",
        nargs="*",
        type=int,
        default=None,
        metavar="THREADS",
        help="phases at 1, 2, 4, ... threads up to the cores (or these counts), one trainer (bpe_v7)",
    )
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")

    cache = args.cache or args.out / "cache"
    corpora = [prepare_corpus(spec, cache) for spec in args.corpus]
    if args.threads_table is not None:
        threads_table(args, corpora)
        return
    runs = []
    for corpus in corpora:
        counts = cached_word_counts(corpus, cache) if args.merge_only else None
        for round_number in range(1, args.rounds + 1):
            for trainer in args.trainers:
                label = f" (round {round_number})" if args.rounds > 1 else ""
                print(f"{corpus.label} @ {corpus.vocab_size}: {trainer}{label} ...", end=" ", flush=True)
                run = run_one(trainer, corpus, args.timeout, counts, args.workers)
                run.round = round_number
                print(run.status if run.status != "ok" else f"{run.seconds['total']:.3f} s", flush=True)
                runs.append(run)

    verdicts = agreement(runs)
    header = (
        f"Benchmark ({'merge phase only' if args.merge_only else 'end to end'}), {os.cpu_count()} cores, "
        f"Python {sys.version.split()[0]}\n\nCommand: `python scripts/benchmark.py {' '.join(sys.argv[1:])}`"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    report = markdown(runs, verdicts, header)
    (args.out / "results.md").write_text(report)
    (args.out / "results.json").write_text(json.dumps([asdict(run) for run in runs], indent=2))
    plotted = plot(runs, args.out / "results.png")
    print(report)
    extra = ", results.png" if plotted else " (matplotlib is not installed: no plot)"
    print(f"wrote {args.out / 'results.md'}, results.json{extra}")
    if any(verdict.startswith("DISAGREE") for verdict in verdicts.values()):
        sys.exit("merges disagree: see the table")


def threads_table(args: argparse.Namespace, corpora: list[Corpus]) -> None:
    trainer = args.trainers[0] if "--trainers" in sys.argv else "bpe_v7"
    runs = []
    for corpus in corpora:
        for threads in thread_counts(args.threads_table):
            print(f"{corpus.label} @ {corpus.vocab_size}: {trainer}, {threads} thread(s) ...", end=" ", flush=True)
            run = run_one(trainer, corpus, args.timeout, None, threads)
            print(run.status if run.status != "ok" else f"{run.seconds['total']:.3f} s", flush=True)
            runs.append((threads, run))
    header = (
        f"Threads ({trainer}, end to end), {os.cpu_count()} cores, Python {sys.version.split()[0]}\n\n"
        f"Command: `python scripts/benchmark.py {' '.join(sys.argv[1:])}`"
    )
    table = threads_markdown(runs, header)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "threads.md").write_text(table)
    (args.out / "threads.json").write_text(json.dumps([{"threads": t, **asdict(run)} for t, run in runs], indent=2))
    print(table)
    print(f"wrote {args.out / 'threads.md'}, threads.json")
    if any(run.merges_digest and run.merges_digest != runs[0][1].merges_digest for _, run in runs):
        sys.exit("the thread counts made different merges: see the table")


if __name__ == "__main__":
    main()
