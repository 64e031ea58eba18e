"""scripts/seed_tiktoken_cache.py: tiktoken's GPT-2 encoding from the handout's fixtures, offline."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO_ROOT, require_fixture

spec = importlib.util.spec_from_file_location("seed_tiktoken_cache", REPO_ROOT / "scripts" / "seed_tiktoken_cache.py")
seed_tiktoken_cache = importlib.util.module_from_spec(spec)
spec.loader.exec_module(seed_tiktoken_cache)


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
