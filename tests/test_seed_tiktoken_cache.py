"""cs336-seed-tiktoken (cs336_basics/commands/seed_tiktoken_cache.py): tiktoken's GPT-2 encoding from the
handout's fixtures, offline."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cs336_basics.commands import seed_tiktoken_cache
from tests.support import REPO_ROOT, require_fixture


def test_get_encoding_reads_the_seeded_cache(tmp_path: Path) -> None:
    pytest.importorskip("tiktoken")
    fixtures = require_fixture("gpt2_vocab.json").parent
    require_fixture("gpt2_merges.txt")
    cache = tmp_path / "cache"
    assert seed_tiktoken_cache.main([str(fixtures), "--cache-dir", str(cache)]) == 0
    probe = (
        "import tiktoken; "
        "print(tiktoken.get_encoding('gpt2').encode('hello world<|endoftext|>', allowed_special='all'))"
    )
    # A fresh process, so that no encoding tiktoken loaded before is reused.
    result = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "TIKTOKEN_CACHE_DIR": str(cache)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[31373, 995, 50256]"


def test_a_file_that_is_not_gpt2s_is_refused(tmp_path: Path) -> None:
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    (fixtures / "gpt2_merges.txt").write_text("Ġ t\n", encoding="utf-8")
    (fixtures / "gpt2_vocab.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ValueError, match="checksum"):
        seed_tiktoken_cache.seed(fixtures, tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_a_cache_that_cannot_be_written_fails_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    fixtures = require_fixture("gpt2_vocab.json").parent
    require_fixture("gpt2_merges.txt")
    in_the_way = tmp_path / "cache"
    in_the_way.write_text("a file where the cache directory should be\n", encoding="utf-8")
    assert seed_tiktoken_cache.main([str(fixtures), "--cache-dir", str(in_the_way)]) == 1
    assert capsys.readouterr().err.startswith(f"error: cannot write tiktoken's cache in {in_the_way}")
    assert sorted(tmp_path.iterdir()) == [in_the_way]


def test_the_old_script_runs_the_command(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "seed_tiktoken_cache.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    missing = tmp_path / "gpt2_merges.txt"
    assert result.stderr == f"error: {missing} not found: give the handout's tests/fixtures directory\n"
