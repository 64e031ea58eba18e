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
Peers (`hf-tokenizers`, `rustbpe`, `gigatoken`, `ffbpe`, `gigabpe`) run when installed (the `bench`
extra), with the GPT-2 pattern and the same vocab. ffbpe is the exact peer: with `tie_break="largest_content"`
it breaks ties as CS336 does, so its merges are checked against ours; the others break ties their own
way. Below the table each of our versions is set against each peer (how many times faster, per
round). `--rounds N` runs the whole list N times, trainer after trainer, so that a ratio compares runs
made minutes apart at most on a machine whose load varies.
Writes `results.md`, `results.json` and, when matplotlib is installed, `results.png` into --out.

`--like-peers` sets our presets beside the tools they copy, each tool under its own rules: rustbpe's
`train_from_iterator` over the documents (its GPT-4 pattern) beside `--like rustbpe`; HF tokenizers'
`BpeTrainer` (`ByteLevel(add_prefix_space=False)`, the full byte alphabet, `min_frequency=0`) over the
documents beside `--like hf`; gigabpe's `train_bpe(files)`, which copies HF's `tokenizer.train(files)`
(line by line, special tokens as text, from the characters seen), beside `--like hf-files`. The
documents are the corpus cut at `<|endoftext|>`, which the peers' times include reading and cutting.
Every run's merges (and, against HF and gigabpe, every vocabulary id) are checked against its peer's
before any time is set against another; a mismatch is printed loudly, gives no ratio and fails the run.
One of our versions (bpe_v7 unless --trainers names another):

    python scripts/benchmark.py --corpus data/real_mix.txt@10000 --like-peers --rounds 3 --out results/like

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
PEER_MODULES = {
    "hf-tokenizers": "tokenizers", "rustbpe": "rustbpe", "gigatoken": "gigatoken", "ffbpe": "ffbpe",
    "gigabpe": "gigabpe",
}
PEERS = tuple(PEER_MODULES)
# --like-peers: each peer that runs under its own rules and the preset of ours that copies it.
LIKE_PEERS = {"rustbpe": "rustbpe", "hf-tokenizers": "hf", "gigabpe": "hf-files"}
OWN_RULES = "own"  # a Run's `like` for a peer under its own rules


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
    like: str = ""  # ours: the preset; a peer: OWN_RULES under --like-peers; "" the GPT-2 default
    tokens_digest: str = ""  # the merged tokens in order: all that rustbpe's ranks tell
    vocab_digest: str = ""  # every id and its bytes

    @property
    def name(self) -> str:
        return f"{self.trainer} --like {self.like}" if self.like not in ("", OWN_RULES) else self.trainer


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


def tokens_digest(tokens: list[bytes]) -> str:
    hasher = hashlib.sha256()
    for token in tokens:
        hasher.update(len(token).to_bytes(4, "little") + token)
    return hasher.hexdigest()[:16]


def vocab_digest(vocab: dict[int, bytes]) -> str:
    hasher = hashlib.sha256()
    for token_id in sorted(vocab):
        token = vocab[token_id]
        hasher.update(token_id.to_bytes(8, "little") + len(token).to_bytes(4, "little") + token)
    return hasher.hexdigest()[:16]


def cpu_model() -> str:
    """The processor's name as the kernel reports it (Linux), else what `platform` knows."""
    import platform

    try:
        with open("/proc/cpuinfo", encoding="utf-8") as file:
            for line in file:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"



# ------------------------------------------------------------------------------------------------
# What runs inside the subprocess


def run_ours(
    trainer: str, path: Path, vocab_size: int, merge_only: Path | None, workers: int | None, like: str
) -> dict:
    from cs336_basics.trainers import load_trainer, peak_rss_bytes, train

    if merge_only is None:
        options = {} if workers is None else {"num_workers": workers}
        result = train(path, vocab_size, SPECIAL_TOKENS, trainer=trainer, like=like or None, **options)
        return {
            "seconds": result.seconds,
            "peak_rss_bytes": result.peak_rss_bytes,
            "num_words": result.num_words,
            "merges_digest": digest(result.merges),
            "tokens_digest": tokens_digest([left + right for left, right in result.merges]),
            "vocab_digest": vocab_digest(result.vocab),
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


def read_documents(path: Path) -> list[str]:
    """The corpus cut at the special token, as a user of a peer feeds it documents."""
    text = path.read_text(encoding="utf-8")
    return [document for document in text.split(SPECIAL_TOKENS[0]) if document]


def hf_model_digests(vocab: dict[str, int], merges: list) -> dict:
    """Digests of an HF-serialized model (tokens in GPT-2's byte-level characters; a merge is a pair
    or, in older files, one string `LEFT RIGHT`), comparable with ours."""
    from cs336_basics.outputs.serialization import decode_token

    pairs = [tuple(merge.split(" ") if isinstance(merge, str) else merge) for merge in merges]
    decoded = [(decode_token(left), decode_token(right)) for left, right in pairs]
    ids = {
        token_id: token.encode("utf-8") if token in SPECIAL_TOKENS else decode_token(token)
        for token, token_id in vocab.items()
    }
    return {
        "merges_digest": digest(decoded),
        "tokens_digest": tokens_digest([left + right for left, right in decoded]),
        "vocab_digest": vocab_digest(ids),
    }


def run_hf_tokenizers(path: Path, vocab_size: int, own_rules: bool) -> dict:
    """The GPT-2 run reads the file (`tokenizer.train`); under its own rules (what `--like hf`
    copies) it takes the documents and the full byte alphabet, with `min_frequency=0`."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    from cs336_basics.trainers import peak_rss_bytes

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=0,
        show_progress=False,
    )
    started = time.perf_counter()
    if own_rules:
        tokenizer.train_from_iterator(read_documents(path), trainer)
    else:
        tokenizer.train([str(path)], trainer)
    elapsed = time.perf_counter() - started
    result = {"seconds": {"total": elapsed}, "peak_rss_bytes": peak_rss_bytes()}
    if own_rules:
        model = json.loads(tokenizer.to_str())["model"]
        result.update(hf_model_digests(model["vocab"], model["merges"]))
    return result


def run_rustbpe(path: Path, vocab_size: int, own_rules: bool) -> dict:
    """The GPT-2 run feeds the file's lines; under its own rules (what `--like rustbpe` copies) it
    takes the documents with its default pattern (GPT-4's), and its ranks, which hold no special
    token, stop one short of the vocabulary size per special token."""
    import rustbpe

    from cs336_basics.rules.pattern import GPT2_SPLIT_PATTERN
    from cs336_basics.trainers import peak_rss_bytes

    def lines():
        with path.open(encoding="utf-8") as file:
            yield from file

    tokenizer = rustbpe.Tokenizer()
    started = time.perf_counter()
    if own_rules:
        tokenizer.train_from_iterator(iter(read_documents(path)), vocab_size - len(SPECIAL_TOKENS))
    else:
        tokenizer.train_from_iterator(lines(), vocab_size, pattern=GPT2_SPLIT_PATTERN)
    elapsed = time.perf_counter() - started
    result = {"seconds": {"total": elapsed}, "peak_rss_bytes": peak_rss_bytes()}
    if own_rules:
        ranked = sorted(tokenizer.get_mergeable_ranks(), key=lambda token_rank: token_rank[1])
        result["tokens_digest"] = tokens_digest([bytes(token) for token, _ in ranked[256:]])
    return result


def run_gigabpe(path: Path, vocab_size: int) -> dict:
    """gigabpe has one set of rules, HF's `tokenizer.train(files)` with the ByteLevel pre-tokenizer."""
    import gigabpe

    from cs336_basics.trainers import peak_rss_bytes

    started = time.perf_counter()
    vocab, merges = gigabpe.train_bpe(
        [str(path)], vocab_size, special_tokens=SPECIAL_TOKENS, pretokenizer="bytelevel"
    )
    elapsed = time.perf_counter() - started
    return {"seconds": {"total": elapsed}, "peak_rss_bytes": peak_rss_bytes(), **hf_model_digests(vocab, merges)}


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

    from cs336_basics.outputs.serialization import decode_token
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
    trainer, path, vocab_size, merge_only, workers, like = argv
    merge_only_path = Path(merge_only) if merge_only else None
    worker_count = int(workers) if workers else None
    if trainer == "hf-tokenizers":
        result = run_hf_tokenizers(Path(path), int(vocab_size), like == OWN_RULES)
    elif trainer == "rustbpe":
        result = run_rustbpe(Path(path), int(vocab_size), like == OWN_RULES)
    elif trainer == "gigatoken":
        result = run_gigatoken(Path(path), int(vocab_size))
    elif trainer == "ffbpe":
        result = run_ffbpe(Path(path), int(vocab_size))
    elif trainer == "gigabpe":
        result = run_gigabpe(Path(path), int(vocab_size))
    else:
        result = run_ours(trainer, Path(path), int(vocab_size), merge_only_path, worker_count, like)
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


def run_one(
    trainer: str, corpus: Corpus, timeout: float, merge_only: Path | None, workers: int | None, like: str = ""
) -> Run:
    run = Run(trainer, corpus.label, corpus.vocab_size, like=like)
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
        like,
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
    run.tokens_digest = result.get("tokens_digest", "")
    run.vocab_digest = result.get("vocab_digest", "")
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


def markdown(runs: list[Run], header: str, notes: list[str]) -> str:
    """The runs' table (every phase, peak memory, status), then `notes`."""
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
            f"| {run.corpus} | {run.vocab_size} | {run.name} | " + (f"{run.round} | " if rounds else "")
            + f"{cell(run, 'pre-tokenize')} | {cell(run, 'merge')} | {cell(run, 'total')} | {rss} | {run.status} |"
        )
    return "\n".join([*lines, "", *notes]) + "\n"


def machine() -> str:
    return f"{cpu_model()}, {os.cpu_count()} cores, Python {sys.version.split()[0]}"


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
    parser.add_argument(
        "--like-peers",
        action="store_true",
        help="rustbpe, HF and gigabpe under their own rules beside our --like runs (bpe_v7), outputs checked",
    )
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.like_peers and (args.merge_only or args.threads_table is not None):
        parser.error("--like-peers times whole runs: it takes neither --merge-only nor --threads-table")

    cache = args.cache or args.out / "cache"
    corpora = [prepare_corpus(spec, cache) for spec in args.corpus]
    if args.threads_table is not None:
        threads_table(args, corpora)
        return
    if args.like_peers:
        like_peers(args, corpora)
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
        f"Benchmark ({'merge phase only' if args.merge_only else 'end to end'}), {machine()}\n\n"
        f"Command: `python scripts/benchmark.py {' '.join(sys.argv[1:])}`"
    )
    notes = [f"- {corpus}: merges: {verdict}" for corpus, verdict in verdicts.items()]
    faster = speedups(runs)
    if faster:
        notes.extend(["", "Times faster (the peer's total seconds over ours, per round):", "", *faster])
    args.out.mkdir(parents=True, exist_ok=True)
    report = markdown(runs, header, notes)
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
        f"Threads ({trainer}, end to end), {machine()}\n\n"
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



# ------------------------------------------------------------------------------------------------
# --like-peers: our presets beside the tools they copy


@dataclass
class LikeCheck:
    """One peer against the preset that copies it on one corpus: the verdict, then the seconds."""

    corpus: str
    vocab_size: int
    ours: str
    peer: str
    verdict: str  # equal: ..., MISMATCH: ..., skipped: ..., not compared: ...
    ours_seconds: list[float] = field(default_factory=list)
    peer_seconds: list[float] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)  # the peer's seconds over ours, round by round


# What each digest covers, as a verdict names it.
DIGESTS = {"merges_digest": "merges", "tokens_digest": "merged tokens", "vocab_digest": "vocabulary ids"}


def like_plan(ours: str) -> list[tuple[str, str, str | None]]:
    """(trainer, like, why it is skipped or None) in the order a round runs them: each preset of ours
    before the peers it copies, so that every pair runs minutes apart at most. A preset none of whose
    peers is installed is skipped too: it would have nothing to be checked against."""
    plan = []
    for preset in dict.fromkeys(LIKE_PEERS.values()):
        peers = [(peer, availability(peer)) for peer, copied in LIKE_PEERS.items() if copied == preset]
        mine = availability(ours)
        if mine is None and all(reason is not None for _, reason in peers):
            missing = "; ".join(f"{peer}: {reason}" for peer, reason in peers)
            mine = f"skipped: no peer to check it against ({missing})"
        plan.append((ours, preset, mine))
        plan.extend((peer, OWN_RULES, reason) for peer, reason in peers)
    return plan


def like_checks(runs: list[Run]) -> list[LikeCheck]:
    """Each peer's outputs against our preset's, over every round, before any time is compared: the
    digests the peer reports (rustbpe's ranks give the merged tokens; HF's model the merges and every
    id) must be one and the same across all those runs. Ratios only where they are."""
    checks = []
    for corpus, vocab_size in dict.fromkeys((run.corpus, run.vocab_size) for run in runs):
        here = [run for run in runs if (run.corpus, run.vocab_size) == (corpus, vocab_size)]
        for peer, preset in LIKE_PEERS.items():
            mine = [run for run in here if run.like == preset]
            theirs = [run for run in here if run.trainer == peer and run.like == OWN_RULES]
            if not mine or not theirs:
                continue
            check = LikeCheck(corpus, vocab_size, mine[0].name, peer, "")
            failed = next((run for run in theirs + mine if run.status != "ok"), None)
            if failed is theirs[0] and failed.status.startswith("unavailable"):
                check.verdict = f"skipped: {failed.status}"
            elif failed is not None:
                check.verdict = f"not compared: {failed.name} round {failed.round}: {failed.status}"
            else:
                fields = [key for key in DIGESTS if getattr(theirs[0], key)]
                differ = [DIGESTS[key] for key in fields if len({getattr(run, key) for run in mine + theirs}) > 1]
                same = ", ".join(DIGESTS[key] for key in fields if DIGESTS[key] not in differ)
                if not differ:
                    check.verdict = f"equal: {same}"
                else:
                    check.verdict = f"MISMATCH: {', '.join(differ)} differ" + (f" ({same} equal)" if same else "")
                check.ours_seconds = [run.seconds["total"] for run in mine]
                check.peer_seconds = [run.seconds["total"] for run in theirs]
                if not check.verdict.startswith("MISMATCH"):
                    check.ratios = [
                        other.seconds["total"] / own.seconds["total"]
                        for own in mine
                        for other in theirs
                        if other.round == own.round
                    ]
            checks.append(check)
    return checks


def like_markdown(checks: list[LikeCheck]) -> list[str]:
    """The verdicts first, then the seconds side by side with the ratio where the outputs agree."""

    def seconds(values: list[float]) -> str:
        return ", ".join(f"{value:.3f}" if value < 10 else f"{value:.1f}" for value in values)

    lines = ["Checked before any time is compared (every round's output):", ""]
    lines.extend(f"- {check.corpus} @ {check.vocab_size}: {check.ours} against {check.peer}: {check.verdict}"
                 for check in checks)
    lines.extend([
        "",
        "Total seconds per round, side by side; × faster is the peer's seconds over ours, round by round:",
        "",
        "| corpus | vocab | ours | s | peer | s | outputs | × faster |",
        "|---|---:|---|---:|---|---:|---|---:|",
    ])
    for check in checks:
        outputs = check.verdict.partition(":")[0]
        faster = ", ".join(f"{ratio:.2f}" for ratio in check.ratios)
        if outputs == "MISMATCH":
            outputs, faster = "**MISMATCH**", "none: not the same output"
        lines.append(
            f"| {check.corpus} | {check.vocab_size} | {check.ours} | {seconds(check.ours_seconds)} | {check.peer} | "
            f"{seconds(check.peer_seconds)} | {outputs} | {faster} |"
        )
    return lines


def like_peers(args: argparse.Namespace, corpora: list[Corpus]) -> None:
    ours = args.trainers[0] if "--trainers" in sys.argv else "bpe_v7"
    plan = like_plan(ours)
    runs = []
    for corpus in corpora:
        for round_number in range(1, args.rounds + 1):
            for trainer, like, skipped in plan:
                run = Run(trainer, corpus.label, corpus.vocab_size, like=like, round=round_number)
                label = f" (round {round_number})" if args.rounds > 1 else ""
                if skipped is not None:
                    if round_number == 1:  # said once, not once a round
                        run.status = skipped
                        print(f"{corpus.label} @ {corpus.vocab_size}: {run.name}: {skipped}", flush=True)
                        runs.append(run)
                    continue
                print(f"{corpus.label} @ {corpus.vocab_size}: {run.name}{label} ...", end=" ", flush=True)
                run = run_one(trainer, corpus, args.timeout, None, args.workers, like)
                run.round = round_number
                print(run.status if run.status != "ok" else f"{run.seconds['total']:.3f} s", flush=True)
                runs.append(run)
    checks = like_checks(runs)
    header = (
        f"Our presets beside the tools they copy (end to end), {machine()}\n\n"
        f"Command: `python scripts/benchmark.py {' '.join(sys.argv[1:])}`"
    )
    report = markdown(runs, header, like_markdown(checks))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "like_peers.md").write_text(report)
    (args.out / "like_peers.json").write_text(
        json.dumps({"cpu": machine(), "checks": [asdict(check) for check in checks],
                    "runs": [asdict(run) for run in runs]}, indent=2)
    )
    print(report)
    print(f"wrote {args.out / 'like_peers.md'}, like_peers.json")
    mismatched = [check for check in checks if check.verdict.startswith("MISMATCH")]
    if mismatched:
        sys.exit("\n".join(f"{check.ours} against {check.peer} on {check.corpus}: {check.verdict}"
                            for check in mismatched))


if __name__ == "__main__":
    main()
