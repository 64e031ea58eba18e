"""What a pre-tokenizer is: a name, or any regular expression for the `regex` package. The one place
that spells a pattern; counting, training, saving and encoding take a `Pattern` from `resolve_pattern`.

Named patterns:
- `gpt2`: the assignment's (docs/CONTRACT.md), GPT-2's (r50k) but for tiktoken's `\\s++$`
  alternative, which only decides where whitespace at the very end of a text splits.
- `cl100k`: GPT-4's, tiktoken's `cl100k_base` `pat_str` (case-insensitive contractions, numbers of
  one to three digits, possessive quantifiers); rustbpe (nanochat) trains with the same matches.
- `rustbpe`: the GPT-4 split rustbpe (nanochat's trainer) uses when given none: cl100k's matches,
  but for whitespace after a text's last newline, as it has no `\\s++$`.
- `o200k`: GPT-4o's, tiktoken's `o200k_base` `pat_str` (upper- and lower-case letter runs with marks,
  contractions after either, `[\\r\\n/]*` after punctuation).
- `nanochat`: nanochat's `SPLIT_PATTERN`: rustbpe's with numbers of one or two digits (`\\p{N}{1,2}`).

Names are case-insensitive, and tiktoken's encoding names are aliases: `cl100k_base` is `cl100k`,
`o200k_base` is `o200k`, `r50k_base` and `gpt2` are `gpt2`. A pattern that looks like a name (letters,
digits, `_` and `-` alone: no regex would pre-tokenize with it) but is none is refused, listing them.

The native scanners count and encode `gpt2` (`cpp/scan/pretokenize.hpp`), `cl100k`, `rustbpe` and `o200k`
(`cpp/scan/pretokenize_gpt4.hpp`); `nanochat` and any other regex count and encode through `regex`,
under a time bound ($CS336_REGEX_TIMEOUT, `backend.regex_timeout`) so that runaway backtracking stops
with an error.

The named patterns match every character of any text. A custom regex may not: encoding then makes
each stretch of text between two matches a pre-token of its own (`Pattern.pretokens`), as HF
tokenizers' `Split` pre-tokenizer does, so that no text is lost; training counts the matches only
and notes how much of the text they leave out.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import regex

from .backend import REGEX_TIMEOUT_ENV, regex_timeout
from .errors import BPEInputError

GPT2 = "gpt2"
CL100K = "cl100k"
O200K = "o200k"
RUSTBPE = "rustbpe"
NANOCHAT = "nanochat"

# The assignment's pattern, exactly as it specifies it.
GPT2_SPLIT_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
# o200k's letter classes (scripts/gen_unicode_tables.py builds the native scanner's tables from them).
O200K_UPPER_CLASS = r"""[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"""
O200K_LOWER_CLASS = r"""[\p{Ll}\p{Lm}\p{Lo}\p{M}]"""
_O200K_CONTRACTION = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""
_O200K_PATTERN = "|".join(
    [
        rf"""[^\r\n\p{{L}}\p{{N}}]?{O200K_UPPER_CLASS}*{O200K_LOWER_CLASS}+{_O200K_CONTRACTION}""",
        rf"""[^\r\n\p{{L}}\p{{N}}]?{O200K_UPPER_CLASS}+{O200K_LOWER_CLASS}*{_O200K_CONTRACTION}""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

# rustbpe's own GPT-4 split (what its get_pattern() returns): cl100k's matches but for the end of a
# text, which it lacks `\s++$` for ("ab\n  " is ab, \n, two spaces; cl100k's takes \n and both spaces).
_RUSTBPE_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*"""
    r"""|\s*[\r\n]|\s+(?!\S)|\s+"""
)

# nanochat's SPLIT_PATTERN (nanochat/tokenizer.py): rustbpe's with `\p{N}{1,2}` for `\p{N}{1,3}`.
_NANOCHAT_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,2}| ?[^\s\p{L}\p{N}]++[\r\n]*"""
    r"""|\s*[\r\n]|\s+(?!\S)|\s+"""
)

# What the native scanners count, in bpe::PretokenPattern's order (`_count_cpp.NATIVE_PATTERNS`).
NATIVE_PATTERNS = (GPT2, CL100K, RUSTBPE, O200K)

NAMED_PATTERNS: dict[str, str] = {
    GPT2: GPT2_SPLIT_PATTERN,
    CL100K: _CL100K_PATTERN,
    O200K: _O200K_PATTERN,
    RUSTBPE: _RUSTBPE_PATTERN,
    NANOCHAT: _NANOCHAT_PATTERN,
}

# tiktoken's encoding names for our patterns (r50k's pat_str is gpt2's but for `\s++$`, see above).
PATTERN_ALIASES: dict[str, str] = {"cl100k_base": CL100K, "o200k_base": O200K, "r50k_base": GPT2}

# What a name looks like; a regex spelled so (no metacharacter) matches only that word.
_NAME_LIKE = regex.compile(r"[A-Za-z0-9_\-]+")


@dataclass(frozen=True)
class Pattern:
    """A pre-tokenizer: `regex` is what it matches; `name` is set for the named ones."""

    regex: str
    name: str | None = None

    @cached_property
    def compiled(self) -> regex.Pattern:
        return regex.compile(self.regex)

    @property
    def native(self) -> bool:
        """Whether the native scanner counts it (else counting goes through `regex`)."""
        return self.name in NATIVE_PATTERNS

    @property
    def native_encoding(self) -> bool:
        """Whether the compiled encoder runs it (the native scanner's patterns; else encoding goes
        through `regex`)."""
        return self.name in NATIVE_PATTERNS

    @property
    def whitespace_cuts_safe(self) -> bool:
        """Whether text may be cut before a space or newline that follows an ASCII letter or digit
        (`contract.whitespace_cuts`) without splitting a match: true of the named patterns, whose
        every alternative ends before such whitespace; any other regex is cut only at special tokens."""
        return self.name is not None

    @property
    def label(self) -> str:
        """How messages and files name it: its name, else the expression itself."""
        return self.name or self.regex

    def pretokens(self, text: str, *, keep_gaps: bool = True) -> list[str]:
        """The pre-tokens of `text`: the pattern's matches, whole where a custom regex has groups (an
        empty match is no token), and with `keep_gaps` each stretch of text between two matches that
        none covers, as a pre-token of its own (HF tokenizers' `Split`, behavior Isolated), so that
        they join into `text` again. A named pattern covers all text and runs unbounded; a custom
        regex stops after `match_seconds(len(text))` with a BPEInputError naming it."""
        if self.name is not None:
            return self.compiled.findall(text)
        seconds = match_seconds(len(text))
        pieces: list[str] = []
        position = 0
        try:
            for match in self.compiled.finditer(text, timeout=seconds):
                start, end = match.span()
                if keep_gaps and start > position:
                    pieces.append(text[position:start])
                if end > start:
                    pieces.append(text[start:end])
                position = end
        except TimeoutError:  # regex's; an OSError, so it is worded here, before anything can mistake it
            raise runaway_error(self, len(text), seconds) from None
        if keep_gaps and position < len(text):
            pieces.append(text[position:])
        return pieces


def known_pattern_names() -> str:
    """The names `resolve_pattern` takes, for messages."""
    return ", ".join([*NAMED_PATTERNS, *PATTERN_ALIASES])


def resolve_pattern(pattern: str | Pattern | None) -> Pattern:
    """`None` is `gpt2`; a name (any case, or tiktoken's alias) is that pattern; any other string a
    regular expression (the text of a named one is that named pattern). Refuses a name-like string
    that is no name, listing the names, and an expression that does not compile, naming it."""
    if isinstance(pattern, Pattern):
        return pattern
    if pattern is None:
        return Pattern(GPT2_SPLIT_PATTERN, GPT2)
    if not isinstance(pattern, str):
        raise BPEInputError(f"pattern must be a name ({known_pattern_names()}) or a regex string, got {pattern!r}")
    if _NAME_LIKE.fullmatch(pattern):
        name = PATTERN_ALIASES.get(pattern.lower(), pattern.lower())
        if name not in NAMED_PATTERNS:
            raise BPEInputError(
                f"pattern {pattern!r} is no known name; give one of {known_pattern_names()} (any case), "
                "or a regular expression"
            )
        return Pattern(NAMED_PATTERNS[name], name)
    return pattern_from_regex(pattern)


def pattern_from_regex(pattern: str) -> Pattern:
    """A pattern given by its expression (a run's or a count file's record): the named pattern whose
    text it is, else that regex. Refuses an expression that does not compile, naming it."""
    for name, expression in NAMED_PATTERNS.items():
        if pattern == expression:
            return Pattern(expression, name)
    if not pattern:
        raise BPEInputError("pattern must not be empty")
    try:
        regex.compile(pattern)
    except regex.error as error:
        raise BPEInputError(f"pattern {pattern!r} is not a valid regular expression: {error}") from None
    return Pattern(pattern)


# A custom regex gets regex_timeout() seconds per this many characters of the text it matches at once.
_TIMEOUT_CHARS = 1_000_000


def match_seconds(num_chars: int) -> float:
    """How long a custom regex may take over `num_chars` characters: $CS336_REGEX_TIMEOUT seconds
    (default 60) per million characters, and at least that for any text."""
    try:
        seconds = regex_timeout()
    except ValueError as error:
        raise BPEInputError(str(error)) from None
    return seconds * max(1.0, num_chars / _TIMEOUT_CHARS)


def runaway_error(pattern: Pattern, num_chars: int, seconds: float) -> BPEInputError:
    return BPEInputError(
        f"pattern {pattern_label(pattern.regex)} ran past its time bound ({seconds:,.6g} s for {num_chars:,} "
        "characters of text): runaway backtracking, as nested repeats like (a+)+ cause? Simplify the pattern, "
        f"or raise {REGEX_TIMEOUT_ENV} (seconds per million characters, default 60)"
    )


def pattern_label(expression: str) -> str:
    """How messages name a pattern known by its regex (a count file's, a run's): the name of a named
    one, else the regex in quotes."""
    for name, named in NAMED_PATTERNS.items():
        if expression == named:
            return name
    # Quoted as written (repr would double every backslash), unless it holds a newline or the like.
    return f"'{expression}'" if expression.isprintable() else repr(expression)
