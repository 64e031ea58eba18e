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
