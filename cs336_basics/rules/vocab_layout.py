"""How a vocabulary numbers its tokens (docs/CONTRACT.md, step 4): the initial tokens, the layouts
(`cs336`, `rustbpe`, `hf`, `hf-files`), the vocabulary assembled from merges, the ids of the special
tokens, and the merge of one pair inside a word (step 5, the Python versions').
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import BPEInputError
from .byte_level import gpt2_bytes_to_unicode
from .contract import Merges, Vocab

# Tokens this long are shared between the merges and the vocabulary (assemble_vocab).
_SHARED_TOKEN_BYTES = 1 << 16


def initial_vocab(special_tokens: Iterable[str]) -> Vocab:
    """Ids 0..255 are the single bytes, then the special tokens in the order given."""
    vocab: Vocab = {byte: bytes([byte]) for byte in range(256)}
    for token in special_tokens:
        vocab[len(vocab)] = token.encode("utf-8")
    return vocab


# How a vocabulary numbers its tokens (see assemble_vocab).
CS336_LAYOUT = "cs336"
RUSTBPE_LAYOUT = "rustbpe"
HF_LAYOUT = "hf"
HF_FILES_LAYOUT = "hf-files"
VOCAB_LAYOUTS = (CS336_LAYOUT, RUSTBPE_LAYOUT, HF_LAYOUT, HF_FILES_LAYOUT)


def trains_below_initial(layout: str) -> bool:
    """Whether a vocab_size below the initial tokens (special tokens and bytes) trains in `layout`:
    HF's layouts, with no merges, as HF does; the others refuse it."""
    return layout in (HF_LAYOUT, HF_FILES_LAYOUT)


def assemble_vocab(
    special_tokens: Iterable[str], merges: Merges, layout: str = CS336_LAYOUT, alphabet: Iterable[int] | None = None
) -> Vocab:
    """The 256 bytes, the special tokens in the order given and one token per merge in creation
    order, numbered as `layout` numbers them:

    - `cs336`: the bytes (ids 0-255), the special tokens, the merges;
    - `rustbpe`: the bytes, the merges, the special tokens (rustbpe's ranks hold none; nanochat
      adds them after the ranks);
    - `hf`: the special tokens, the bytes in the code-point order of their byte-level characters
      (GPT-2's byte-to-unicode map), the merges (HF tokenizers' `BpeTrainer`);
    - `hf-files`: the same with only the bytes of `alphabet` (the bytes the text holds, required
      here and only here), as HF's `train(files)` starts from the characters seen."""
    if layout not in VOCAB_LAYOUTS:
        raise BPEInputError(f"layout must be one of {', '.join(VOCAB_LAYOUTS)}, got {layout!r}")
    if (alphabet is not None) != (layout == HF_FILES_LAYOUT):
        raise BPEInputError(f"an alphabet goes with the layout {HF_FILES_LAYOUT!r} and only with it")
    specials = [token.encode("utf-8") for token in special_tokens]
    byte_tokens = [bytes([byte]) for byte in (range(256) if alphabet is None else sorted(set(alphabet)))]
    merged = _merged_tokens(merges)
    if layout == CS336_LAYOUT:
        order = [*byte_tokens, *specials, *merged]
    elif layout == RUSTBPE_LAYOUT:
        order = [*byte_tokens, *merged, *specials]
    else:
        characters = gpt2_bytes_to_unicode()
        byte_tokens.sort(key=lambda token: characters[token[0]])
        order = [*specials, *byte_tokens, *merged]
    return dict(enumerate(order))


def _merged_tokens(merges: Merges) -> list[bytes]:
    """One token per merge. A long token that later merges name is the very object they hold, not
    an equal copy made first: one long word makes tokens of megabytes, which would be held twice."""
    long_parts: dict[int, dict[int, bytes]] = {}  # length -> id -> part
    for pair in merges:
        for part in pair:
            if len(part) >= _SHARED_TOKEN_BYTES:
                long_parts.setdefault(len(part), {})[id(part)] = part
    tokens = []
    for left, right in merges:
        candidates = long_parts.get(len(left) + len(right), {}).values()
        held = next((part for part in candidates if part.startswith(left) and part.endswith(right)), None)
        tokens.append(left + right if held is None else held)
    return tokens


def special_token_ids(vocab: Vocab, special_tokens: Iterable[str]) -> dict[str, int]:
    """The id of each special token that `vocab` spells: the lowest id holding its bytes, except that a
    one-byte special token (`a`, a space, `[`) never takes the byte's own id when another id holds it:
    training gives such a token its own id (256 onwards) while the byte keeps its id for regular
    text, so both ids hold the same bytes and regular text uses the lower one. Tokens the vocabulary
    lacks are left out. Every loader, the tokenizer and the exports choose through this one rule."""
    wanted = {token.encode("utf-8"): token for token in special_tokens}
    spelled: dict[bytes, list[int]] = {}
    for token_id, token in vocab.items():
        if token in wanted:
            spelled.setdefault(token, []).append(token_id)
    chosen: dict[str, int] = {}
    for token_bytes, token in wanted.items():
        ids = sorted(spelled.get(token_bytes, ()))
        if not ids:
            continue
        # The lowest id is what regular text encodes a lone byte with; the special token is the next.
        chosen[token] = ids[1] if len(token_bytes) == 1 and len(ids) > 1 else ids[0]
    return chosen


def merge_word(word: list[int], pair: tuple[int, int], new_token: int) -> list[int]:
    """Replace every non-overlapping occurrence of `pair`, scanning left to right."""
    left, right = pair
    if left not in word:  # a C-speed scan that spares the Python loop below for most words
        return word
    merged: list[int] = []
    index = 0
    last = len(word) - 1
    while index <= last:
        if index < last and word[index] == left and word[index + 1] == right:
            merged.append(new_token)
            index += 2
        else:
            merged.append(word[index])
            index += 1
    return merged
