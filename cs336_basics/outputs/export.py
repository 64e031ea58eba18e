"""Export a trained vocabulary to HuggingFace `tokenizers` / `transformers` and to `tiktoken`.

    from .export import save_hf_tokenizer, save_hf_tokenizer_json, save_tiktoken_ranks, tiktoken_encoding
    save_hf_tokenizer_json("out/tokenizer.json", vocab, merges, ["<|endoftext|>"])
    tokenizers.Tokenizer.from_file("out/tokenizer.json")                                # HF tokenizers
    transformers.PreTrainedTokenizerFast(tokenizer_file="out/tokenizer.json")           # transformers
    save_hf_tokenizer("out", vocab, merges, ["<|endoftext|>"])   # tokenizer.json and transformers' configs
    transformers.AutoTokenizer.from_pretrained("out")                                   # transformers
    save_tiktoken_ranks("out/tokenizer.tiktoken", vocab)
    encoding = tiktoken_encoding("out/tokenizer.tiktoken", ["<|endoftext|>"])           # tiktoken.Encoding
    encoding.encode(text, allowed_special="all")

Both give our ids (`Tokenizer.encode`): the same special-token split, the same pre-tokenization
pattern (a `Split` pre-tokenizer in HF, `pat_str` in tiktoken: `pattern=`, GPT-2's by default, and a
training run's own when a rank file is read from its directory), bytes shown through GPT-2's
byte-to-unicode table in HF's vocabulary, and the merges in creation order (HF applies merges by
rank, as we do; tiktoken merges by the rank of the merged token, which is the same order for a
vocabulary BPE training made). Special tokens keep their ids (256, ...). The libraries are only
needed to load the files, not to write them.

For `transformers.AutoTokenizer.from_pretrained(directory)`, tokenizer_config.json names the class
(PreTrainedTokenizerFast, which reads tokenizer.json) and, with special_tokens_map.json, the roles of
the special tokens: `<|endoftext|>` is the eos and bos token, as in GPT-2, and every other special
token is an additional special token. There is no unk token (every byte has an id) and no pad token.
A training run writes all of these into its output set (`cs336-train-bpe --export hf`, see
`export_files` and `serialization`), so that they are checked and replaced with the rest.

Each export is one row of the table (`ExportFormat`, registered as `EXPORT_FORMATS` is made): its
name, its files, its builder, the patterns it refuses; the CLI, `export_files`, `check_exportable`
and the output set read the rows (docs/EXPORT.md, "Adding an export").
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ..rules.contract import ENDOFTEXT, BPEInputError, Merges, Vocab, check_special_tokens
from ..rules.pattern import Pattern, pattern_label, resolve_pattern
from ..rules.vocab_layout import HF_FILES_LAYOUT, HF_LAYOUT, RUSTBPE_LAYOUT, special_token_ids
from .serialization import encode_token, read_run_info, run_layout, run_pattern, write_atomically

__all__ = [
    "DEFAULT_MODEL_MAX_LENGTH",
    "EXPORT_FORMATS",
    "ExportFormat",
    "check_exportable",
    "export_file_names",
    "export_files",
    "export_formats",
    "export_row",
    "hf_special_tokens_map",
    "hf_split_regex",
    "hf_tokenizer_config",
    "hf_tokenizer_json",
    "load_tiktoken_ranks",
    "register_export",
    "save_hf_tokenizer",
    "save_hf_tokenizer_json",
    "save_tiktoken_ranks",
    "tiktoken_encoding",
    "tiktoken_pattern_problem",
]

# GPT-2's context length. The tokenizer itself has no limit; transformers only uses this to warn about
# and truncate longer inputs, so the value of the model the tokenizer is made for is the right one.
DEFAULT_MODEL_MAX_LENGTH = 1024


def _split_ids(vocab: Vocab, special_tokens: list[str]) -> tuple[dict[bytes, int], dict[str, int]]:
    """Regular tokens (bytes -> id) and special tokens (text -> id); refuses what neither library
    can represent: bytes spelled by two ids, or a special token missing from the vocabulary."""
    # The special tokens' ids are the tokenizer's (a one-byte special token has an id of its own).
    specials = special_token_ids(vocab, special_tokens)
    special_id_set = set(specials.values())
    regular: dict[bytes, int] = {}
    for token_id in sorted(vocab):
        token = vocab[token_id]
        if token_id in special_id_set:
            continue
        if token in regular:
            raise BPEInputError(
                f"cannot export: ids {regular[token]} and {token_id} both spell {token!r}; "
                "HF tokenizers and tiktoken need one id per token"
            )
        regular[token] = token_id
    missing = [token for token in special_tokens if token not in specials]
    if missing:
        raise BPEInputError(f"cannot export: special tokens {missing} are not in the vocabulary")
    return regular, specials


def _escape_end(expression: str, start: int) -> int:
    """Where the escape at `start` (a backslash) ends: `\\p{..}`, `\\x{..}`, `\\g<..>`, `\\xhh`, `\\uhhhh`,
    else one character."""
    kind = expression[start + 1 : start + 2]
    if kind in ("p", "P", "N", "x") and expression.startswith("{", start + 2):
        return expression.index("}", start + 2) + 1
    if kind == "g" and expression.startswith("<", start + 2) and ">" in expression[start + 3 :]:
        return expression.index(">", start + 2) + 1
    return start + {"p": 3, "P": 3, "x": 4, "u": 6, "U": 10}.get(kind, 2)


def _class_end(expression: str, start: int) -> int:
    """Where the character class opened at `start` ends (a `]` first in it is itself)."""
    position = start + 1
    position += expression.startswith("^", position)
    position += expression.startswith("]", position)
    while position < len(expression):
        if expression[position] == "\\":
            position = _escape_end(expression, position)
        elif expression.startswith("[:", position) and ":]" in expression[position:]:
            position = expression.index(":]", position) + 2
        elif expression[position] == "]":
            return position + 1
        else:
            position += 1
    return position


_BOUNDED_REPEAT = re.compile(r"\{(?:\d+(?:,\d*)?|,\d+)\}")
# `(?P<name>`, `(?<name>` (not a lookbehind), `(?P=name)`; a flag group `(?flags)`, `(?flags-flags:`.
_NAMED_GROUP = re.compile(r"\(\?P?<(?![=!])(\w+)>")
_NAMED_REFERENCE = re.compile(r"\(\?P=(\w+)\)")
_FLAG_GROUP = re.compile(r"\(\?([a-zA-Z]*(?:V[01])?[a-zA-Z]*)(?:-([a-zA-Z]*))?([:)])")
# What `regex` has and neither Oniguruma nor tiktoken's fancy-regex reads as `regex` does.
_RECURSION = re.compile(r"\(\?(?:R|[+-]?\d+|&\w+|P>\w+)\)")
_FUZZY = re.compile(r"\{(?:\d+<=?)?\d*[eisd](?:[+,<][^{}]*)?\}")
# Inline flags: regex's letter -> Oniguruma's (Ruby syntax: `m` is what regex calls `s`, and `^`,
# `$` always see lines). `m` is taken only at the start, where it keeps `^` and `$` as Ruby reads them.
_HF_FLAGS = {"i": "i", "s": "m", "u": "", "V0": ""}
_FLAG_NAMES = {
    "a": "ASCII (?a)",
    "b": "BESTMATCH (?b)",
    "e": "ENHANCEMATCH (?e)",
    "f": "FULLCASE (?f)",
    "L": "LOCALE (?L)",
    "m": "MULTILINE (?m) inside a group",
    "p": "POSIX (?p)",
    "r": "REVERSE (?r)",
    "V1": "VERSION1 (?V1)",
    "w": "WORD (?w)",
    "x": "VERBOSE (?x)",
}


def _unexportable(expression: str, construct: str, target: str) -> BPEInputError:
    return BPEInputError(
        f"cannot export pattern {pattern_label(expression)} to {target}: it has {construct}, which {target} "
        "reads differently or not at all; rewrite the pattern without it (docs/EXPORT.md)"
    )


def _regex_only_construct(expression: str) -> str | None:
    """A construct of `regex` that no export can carry: recursion, fuzzy matching, branch reset."""
    if found := _RECURSION.search(expression):
        return f"a recursive call {found.group()}"
    if found := _FUZZY.search(expression):
        return f"fuzzy matching {found.group()}"
    if "(?|" in expression:
        return "a branch reset (?|...)"
    return None


def _flags(expression: str, letters: str, at_start: bool, target: str) -> str:
    """regex's inline flag letters as Oniguruma's; refuses those it has not, naming them."""
    out = []
    for letter in re.findall(r"V[01]|.", letters):
        if letter == "m" and at_start:
            continue  # Ruby's ^ and $ are line anchors already (hf_split_regex leaves them)
        if letter not in _HF_FLAGS:
            raise _unexportable(expression, f"the inline flag {_FLAG_NAMES.get(letter, '(?' + letter + ')')}", target)
        out.append(_HF_FLAGS[letter])
    return "".join(out)


def hf_split_regex(expression: str) -> str:
    """`expression` (a `regex` pattern) written for HF tokenizers' Oniguruma, which reads Ruby's syntax:
    there a possessive bounded repeat `X{1,3}+` is a repeat of a repeat (cl100k's numbers would run on),
    so it becomes the atomic group `(?>X{1,3})`; `^` and `$` mean a line's start and end, so they
    become `\\A` and `\\Z` (the text's, as in `regex`; kept under a leading `(?m)`), and `regex`'s
    `\\Z` becomes `\\z`. Named groups become plain ones (a match's groups play no part in a Split) and
    named back-references numbered ones; inline flags become Oniguruma's (`s` is Ruby's `m`), and only
    at the start of the pattern where they apply to all of it. What cannot be written so (recursion,
    fuzzy matching, flags Oniguruma lacks, a flag group after the start) is refused with a
    BPEInputError naming it."""
    if construct := _regex_only_construct(expression):
        raise _unexportable(expression, construct, "HF tokenizers")
    writer = _HfWriter(expression)
    position = 0
    while position < len(expression):
        position = writer.step(position)
    return "".join(writer.out)


class _HfWriter:
    """hf_split_regex's walk: each step writes one construct of `expression` for Oniguruma into `out`."""

    def __init__(self, expression: str) -> None:
        self.expression = expression
        self.out: list[str] = []
        self.groups: list[int] = []  # where each open group starts in `out`
        self.numbers: dict[str, int] = {}  # a named group's number
        self.captured = 0
        self.atom: int | None = None  # where the last atom (what a repeat applies to) starts in `out`
        self.line_anchors = False  # a leading (?m): ^ and $ stay Ruby's
        self.leading = True  # nothing but flag groups so far

    def refuse(self, construct: str) -> BPEInputError:
        return _unexportable(self.expression, construct, "HF tokenizers")

    def step(self, position: int) -> int:
        """Writes the construct at `position`; returns where the next one starts."""
        expression, char = self.expression, self.expression[position]
        repeat = _BOUNDED_REPEAT.match(expression, position) if char == "{" else None
        flags = _FLAG_GROUP.match(expression, position) if expression.startswith("(?", position) else None
        if char == "\\":
            end = self.escape(position)
        elif char == "[":
            end = _class_end(expression, position)
            self.atom = len(self.out)
            self.out.append(expression[position:end])
        elif flags is not None and (flags.group(1) or flags.group(2)):
            end = self.flag_group(flags)
        elif char == "(":
            end = self.group(position)
        elif char == ")":
            end = position + 1
            self.atom = self.groups.pop() if self.groups else None
            self.out.append(char)
        elif repeat is not None and self.atom is not None:
            end = repeat.end()
            if expression.startswith("+", end):  # possessive: an atomic group in Ruby's syntax
                self.out[self.atom :] = ["(?>" + "".join(self.out[self.atom :]) + repeat.group() + ")"]
                end += 1
            else:
                self.out.append(repeat.group())
            self.atom = None
        elif char in "^$":
            end = position + 1
            self.atom = None
            self.out.append(char if self.line_anchors else "\\A" if char == "^" else "\\Z")
        else:
            end = position + 1
            self.atom = None if char in "|*+?" else len(self.out)
            self.out.append(char)
        self.leading = self.leading and flags is not None and flags.group(3) == ")"
        return end

    def escape(self, position: int) -> int:
        end = _escape_end(self.expression, position)
        escape = self.expression[position:end]
        self.atom = len(self.out)
        if escape.startswith("\\g<"):
            name = escape[3:-1]
            if not name.isdigit() and name not in self.numbers:
                raise self.refuse(f"a reference {escape} to no group before it")
            self.out.append(f"\\k<{name if name.isdigit() else self.numbers[name]}>")
        else:
            self.out.append("\\z" if escape == "\\Z" else escape)
        return end

    def flag_group(self, flags: re.Match[str]) -> int:
        on, off, kind = flags.group(1), flags.group(2) or "", flags.group(3)
        if kind == ")" and not self.leading:
            raise self.refuse(f"the inline flag group {flags.group()} after the start")
        at_start = kind == ")"
        self.line_anchors = self.line_anchors or (at_start and "m" in on)
        on_hf = _flags(self.expression, on, at_start, "HF tokenizers")
        off_hf = _flags(self.expression, off.replace("x", ""), False, "HF tokenizers")  # never on: (?x) is refused
        written = on_hf + (f"-{off_hf}" if off_hf else "")
        if kind == ":":
            self.groups.append(len(self.out))
            self.atom = None
            self.out.append(f"(?{written}:")
        elif written:
            self.out.append(f"(?{written})")
        return flags.end()

    def group(self, position: int) -> int:
        """A group's opening, a named back-reference or a comment at `position`."""
        expression = self.expression
        named = _NAMED_GROUP.match(expression, position)
        reference = _NAMED_REFERENCE.match(expression, position)
        if reference is not None:
            if reference.group(1) not in self.numbers:
                raise self.refuse(f"a reference {reference.group()} to no group before it")
            self.atom = len(self.out)
            self.out.append(f"\\k<{self.numbers[reference.group(1)]}>")
            return reference.end()
        if expression.startswith("(?#", position):
            return expression.index(")", position) + 1 if ")" in expression[position:] else len(expression)
        if named is not None or not expression.startswith("(?", position):
            self.captured += 1
            if named is not None:
                self.numbers[named.group(1)] = self.captured
        self.groups.append(len(self.out))
        self.atom = None
        self.out.append("(")
        return position + 1 if named is None else named.end()


def tiktoken_pattern_problem(expression: str) -> str | None:
    """What in `expression` tiktoken (Rust's fancy-regex) cannot read as `regex` does, in words; None
    when nothing is known to stop it (its pat_str is the pattern as written)."""
    if construct := _regex_only_construct(expression):
        return construct
    position = 0
    while (found := expression.find("\\", position)) >= 0:
        position = _escape_end(expression, found)
        if expression[found : found + 2] == "\\X":
            return "the grapheme cluster \\X"
        if expression.startswith("\\g<", found):  # fancy-regex reads it as a subroutine call, as Oniguruma does
            return f"the back-reference {expression[found:position]} (write (?P=name) or \\1)"
    for flags in _FLAG_GROUP.finditer(expression):
        for letter in re.findall(r"V[01]|.", (flags.group(1) or "") + (flags.group(2) or "")):
            if letter not in "imsux":
                return f"the inline flag {_FLAG_NAMES.get(letter, '(?' + letter + ')')}"
    return None


def _loads_in_hf(expression: str, translated: str) -> None:
    """Where HF tokenizers is installed, Oniguruma compiles the translation or the export is refused."""
    try:
        import tokenizers
    except ImportError:
        return
    try:
        tokenizers.Regex(translated)
    except Exception as error:  # tokenizers raises its own Exception subclass
        raise BPEInputError(
            f"cannot export pattern {pattern_label(expression)} to HF tokenizers: Oniguruma rejects it as "
            f"{translated!r} ({error}); rewrite the pattern without that construct"
        ) from None


def _refuse_in_hf(expression: str) -> None:
    _loads_in_hf(expression, hf_split_regex(expression))


def _refuse_in_tiktoken(expression: str) -> None:
    if problem := tiktoken_pattern_problem(expression):
        raise _unexportable(expression, problem, "tiktoken")


# ---------------------------------------------------------------------------------------------
# The table: one row per export (docs/EXPORT.md, "Adding an export")

# A row's builder: (vocab, merges, special tokens, pattern=, model_max_length=) -> file name -> content.
ExportBuilder = Callable[..., dict[str, bytes]]


@dataclass(frozen=True)
class ExportFormat:
    """One row of the export table: everything the CLI, the output set and the checks know of an export.

    `files`: the names it writes into the output set (each unique to it; a later set without it
    removes them). `build(vocab, merges, special_tokens, *, pattern, model_max_length)`: those files'
    contents, made before anything is written. `refuses(regex)`: raises `BPEInputError`, naming the
    construct, for a custom pattern the format cannot carry, checked before training. `unmatched_note`:
    said when a custom pattern leaves text in no pre-token and the format drops that text (`{pattern}`
    is the pattern's label). `loaded_by`: what reads the files (for the docs and `--help`)."""

    name: str
    files: tuple[str, ...]
    build: ExportBuilder
    refuses: Callable[[str], None] | None = None
    unmatched_note: str | None = None
    loaded_by: str = ""


_EXPORTS: dict[str, ExportFormat] = {}


def register_export(row: ExportFormat) -> ExportFormat:
    """Adds (or replaces) a row; its file names must not be another export's."""
    taken = {name for other in _EXPORTS.values() if other.name != row.name for name in other.files}
    if clash := sorted(taken.intersection(row.files)):
        raise ValueError(f"export {row.name!r} would write {clash}, which another export writes")
    _EXPORTS[row.name] = row
    return row


def export_formats() -> tuple[str, ...]:
    """The name of every export, the built-in ones first."""
    return tuple(_EXPORTS)


def export_row(name: str) -> ExportFormat:
    row = _EXPORTS.get(name)
    if row is None:
        raise BPEInputError(f"unknown export format {name!r}; choose from {', '.join(_EXPORTS)}")
    return row


def export_file_names() -> tuple[str, ...]:
    """Every file an export may write into an output set (`serialization` removes stale ones)."""
    return tuple(name for row in _EXPORTS.values() for name in row.files)


def check_exportable(formats: Iterable[str], pattern: str | Pattern | None) -> None:
    """Refuses, before anything is trained or written, a pattern an export in `formats` cannot carry
    (its row's `refuses`: HF's Oniguruma cannot read it after `hf_split_regex`, tiktoken cannot read
    it), naming the construct. Named patterns are checked as any regex (tests/test_pattern_table.py
    finds every row exportable)."""
    resolved = resolve_pattern(pattern)
    formats = set(formats)
    for row in _EXPORTS.values():
        if row.name in formats and row.refuses is not None:
            row.refuses(resolved.regex)


def hf_tokenizer_json(
    vocab: Vocab,
    merges: Merges,
    special_tokens: Iterable[str] | None = None,
    *,
    pattern: str | Pattern | None = None,
) -> dict:
    """The `tokenizer.json` document of a byte-level BPE tokenizer equal to ours, pre-tokenizing with
    `pattern` (`pattern.resolve_pattern`; GPT-2's by default) as `hf_split_regex` writes it (a
    pattern it cannot write, or that HF's Oniguruma then rejects, is refused: `check_exportable`)."""
    resolved = resolve_pattern(pattern)
    split_regex = hf_split_regex(resolved.regex)
    _loads_in_hf(resolved.regex, split_regex)
    specials = check_special_tokens(special_tokens)
    regular, special_ids = _split_ids(vocab, specials)
    model_vocab = {
        encode_token(token): token_id for token, token_id in sorted(regular.items(), key=lambda item: item[1])
    }
    # HF keeps an added token's id only when the model's vocabulary has its text too (as GPT-2's does).
    for token, token_id in special_ids.items():
        if model_vocab.setdefault(token, token_id) != token_id:
            raise BPEInputError(
                f"cannot export: special token {token!r} reads like the regular token {model_vocab[token]}"
            )
    for left, right in merges:
        if left + right not in regular:
            raise BPEInputError(f"cannot export: the merge {left!r} + {right!r} has no token in the vocabulary")
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": token_id,
                "content": token,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for token, token_id in special_ids.items()
        ],
        "normalizer": None,
        # Our exact pattern splits first; ByteLevel then only maps bytes to GPT-2's printable characters.
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": split_regex}, "behavior": "Isolated", "invert": False},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
            ],
        },
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            # A pre-token found whole in the vocabulary must still be built by the merges, as ours is.
            "ignore_merges": False,
            "vocab": model_vocab,
            "merges": [f"{encode_token(left)} {encode_token(right)}" for left, right in merges],
        },
    }


def hf_special_tokens_map(special_tokens: Iterable[str] | None = None) -> dict:
    """The `special_tokens_map.json` document: the role of each special token in `transformers`."""
    specials = check_special_tokens(special_tokens)
    roles: dict = {}
    if ENDOFTEXT in specials:
        # GPT-2's convention: one token ends a document and, where a model wants one, starts the next.
        roles["bos_token"] = roles["eos_token"] = ENDOFTEXT
    others = [token for token in specials if token != ENDOFTEXT]
    if others:
        # Read as extra_special_tokens by transformers 5, still under this name by 4.x.
        roles["additional_special_tokens"] = others
    return roles


def hf_tokenizer_config(
    special_tokens: Iterable[str] | None = None, *, model_max_length: int = DEFAULT_MODEL_MAX_LENGTH
) -> dict:
    """The `tokenizer_config.json` document that makes `AutoTokenizer.from_pretrained` load
    tokenizer.json with the special tokens' roles."""
    if isinstance(model_max_length, bool) or not isinstance(model_max_length, int) or model_max_length < 1:
        raise BPEInputError(f"model_max_length must be a positive integer, got {model_max_length!r}")
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": model_max_length,
        # decode must give back the text exactly, as ours does; clean-up would drop spaces before punctuation.
        "clean_up_tokenization_spaces": False,
        **hf_special_tokens_map(special_tokens),
    }


def _json_bytes(document: dict) -> bytes:
    return json.dumps(document, ensure_ascii=False, indent=1).encode("utf-8")


def _hf_files(
    vocab: Vocab,
    merges: Merges,
    special_tokens: Iterable[str] | None,
    *,
    pattern: str | Pattern | None = None,
    model_max_length: int = DEFAULT_MODEL_MAX_LENGTH,
) -> dict[str, bytes]:
    specials = check_special_tokens(special_tokens)
    return {
        "tokenizer.json": _json_bytes(hf_tokenizer_json(vocab, merges, specials, pattern=pattern)),
        "tokenizer_config.json": _json_bytes(hf_tokenizer_config(specials, model_max_length=model_max_length)),
        "special_tokens_map.json": _json_bytes(hf_special_tokens_map(specials)),
    }


def _tiktoken_ranks(vocab: Vocab, special_tokens: Iterable[str] | None) -> bytes:
    """The rank file's lines, `base64(token) id`, in id order, with no gap: a special token the layout
    puts among the regular ids (256, ... in CS336's, 0, ... in HF's) is written at its id, so a loader
    that numbers its own special tokens `len(ranks) + i` (nanochat's) never lands on a merged token.
    Special tokens after the last regular id (rustbpe's and nanochat's layout) are left out, as
    rustbpe's own ranks leave them."""
    regular, special_ids = _split_ids(vocab, check_special_tokens(special_tokens))
    last_regular = max(regular.values(), default=-1)
    ranks = [(token_id, token) for token, token_id in regular.items()]
    ranks += [(token_id, text.encode("utf-8")) for text, token_id in special_ids.items() if token_id < last_regular]
    lines = (f"{base64.b64encode(token).decode('ascii')} {token_id}\n" for token_id, token in sorted(ranks))
    return "".join(lines).encode("ascii")


def _tiktoken_files(
    vocab: Vocab, merges: Merges, special_tokens: Iterable[str] | None, **_: object
) -> dict[str, bytes]:
    return {"tokenizer.tiktoken": _tiktoken_ranks(vocab, special_tokens)}


EXPORT_FORMATS = tuple(
    register_export(row).name
    for row in (
        ExportFormat(
            "hf",
            ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"),
            _hf_files,
            refuses=_refuse_in_hf,
            loaded_by="HF tokenizers, transformers",
        ),
        ExportFormat(
            "tiktoken",
            ("tokenizer.tiktoken",),
            _tiktoken_files,
            refuses=_refuse_in_tiktoken,
            unmatched_note="tiktoken leaves out the text {pattern} does not match, so its ids are "
            "Tokenizer(drop_unmatched=True)'s; tokenizer.json and Tokenizer keep that text (docs/EXPORT.md)",
            loaded_by="tiktoken (tiktoken_encoding)",
        ),
    )
)


def export_files(
    formats: Iterable[str],
    vocab: Vocab,
    merges: Merges,
    special_tokens: Iterable[str] | None = None,
    *,
    model_max_length: int = DEFAULT_MODEL_MAX_LENGTH,
    pattern: str | Pattern | None = None,
) -> dict[str, bytes]:
    """File name -> content of each export in `formats` (`export_formats()`; each row's `files`), for
    `OutputDirectory.save`: "hf" is tokenizer.json, tokenizer_config.json and special_tokens_map.json,
    "tiktoken" is tokenizer.tiktoken. Made before anything is written, so a vocabulary that cannot be
    exported leaves the output directory as it was. `pattern` is the run's (tokenizer.json's
    pre-tokenizer); the rank file has no place for it: `tiktoken_encoding` takes it from the run's
    bpe_run.json."""
    formats = list(formats)
    unknown = sorted(set(formats) - set(_EXPORTS))
    if unknown:
        raise BPEInputError(f"unknown export format(s) {unknown}; choose from {', '.join(_EXPORTS)}")
    check_exportable(formats, pattern)
    files: dict[str, bytes] = {}
    for row in _EXPORTS.values():
        if row.name in formats:
            built = row.build(vocab, merges, special_tokens, pattern=pattern, model_max_length=model_max_length)
            if set(built) != set(row.files):
                raise ValueError(f"export {row.name!r} built {sorted(built)}, not the files its row names")
            files.update(built)
    return files


def save_hf_tokenizer_json(
    path: str | os.PathLike,
    vocab: Vocab,
    merges: Merges,
    special_tokens: Iterable[str] | None = None,
    *,
    pattern: str | Pattern | None = None,
) -> Path:
    """tokenizer.json alone, for HF `tokenizers` (see save_hf_tokenizer for `transformers`)."""
    target = Path(path)
    write_atomically(target, _json_bytes(hf_tokenizer_json(vocab, merges, special_tokens, pattern=pattern)))
    return target


def save_hf_tokenizer(
    directory: str | os.PathLike,
    vocab: Vocab,
    merges: Merges,
    special_tokens: Iterable[str] | None = None,
    *,
    model_max_length: int = DEFAULT_MODEL_MAX_LENGTH,
    pattern: str | Pattern | None = None,
) -> dict[str, Path]:
    """tokenizer.json, tokenizer_config.json and special_tokens_map.json in `directory` (created if
    needed), for `transformers.AutoTokenizer.from_pretrained(directory)`; returns their paths.
    Each file is replaced atomically, but not the three as one unit: inside a training output
    directory, let the run write them (`OutputDirectory.save(exports=export_files(["hf"], ...))`)."""
    target = Path(directory)
    # All checked before any is written.
    files = _hf_files(vocab, merges, special_tokens, pattern=pattern, model_max_length=model_max_length)
    target.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, content in files.items():
        write_atomically(target / name, content)
        paths[name] = target / name
    return paths


def save_tiktoken_ranks(path: str | os.PathLike, vocab: Vocab, special_tokens: Iterable[str] | None = None) -> Path:
    """tiktoken's rank file: one `base64(token_bytes) id` line per token, in id order, with no gap
    (a special token among the regular ids is written at its id; tiktoken takes special tokens
    separately, so pass the same list to `tiktoken_encoding`)."""
    target = Path(path)
    write_atomically(target, _tiktoken_ranks(vocab, special_tokens))
    return target


def load_tiktoken_ranks(path: str | os.PathLike) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    with open(path, encoding="ascii") as file:
        for number, line in enumerate(file, 1):
            try:
                text, rank_text = line.split()
                token, rank = base64.b64decode(text, validate=True), int(rank_text)
            except ValueError:
                raise BPEInputError(f"{path}:{number}: not a tiktoken rank line: {line.strip()!r}") from None
            if token in ranks:  # a dict would keep the last rank and leave the first a gap
                raise BPEInputError(
                    f"{path}:{number}: the token {token!r} is listed twice, at ranks {ranks[token]} and {rank}; "
                    "a token has one rank"
                )
            ranks[token] = rank
    return ranks


def _layout_special_ids(layout: str, mergeable: dict[bytes, int], specials: list[str]) -> dict[str, int]:
    """The ids `vocab_layout.assemble_vocab` gives the special tokens of a vocabulary in `layout`."""
    if layout in (HF_LAYOUT, HF_FILES_LAYOUT):
        first = 0
    elif layout == RUSTBPE_LAYOUT:
        first = max(mergeable.values(), default=-1) + 1
    else:
        first = 256
    return {token: first + index for index, token in enumerate(specials)}


def tiktoken_encoding(
    ranks: str | os.PathLike | Vocab,
    special_tokens: Iterable[str] | None = None,
    *,
    name: str = "cs336_bpe",
    pattern: str | Pattern | None = None,
):
    """A `tiktoken.Encoding` from a rank file (or a vocabulary, id -> bytes) giving our ids.

    From a rank file, special tokens get the ids the run's layout gives them, in the order given:
    256, 257, ... as the trainers assign them by default, after the merges for `like="rustbpe"`,
    first for `like="hf"` (a clash with a regular id is refused); from a vocabulary, their ids in
    it. `pat_str` is `pattern`; None means the run's pattern, read with the layout from the
    bpe_run.json beside a rank file, else GPT-2's. Encode with `allowed_special="all"` to split on
    special tokens as our tokenizer does."""
    try:
        import tiktoken
    except ImportError:
        raise BPEInputError("tiktoken is not installed: pip install tiktoken (or the export extra)") from None
    specials = check_special_tokens(special_tokens)
    if isinstance(ranks, dict):
        mergeable, special_ids = _split_ids(ranks, specials)
    else:
        mergeable = load_tiktoken_ranks(ranks)
        run = read_run_info(Path(ranks).parent)
        if pattern is None:
            pattern = run_pattern(run)
        # A special token among the regular ids is written at its id (no gap); it is special here.
        listed = {text: token_id for text in specials if (token_id := mergeable.get(text.encode("utf-8"))) is not None}
        for text in listed:
            del mergeable[text.encode("utf-8")]
        special_ids = _layout_special_ids(run_layout(run), mergeable, specials) | listed
        clashes = sorted(set(mergeable.values()).intersection(special_ids.values()))
        if clashes:
            raise BPEInputError(f"{ranks}: ids {clashes} are regular tokens; give the vocabulary to place specials")
    if overlapping := [a for a in specials for b in specials if a != b and b.startswith(a)]:
        # tiktoken's special-token regex takes them in hash-map order, not longest first.
        raise BPEInputError(f"tiktoken cannot split overlapping special tokens exactly: {overlapping}")
    resolved = resolve_pattern(pattern)
    if problem := tiktoken_pattern_problem(resolved.regex):
        raise _unexportable(resolved.regex, problem, "tiktoken")
    pat_str = resolved.regex
    return tiktoken.Encoding(name, pat_str=pat_str, mergeable_ranks=mergeable, special_tokens=special_ids)
