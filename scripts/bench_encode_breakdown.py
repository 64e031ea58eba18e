#!/usr/bin/env python3
"""Write GPT-2's tables for scripts/bench_encode_breakdown.cpp (the C++ harness reads no JSON).

    python scripts/bench_encode_breakdown.py ../shared/fixtures TABLES

TABLES: the 256 byte ids, then one merge a line as "left right merged" in rank order, then
"special ID HEX" for <|endoftext|>; built from FIXTURES/gpt2_vocab.json and gpt2_merges.txt
exactly as Tokenizer builds its compiled encoder.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from cs336_basics.outputs.serialization import load_merges, load_vocab  # noqa: E402
from cs336_basics.rules.contract import ENDOFTEXT  # noqa: E402
from cs336_basics.tokenizer import Tokenizer  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    fixtures, out = (Path(value) for value in (argv if argv is not None else sys.argv[1:]))
    vocab = load_vocab(fixtures / "gpt2_vocab.json")
    tokenizer = Tokenizer(vocab, load_merges(fixtures / "gpt2_merges.txt"), [ENDOFTEXT], native=False)
    lines = [" ".join(str(token_id) for token_id in tokenizer._byte_ids)]
    lines += [f"{left} {right} {merged}" for (left, right), (_, merged) in tokenizer._ranked_merges()]
    lines += [f"special {token_id} {token.encode().hex()}" for token, token_id in tokenizer._special_ids.items()]
    out.write_text("\n".join(lines) + "\n", encoding="ascii")
    return 0


if __name__ == "__main__":
    sys.exit(main())
