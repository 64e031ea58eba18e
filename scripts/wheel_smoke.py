"""Quick checks of an installed cs336-bpe (a wheel, or an sdist build), run from outside any checkout:
every compiled module loads, each compiled trainer gives bpe_v1's merges on a small mixed-script corpus,
and the compiled encoder gives the pure-Python encoder's ids. cibuildwheel runs it on every wheel it
builds (pyproject.toml), tests/test_wheel.py on a wheel built here.

    python scripts/wheel_smoke.py [--require-openmp]

Exit status 0 when every check passed; a few seconds.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

# Words in four scripts, digits, punctuation, contractions and runs of spaces: enough for a few hundred
# merges with ties, and for every scanner rule (letters, numbers, other, whitespace, 's).
LINES = [
    "The cat's 12 dogs didn't sleep; they'd run 3,456 laps!!",
    "  Indented\tline with\ttabs and trailing spaces   ",
    "Ünïcödé wörds: naïve café, Straße, 東京 and 北京, Москва 2024.",
    "Emoji 😀 and symbols €100 — (quoted) 'text' we'll keep.",
]


def corpus() -> str:
    documents = []
    for index in range(60):
        lines = [LINES[(index + shift) % len(LINES)] for shift in range(1 + index % 3)]
        documents.append("\n".join(lines) + f" #{index % 7}")
    return "<|endoftext|>".join(documents)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--require-openmp", action="store_true", help="fail when the build has no OpenMP")
    args = parser.parse_args(argv)

    import cs336_bpe
    from cs336_bpe import Tokenizer, openmp_enabled, train_bpe, trainer_status
    from cs336_bpe.trainers import COMPILED_TRAINERS

    print(f"cs336_bpe from {Path(cs336_bpe.__file__).parent}, OpenMP {'on' if openmp_enabled() else 'off'}")
    failures = []
    status = trainer_status()
    missing = {name: status[name].reason for name in COMPILED_TRAINERS if not status[name].available}
    if missing:
        failures.append(f"compiled trainers unavailable: {missing}")
    if args.require_openmp and not openmp_enabled():
        failures.append("built without OpenMP (--require-openmp)")

    specials = ["<|endoftext|>"]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "corpus.txt"
        path.write_text(corpus(), encoding="utf-8")
        oracle = train_bpe(path, 600, specials, trainer="bpe_v1")
        for name in sorted(COMPILED_TRAINERS):
            if name not in missing and train_bpe(path, 600, specials, trainer=name) != oracle:
                failures.append(f"{name} differs from bpe_v1")

    vocab, merges = oracle
    text = corpus()[:4000] + "<|endoftext|>unseen wörds 9999"
    native = Tokenizer(vocab, merges, specials, native=True).encode(text)
    pure = Tokenizer(vocab, merges, specials, native=False).encode(text)
    if native != pure:
        failures.append("the compiled encoder's ids differ from the pure-Python encoder's")
    if Tokenizer(vocab, merges, specials).decode(native) != text:
        failures.append("decode(encode(text)) != text")

    for failure in failures:
        print(f"FAIL {failure}")
    print("wheel_smoke: " + ("ok" if not failures else f"{len(failures)} failed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
