"""scripts/benchmark.py: merges checked across our versions and the exact peer, ratios per round."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from tests.support import REPO_ROOT

spec = importlib.util.spec_from_file_location("scripts_benchmark", REPO_ROOT / "scripts" / "benchmark.py")
benchmark = importlib.util.module_from_spec(spec)
sys.modules["scripts_benchmark"] = benchmark  # its dataclasses look their module up by name
spec.loader.exec_module(benchmark)


def run(trainer: str, total: float, digest: str = "", round_number: int = 1, status: str = "ok") -> benchmark.Run:
    result = benchmark.Run(trainer, "c.txt", 300, status=status, seconds={"total": total}, merges_digest=digest)
    result.round = round_number
    return result


def test_the_exact_peer_is_checked_with_our_versions() -> None:
    runs = [run("bpe_v7", 1.0, "aa"), run("ffbpe", 9.0, "aa"), run("gigatoken", 3.0)]
    assert benchmark.agreement(runs) == {"c.txt @ 300": "all agree (bpe_v7, ffbpe)"}
    runs[1].merges_digest = "bb"
    assert benchmark.agreement(runs)["c.txt @ 300"].startswith("DISAGREE")


def test_speedups_pair_runs_of_the_same_round() -> None:
    runs = [
        run("bpe_v7", 1.0, "aa", 1),
        run("gigatoken", 3.0, "", 1),
        run("bpe_v7", 2.0, "aa", 2),
        run("gigatoken", 5.0, "", 2),
        run("rustbpe", 0.0, "", 2, status="unavailable: rustbpe is not installed"),
    ]
    assert benchmark.speedups(runs) == ["- c.txt @ 300: bpe_v7 against gigatoken: 3.00x, 2.50x"]
    assert benchmark.speedups(runs[:1]) == []


def test_rounds_end_to_end(tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("low lower lowest newer wider<|endoftext|>new newest widest\n" * 40, encoding="utf-8")
    out = tmp_path / "out"
    completed = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "benchmark.py"), "--corpus", f"{corpus}@300",
         "--trainers", "bpe_v2", "bpe_v4", "ffbpe", "--rounds", "2", "--out", str(out)],
        capture_output=True, text=True, timeout=600,
    )
    assert completed.returncode == 0, completed.stderr
    table = (out / "results.md").read_text()
    assert "| round |" in table
    assert "merges: all agree (bpe_v2, bpe_v4" in table  # ffbpe joins them where it is installed
    assert sum(line.startswith("| c.txt | 300 | bpe_v4 | 2 |") for line in table.splitlines()) == 1


def like_run(trainer: str, like: str, total: float, round_number: int = 1, **digests: str) -> benchmark.Run:
    result = benchmark.Run(trainer, "c.txt", 300, seconds={"total": total}, like=like, round=round_number)
    for key, value in digests.items():
        setattr(result, f"{key}_digest", value)
    return result


def test_like_checks_give_ratios_only_where_the_outputs_agree() -> None:
    own = benchmark.OWN_RULES
    runs = [
        like_run("bpe_v7", "rustbpe", 1.0, merges="m1", tokens="t1", vocab="v1"),
        like_run("rustbpe", own, 8.0, tokens="t1"),
        like_run("bpe_v7", "hf", 1.0, merges="m2", tokens="t2", vocab="v2"),
        like_run("hf-tokenizers", own, 20.0, merges="m2", tokens="t2", vocab="v3"),
        like_run("bpe_v7", "hf-files", 1.0, merges="m4", tokens="t4", vocab="v4"),
        like_run("gigabpe", own, 3.0, merges="m4", tokens="t4", vocab="v4"),
    ]
    rust, hf, giga = benchmark.like_checks(runs)
    assert (rust.verdict, rust.ratios) == ("equal: merged tokens", [8.0])
    assert hf.verdict == "MISMATCH: vocabulary ids differ (merges, merged tokens equal)" and hf.ratios == []
    assert (giga.verdict, giga.ratios) == ("equal: merges, merged tokens, vocabulary ids", [3.0])
    table = "\n".join(benchmark.like_markdown([rust, hf, giga]))
    assert "| **MISMATCH** | none: not the same output |" in table
    # A later round that differs is a mismatch too, and ratios pair runs of the same round.
    runs += [like_run("bpe_v7", "rustbpe", 2.0, 2, tokens="t1"), like_run("rustbpe", own, 10.0, 2, tokens="tX")]
    assert benchmark.like_checks(runs)[0].verdict.startswith("MISMATCH: merged tokens differ")


def test_like_peers_end_to_end(tmp_path: Path) -> None:
    """Whatever peers this environment has: an absent one is skipped with its reason, a present one is
    checked (HF tokenizers, a test dependency, gives --like hf's exact output); bpe_v2 is ours, as it runs
    on the pure-Python path too."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("low lower lowest newer wider<|endoftext|>new newest widest\n" * 40, encoding="utf-8")
    out = tmp_path / "out"
    completed = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "benchmark.py"), "--corpus", f"{corpus}@300",
         "--like-peers", "--trainers", "bpe_v2", "--rounds", "2", "--out", str(out)],
        capture_output=True, text=True, timeout=600,
    )
    assert completed.returncode == 0, completed.stderr
    report = (out / "like_peers.md").read_text()
    assert benchmark.cpu_model() in report
    verdicts = {line.split(": ")[1]: line for line in report.splitlines() if line.startswith("- c.txt @ 300: ")}
    for peer, preset in benchmark.LIKE_PEERS.items():
        verdict = verdicts[f"bpe_v2 --like {preset} against {peer}"]
        if benchmark.availability(peer) is not None:
            assert f"skipped: unavailable: {benchmark.PEER_MODULES[peer]} is not installed" in verdict
        else:
            assert verdict.endswith(
                "equal: merged tokens" if peer == "rustbpe" else "equal: merges, merged tokens, vocabulary ids"
            )
            row = next(line for line in report.splitlines() if f"| {peer} |" in line and "| equal |" in line)
            assert row.count(",") >= 3  # two rounds' seconds on each side and two ratios


def test_bench_superbpe_end_to_end(tmp_path: Path) -> None:
    train = tmp_path / "train.txt"
    train.write_text("the cat sat on the mat, and the dog sat on the log\n" * 60, encoding="utf-8")
    held = tmp_path / "held.txt"
    held.write_text("the dog sat on the mat, and the cat sat on the log\n" * 5, encoding="utf-8")
    completed = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "bench_superbpe.py"), str(train), str(held),
         "-v", "300", "--superbpe", "280", "--trainer", "bpe_v2"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    rows = {line.split()[0]: line for line in completed.stdout.splitlines() if line.startswith(("plain", "superbpe"))}
    assert set(rows) == {"plain", "superbpe"} and "fewer)" in rows["superbpe"]
