"""Starting from an existing tokenizer: more merges trained on top of a base's (docs/START_FROM.md).

A base is a byte-level BPE tokenizer: a vocabulary (id -> bytes) and its merges in rank order. Every
pre-token starts as its encoding by the base (the adjacent pair ranked first merged everywhere, again
and again, as `Tokenizer` encodes), and training goes on from there by the run's pattern and
tie-break. The base's merges and ids are kept; the new tokens take the ids after the base's.

Inside the merge loop the base's tokens take the ids a run from scratch would give them (the bytes
0-255, then 256 + k for the base's merge k), so the tie-breaks by id rank them as they rank a run's
own tokens: training 1,000 tokens and then going on to 3,000 is training 3,000 at once.

Three names, three stages: `start_from` is what the user gives (a path, or `(vocab, merges)`);
`load_base` makes it a checked `Base`; a version's merge takes the base's merges as
`MergeRules.base_merges` and replays them (`replay`, in ids: `replay_ids`, and the C++ loop's).

The oracle, bpe_v1, encodes each word (`encode_word`). bpe_v2 to bpe_v5 replay the base's merges in
order instead (`replay_ids`): each merge's parts come before it (`check_base`), so a merge can only
make pairs ranked after it, and merging every pair in rank order, whatever its count, leaves each
word as its rank-order encoding. The C++ loop encodes each word natively (`cpp/merge/bpe_merge.hpp`,
`replay`). The tests hold them all equal.
"""

from __future__ import annotations

import heapq
import json
import os
import stat
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from .contract import MAX_TOKEN_ID, BPEInputError, Merges, Vocab, check_special_tokens
from .pattern import Pattern
from .vocab_layout import RUSTBPE_LAYOUT, _merged_tokens, merge_word


@dataclass(frozen=True)
class Base:
    """A checked base tokenizer: its vocabulary and merges as it gives them, and its special tokens
    (the tokens of its vocabulary that no merge builds), each at its id in `vocab`."""

    vocab: Vocab
    merges: Merges
    special_tokens: list[str] = field(default_factory=list)
    source: str = "start_from"  # what it was read from, for messages
    # The pattern it was trained with, where it records one (a training run's bpe_run.json).
    pattern: Pattern | None = None

    @property
    def next_id(self) -> int:
        return max(self.vocab) + 1


PathName = str | os.PathLike
# What `start_from` takes (`load_base`): (vocab, merges), a path, the paths of a vocab.json and a
# merges.txt, or a checked Base.
StartFrom = Base | tuple[Vocab, Merges] | PathName | tuple[PathName, PathName]


# ---------------------------------------------------------------------------------------------
# The semantics, readably (bpe_v1)


def occurring_merges(word_counts: Iterable[tuple[bytes, int]], merges: Merges) -> Merges:
    """The merges of a base whose pair occurs in the words at some point of their encoding by it, in
    order: HF's `train(files)` going on from a base, as SuperBPE's trainer does it (docs/SUPERBPE.md),
    replays a base merge only where its pair was counted before its turn, and drops the others, the
    later ids moving down. A pair can only be made by merges ranked before its own, so a pair that
    ever stands in a word's rank-order encoding (`encode_word`) stood there before its turn."""
    ranks = merge_ranks(merges)
    seen = bytearray(len(merges))
    for word, count in word_counts:
        if count > 0 and len(word) > 1:
            _mark_pairs_met(word, ranks, seen)
    return [merge for merge, met in zip(merges, seen) if met]


def _mark_pairs_met(word: bytes, ranks: dict[tuple[bytes, bytes], int], seen: bytearray) -> None:
    """`encode_word` with a heap of the ranked pairs by (rank, position), marking in `seen` each rank
    whose pair stands in the word at some point."""
    tokens = [bytes([byte]) for byte in word]
    end = len(tokens)
    after = list(range(1, end + 1))  # the next token's position; `end`: none
    before = list(range(-1, end - 1))
    heap: list[tuple[int, int]] = []

    def push(at: int) -> None:
        if after[at] < end and (rank := ranks.get((tokens[at], tokens[after[at]]))) is not None:
            seen[rank] = 1
            heapq.heappush(heap, (rank, at))

    for at in range(end - 1):
        push(at)
    while heap:
        rank, at = heapq.heappop(heap)
        following = after[at]
        if tokens[at] is None or following >= end or ranks.get((tokens[at], tokens[following])) != rank:
            continue  # gone, or its pair changed since
        tokens[at] += tokens[following]  # type: ignore[operator]
        tokens[following] = None  # type: ignore[call-overload]
        after[at] = after[following]
        if after[at] < end:
            before[after[at]] = at
        if before[at] >= 0:
            push(before[at])
        push(at)


def merge_ranks(merges: Merges) -> dict[tuple[bytes, bytes], int]:
    return {pair: rank for rank, pair in enumerate(merges)}


def encode_word(word: bytes, ranks: dict[tuple[bytes, bytes], int]) -> list[bytes]:
    """`word`'s tokens by a base: merge every occurrence of the adjacent pair ranked first, repeat
    (`Tokenizer._bpe`, on bytes)."""
    tokens = [bytes([byte]) for byte in word]
    while len(tokens) > 1:
        ranked = [pair for pair in zip(tokens, tokens[1:]) if pair in ranks]
        if not ranked:
            break
        left, right = min(ranked, key=ranks.__getitem__)
        tokens = merge_word(tokens, (left, right), left + right)  # type: ignore[arg-type]
    return tokens


def base_tokens(base_merges: Sequence[tuple[bytes, bytes]]) -> tuple[list[bytes], Callable[[bytes], list[int]]]:
    """The token table a merge loop starts with (the 256 bytes, then each base merge's token) and
    the function that gives a word's ids in it, encoded by the base."""
    token_bytes = [bytes([byte]) for byte in range(256)] + [left + right for left, right in base_merges]
    ids = {token: token_id for token_id, token in enumerate(token_bytes)}
    ranks = merge_ranks(list(base_merges))
    return token_bytes, lambda word: [ids[token] for token in encode_word(word, ranks)]


def replay_ids(base_merges: Sequence[tuple[bytes, bytes]]) -> list[tuple[int, int]]:
    """The base's merges as pairs of ids in `base_tokens`' table: what the fast versions replay."""
    ids = {bytes([byte]): byte for byte in range(256)}
    pairs = []
    for left, right in base_merges:
        pairs.append((ids[left], ids[right]))
        ids[left + right] = 256 + len(pairs) - 1
    return pairs


# ---------------------------------------------------------------------------------------------
# Checking a base


def check_base(vocab: object, merges: object, special_tokens: Iterable[str] = (), source: str = "start_from") -> Base:
    """The base, checked: byte-level BPE whose merges build its vocabulary. Every byte is a token;
    each merge joins the bytes or tokens of earlier merges into a token no earlier merge makes, and
    its token is in the vocabulary; a token no merge builds must be a special token (`special_tokens`,
    or the ones the base records). Refused, naming `source`, otherwise."""
    if not isinstance(vocab, dict) or not all(
        isinstance(key, int) and not isinstance(key, bool) and key >= 0 and isinstance(value, bytes)
        for key, value in vocab.items()
    ):
        raise BPEInputError(f"{source}: the vocabulary must map non-negative int ids to bytes")
    largest = max(vocab, default=0)
    if largest > MAX_TOKEN_ID:
        raise BPEInputError(
            f"{source}: the token {vocab[largest]!r} is at id {largest:,}, past the largest id a tokenizer may "
            f"hold ({MAX_TOKEN_ID:,}, 2**32 - 2)"
        )
    if not isinstance(merges, (list, tuple)) or not all(
        isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(part, bytes) for part in pair) for pair in merges
    ):
        raise BPEInputError(f"{source}: the merges must be a list of (bytes, bytes) pairs")
    merges = list(merges)
    specials = check_special_tokens(list(special_tokens))
    held: dict[bytes, list[int]] = {}
    for token_id, token in sorted(vocab.items()):
        held.setdefault(token, []).append(token_id)
    missing = [byte for byte in range(256) if bytes([byte]) not in held]
    if missing:
        raise BPEInputError(
            f"{source} is not a byte-level BPE tokenizer: {len(missing)} of the 256 bytes are not tokens "
            f"(the first: {bytes([missing[0]])!r})"
        )
    built = {bytes([byte]) for byte in range(256)}
    for rank, (left, right) in enumerate(merges):
        for part in (left, right):
            if part not in built:
                raise BPEInputError(
                    f"{source}: its merges do not build its vocabulary: merge {rank} ({left!r}, {right!r}) "
                    f"joins {part!r}, which no earlier merge makes"
                )
        if left + right in built:
            raise BPEInputError(
                f"{source}: merge {rank} ({left!r}, {right!r}) makes {left + right!r}, which a byte or an "
                "earlier merge already makes"
            )
        if left + right not in held:
            raise BPEInputError(
                f"{source}: its merges do not build its vocabulary: merge {rank} makes {left + right!r}, "
                "which is not in the vocabulary"
            )
        built.add(left + right)
    special_bytes = {token.encode("utf-8") for token in specials}
    for token, ids in held.items():
        if token in built and token not in special_bytes and len(ids) > 1:
            raise BPEInputError(f"{source}: the token {token!r} is at ids {ids}; a token has one id")
        if token not in built and token not in special_bytes:
            raise BPEInputError(
                f"{source}: its merges do not build its vocabulary: the token {token!r} (id {ids[0]}) is made "
                "by no merge; if it is a special token, name it in special_tokens"
            )
    # The base's special tokens in id order: those no merge builds, and one-byte ones beside their byte.
    spelled = {token: token.encode("utf-8") for token in specials}
    own = [token for token, data in spelled.items() if data in held and (data not in built or len(held[data]) > 1)]
    own.sort(key=lambda token: max(held[spelled[token]]))
    return Base(dict(vocab), merges, own, source)


# ---------------------------------------------------------------------------------------------
# The vocabulary of a run started from a base


def extended_vocab(base: Base, special_tokens: Iterable[str], new_merges: Merges, layout: str) -> Vocab:
    """The base's vocabulary, every id kept, then the new tokens from its next id on: special tokens
    it lacks, in the order given, then one token per new merge (`layout` rustbpe: the merges first,
    as its special tokens follow the merged tokens). A run from scratch in the same layout numbers
    its tokens the same way, so the prefix property holds (docs/START_FROM.md)."""
    vocab = dict(base.vocab)
    new_specials = [token.encode("utf-8") for token in special_tokens if token not in base.special_tokens]
    merged = _merged_tokens(new_merges)
    order = [*merged, *new_specials] if layout == RUSTBPE_LAYOUT else [*new_specials, *merged]
    for token_id, token in enumerate(order, start=base.next_id):
        vocab[token_id] = token
    return vocab


def run_special_tokens(base: Base, special_tokens: Iterable[str]) -> list[str]:
    """The special tokens of a run from `base`: the base's, then those given that it lacks; text is
    split on all of them, as the base's tokenizer splits it."""
    given = list(special_tokens)
    return [*base.special_tokens, *(token for token in given if token not in base.special_tokens)]


def num_new_merges(base: Base, vocab_size: int, special_tokens: list[str]) -> int:
    """How many merges the run adds: `vocab_size` counts the base's tokens and the new special tokens."""
    new_specials = [token for token in special_tokens if token not in base.special_tokens]
    smallest = len(base.vocab) + len(new_specials)
    if vocab_size < smallest:
        raise BPEInputError(
            f"vocab_size={vocab_size} is too small to start from {base.source}: it holds {len(base.vocab):,} tokens"
            + (f" and {len(new_specials)} special token(s) are new" if new_specials else "")
            + f", so the smallest size is {smallest:,}"
        )
    last_id = base.next_id - 1 + vocab_size - len(base.vocab)
    if last_id > MAX_TOKEN_ID:
        raise BPEInputError(
            f"vocab_size={vocab_size} from {base.source}: its new tokens would take ids up to {last_id:,} (after "
            f"the base's largest, {base.next_id - 1:,}), past the largest id a tokenizer may hold "
            f"({MAX_TOKEN_ID:,}, 2**32 - 2)"
        )
    return vocab_size - smallest


# ---------------------------------------------------------------------------------------------
# Reading a base from files


def load_base(start_from: StartFrom, special_tokens: Iterable[str] = ()) -> Base:
    """A base from a `(vocab, merges)` pair, or from files: a training directory of ours, a directory
    holding GPT-2's `vocab.json` and `merges.txt` (or the pair of their paths), an HF `tokenizer.json`
    (byte-level BPE) or a tiktoken rank file. `special_tokens`: tokens of its vocabulary no merge
    builds, beside those the base records (a training run's, tokenizer.json's added tokens)."""
    specials = list(special_tokens)
    if isinstance(start_from, Base):  # checked when it was made
        return start_from
    if isinstance(start_from, tuple) and len(start_from) == 2 and isinstance(start_from[0], dict):
        return check_base(start_from[0], start_from[1], specials)
    pair = isinstance(start_from, (tuple, list)) and len(start_from) == 2
    parts = list(start_from) if pair else [start_from]  # type: ignore[arg-type]
    if not all(isinstance(part, (str, os.PathLike)) for part in parts):
        got = f"({', '.join(type(part).__name__ for part in parts)})" if pair else type(start_from).__name__
        raise BPEInputError(
            "start_from must be (vocab, merges) as train_bpe returns them (a dict of id -> bytes and a list of "
            "(bytes, bytes) pairs), a path as str or os.PathLike, or the paths of a vocab.json and a merges.txt; "
            f"got {got}"
        )
    paths = [_checked_path(part) for part in parts]
    if pair:
        return _load_pair(paths[0], paths[1], specials)
    path = paths[0]
    if path.is_dir():
        return _load_directory(path, specials)
    if path.suffix == ".json":
        return _load_hf(path, specials)
    return _load_tiktoken(path, specials)


def _checked_path(given: PathName) -> Path:
    """A base's path: not empty (Path('') would be the current directory), and a directory or a
    regular file that exists."""
    if not os.fspath(given):
        raise BPEInputError("start_from: the path is empty; give a tokenizer file or directory")
    path = Path(given)
    try:
        status = path.stat()
    except FileNotFoundError:
        raise BPEInputError(f"start_from: no such file or directory: {path}") from None
    except OSError as error:
        raise BPEInputError(f"start_from: cannot read {path}: {error.strerror or error}") from None
    if not stat.S_ISDIR(status.st_mode) and not stat.S_ISREG(status.st_mode):
        raise BPEInputError(
            f"start_from: {path} is not a tokenizer file: not a regular file (a FIFO, device or socket) nor a directory"
        )
    return path


def _load_directory(path: Path, specials: list[str]) -> Base:
    from ..outputs.serialization import RUN_FILE

    for vocab_name, merges_name in (("vocab.pkl", "merges.pkl"), ("vocab.json", "merges.txt")):
        if (path / vocab_name).is_file() and (path / merges_name).is_file():
            return _load_pair(path / vocab_name, path / merges_name, specials)
    if (path / "tokenizer.json").is_file():
        return _load_hf(path / "tokenizer.json", specials)
    if (path / "tokenizer.tiktoken").is_file() and not (path / RUN_FILE).is_file():
        return _load_tiktoken(path / "tokenizer.tiktoken", specials)
    raise BPEInputError(
        f"start_from: {path} holds no tokenizer: expected vocab.json and merges.txt (or a training run's "
        "vocab.pkl and merges.pkl), or tokenizer.json"
    )


def _load_pair(vocab_path: Path, merges_path: Path, specials: list[str]) -> Base:
    from ..outputs.serialization import load_tokenizer_files, run_pattern

    vocab, merges, run = load_tokenizer_files(vocab_path, merges_path)
    recorded = list(run["special_tokens"]) if run else []
    source = str(vocab_path.parent) if run else f"{vocab_path} and {merges_path}"
    base = check_base(vocab, merges, _union(recorded, specials), source)
    return replace(base, pattern=run_pattern(run)) if run else base


def _union(first: list[str], second: Iterable[str]) -> list[str]:
    return [*first, *(token for token in second if token not in first)]


def _byte_level(node: object) -> bool:
    """Whether an HF pre-tokenizer (or a Sequence of them) splits byte-level."""
    if not isinstance(node, dict):
        return False
    if node.get("type") == "ByteLevel":
        return True
    return node.get("type") == "Sequence" and any(_byte_level(step) for step in node.get("pretokenizers") or [])


def _load_hf(path: Path, specials: list[str]) -> Base:
    from ..outputs.serialization import decode_token

    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BPEInputError(f"start_from: cannot read {path} as an HF tokenizer.json: {error}") from None
    except RecursionError:
        raise BPEInputError(f"start_from: cannot read {path} as an HF tokenizer.json: nested too deeply") from None
    except ValueError as error:  # e.g. an integer past Python's digit limit
        raise BPEInputError(f"start_from: cannot read {path} as an HF tokenizer.json: {error}") from None
    model = document.get("model") if isinstance(document, dict) else None
    if not isinstance(model, dict) or model.get("type", "BPE") != "BPE" or "merges" not in model:
        raise BPEInputError(f"start_from: {path} is not a BPE tokenizer.json (its model is not BPE)")
    if (
        not _byte_level(document.get("pre_tokenizer"))
        or model.get("continuing_subword_prefix")
        or model.get("end_of_word_suffix")
    ):
        raise BPEInputError(f"start_from: {path} is not byte-level BPE (no ByteLevel pre-tokenizer, or word affixes)")
    if not isinstance(model.get("vocab"), dict) or not isinstance(model["merges"], list):
        raise BPEInputError(f"start_from: {path}: model.vocab must be an object and model.merges a list")
    vocab: Vocab = {}
    for token, token_id in model["vocab"].items():
        if isinstance(token_id, bool) or not isinstance(token_id, int):
            raise BPEInputError(f"start_from: {path}: model.vocab's ids must be integers, got {token_id!r}")
        if token_id in vocab:
            raise BPEInputError(
                f"start_from: {path}: model.vocab gives id {token_id} to two tokens, {vocab[token_id]!r} and "
                f"{decode_token(token, path)!r}; a base's ids are kept, so each must be one token's"
            )
        vocab[token_id] = decode_token(token, path)
    merges: Merges = []
    for merge in model["merges"]:
        parts = merge.split(" ") if isinstance(merge, str) else merge
        if not isinstance(parts, list) or len(parts) != 2 or not all(isinstance(part, str) for part in parts):
            raise BPEInputError(f"start_from: {path}: a merge must be two tokens, got {merge!r}")
        merges.append((decode_token(parts[0], path), decode_token(parts[1], path)))
    added = document.get("added_tokens") or []
    if not isinstance(added, list) or not all(
        isinstance(entry, dict) and isinstance(entry.get("id"), int) and isinstance(entry.get("content"), str)
        for entry in added
    ):
        raise BPEInputError(f"start_from: {path}: added_tokens must be a list of objects with an id and a content")
    recorded = [entry["content"] for entry in added if entry.get("special")]
    for entry in added:
        content = entry["content"].encode("utf-8")
        held = vocab.setdefault(entry["id"], content)
        if held != content:
            raise BPEInputError(
                f"start_from: {path}: the added token {entry['content']!r} has id {entry['id']}, which {held!r} "
                "has too: a base's ids are kept, and an id holds one token"
            )
    return check_base(vocab, merges, _union(recorded, specials), str(path))


def _load_tiktoken(path: Path, specials: list[str]) -> Base:
    """A tiktoken rank file holds tokens, not merges: each token's merge is the two tokens its bytes
    encode to by the tokens ranked before it (how tiktoken itself encodes), else it is refused."""
    from ..outputs.export import load_tiktoken_ranks

    try:
        ranks = load_tiktoken_ranks(path)
    except UnicodeDecodeError:
        raise BPEInputError(
            f"start_from: {path} is not a tokenizer: not a tiktoken rank file (base64 lines), nor a .json"
        ) from None
    vocab: Vocab = {rank: token for token, rank in ranks.items()}
    if len(vocab) != len(ranks):
        raise BPEInputError(f"start_from: {path}: two tokens share a rank")
    merges: Merges = []
    merge_rank: dict[tuple[bytes, bytes], int] = {}
    # Our rank files write a special token the layout puts among the ranks at its id (export.py).
    special_bytes = {token.encode("utf-8") for token in specials}
    for _, token in sorted(vocab.items()):
        if len(token) < 2 or token in special_bytes:
            continue
        parts = encode_word(token, merge_rank)
        if len(parts) != 2:
            raise BPEInputError(
                f"start_from: {path}: its ranks do not build its tokens: {token!r} is not two tokens ranked "
                f"before it (it encodes to {len(parts)}; a special token is named with special_tokens / --special)"
            )
        merge_rank[(parts[0], parts[1])] = len(merges)
        merges.append((parts[0], parts[1]))
    return check_base(vocab, merges, specials, str(path))
