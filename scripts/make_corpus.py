#!/usr/bin/env python3
"""Write a synthetic training corpus shaped like TinyStories or OpenWebText, reproducibly.

    python scripts/make_corpus.py data/tinystories_like.txt --profile tinystories --size 2.2G
    python scripts/make_corpus.py data/owt_like.txt --profile owt --size 2G --seed 0

The same profile, size and seed give the same bytes on every machine and Python version (only
`random.Random.random()` is drawn on, and every choice is made from it here). Documents end with
`<|endoftext|>` as in the assignment's files; the output stops at the first document boundary at
or past --size. What each profile imitates, for the benchmarks (`docs/BENCHMARKS.md`):

  tinystories  short children's stories (about 800 bytes each) from a vocabulary of a few thousand
               words: few distinct pre-tokens, so pre-tokenization dominates training time.
  owt          web articles (a few KB each, long-tailed lengths) over a Zipf-distributed vocabulary
               of made-up words, with numbers, punctuation, quotes, links and some non-ASCII text,
               plus rare new words all along (about 2 million distinct pre-tokens in 2 GB), so the
               merge phase has real work, as on OpenWebText.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import os
import random
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

ENDOFTEXT = "<|endoftext|>"
UNITS = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "KB": 10**3, "MB": 10**6, "GB": 10**9}


def parse_size(text: str) -> int:
    """'500K', '2.2G', '10MB' or a plain number of bytes."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]B?)?\s*", text, flags=re.IGNORECASE)
    if not match or float(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (use e.g. 500K, 200M, 2.2G)")
    return int(float(match.group(1)) * UNITS[(match.group(2) or "").upper()])


class Draw:
    """Choices made from `random()` alone, so the stream never depends on how a Python release
    implements `choice`, `choices` or `randrange`."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def chance(self, probability: float) -> bool:
        return self.rng.random() < probability

    def below(self, n: int) -> int:
        return min(int(self.rng.random() * n), n - 1)

    def pick(self, items: list[str]) -> str:
        return items[self.below(len(items))]

    def weighted(self, items: list[str], cumulative: list[float]) -> str:
        return items[min(bisect.bisect(cumulative, self.rng.random() * cumulative[-1]), len(items) - 1)]

    def between(self, low: int, high: int) -> int:
        return low + self.below(high - low + 1)


def zipf_weights(count: int, exponent: float) -> list[float]:
    return list(itertools.accumulate(1.0 / (rank**exponent) for rank in range(1, count + 1)))


# ---- TinyStories-like -------------------------------------------------------------------------

NAMES = (
    "Lily Tom Ben Mia Max Sue Tim Anna Jack Lucy Sam Zoe Leo Ella Finn Rosa Kai Nina Otto Pip Ruby "
    "Theo Ivy Milo Lola Hugo Maya Eli Nora Oscar Jade Remy Tess Arlo Cleo Dex Gwen Hank Iris Joey"
).split()
ANIMALS = "dog cat bird bunny frog duck mouse bear fox owl pig cow lamb fish puppy kitten turtle horse bee".split()
THINGS = (
    "ball kite box hat boat car tree flower cake toy cup book rock shell leaf star moon drum sock "
    "balloon apple cookie blanket stick bucket map key bell feather boot"
).split()
PLACES = "park garden forest house yard pond beach farm school kitchen hill river meadow room town".split()
ADJECTIVES = (
    "big small red blue happy sad little shiny soft old new pretty funny green tall brave kind "
    "sleepy silly yellow warm cold loud quiet fast slow"
).split()
VERBS = "play run jump sing dance swim read paint hide climb build look share help bake draw".split()
FEELINGS = "happy sad scared excited proud sorry angry surprised tired glad".split()
EXCLAMATIONS = ["Look", "Wow", "Oh no", "Yay", "Come here", "Help", "Thank you", "Let's go", "Be careful"]


class Stories:
    """Short stories from a handful of sentence shapes over a small vocabulary; now and then a rarer
    name or thing from a made-up pool (Zipf-weighted), as real stories have a long tail too."""

    def __init__(self, draw: Draw, rare_pool: int = 4000, rare_rate: float = 0.05) -> None:
        self.draw = draw
        self.rare = sorted({made_up_word(draw, draw.between(1, 3)) for _ in range(rare_pool)})
        self.rare_cumulative = zipf_weights(len(self.rare), 1.0)
        self.rare_rate = rare_rate

    def pick(self, common: list[str], capitalize: bool = False) -> str:
        draw = self.draw
        if draw.chance(self.rare_rate):
            word = draw.weighted(self.rare, self.rare_cumulative)
            return word.capitalize() if capitalize else word
        return draw.pick(common)

    def story(self) -> str:
        return story(self.draw, self.pick)


def story(draw: Draw, pick: Callable[..., str]) -> str:
    """One short story: a beginning, some middle sentences, an ending, in short paragraphs."""
    hero, friend = pick(NAMES, True), pick(NAMES, True)
    animal, thing, place = pick(ANIMALS), pick(THINGS), pick(PLACES)
    sentences = [
        draw.pick(["Once upon a time", "One day", "Long ago", "One sunny morning"])
        + f", there was a {draw.pick(ADJECTIVES)} {animal} named {hero}.",
        f"{hero} liked to {draw.pick(VERBS)} in the {place}.",
    ]
    for _ in range(draw.between(5, 15)):
        shape = draw.below(7)
        if shape == 0:
            sentences.append(f"One day, {hero} saw a {draw.pick(ADJECTIVES)} {pick(THINGS)}.")
        elif shape == 1:
            sentences.append(f'"{draw.pick(EXCLAMATIONS)}!" said {draw.pick([hero, friend])}.')
        elif shape == 2:
            sentences.append(f"{hero} and {friend} went to the {pick(PLACES)} to {draw.pick(VERBS)}.")
        elif shape == 3:
            sentences.append(f"{draw.pick([hero, friend])} felt {draw.pick(FEELINGS)}.")
        elif shape == 4:
            sentences.append(f"The {thing} was very {draw.pick(ADJECTIVES)}, and {hero} wanted to keep it.")
        elif shape == 5:
            sentences.append(f'"Can I {draw.pick(VERBS)} with you?" asked {friend}. "Yes!" said {hero}.')
        else:
            sentences.append(f"They played with the {thing} all day until the sun went down.")
    sentences.append(
        draw.pick(
            [
                f"{hero} learned that sharing is good.",
                f"From that day on, {hero} and {friend} were best friends.",
                f"{hero} was {draw.pick(FEELINGS)} and went home.",
                "The end.",
            ]
        )
    )
    # Paragraphs of two or three sentences, as the stories come.
    paragraphs, start = [], 0
    while start < len(sentences):
        size = draw.between(2, 3)
        paragraphs.append(" ".join(sentences[start : start + size]))
        start += size
    return "\n\n".join(paragraphs)


# ---- OpenWebText-like -------------------------------------------------------------------------

ONSETS = "b c d f g h j k l m n p r s t v w y z bl br ch cl cr dr fl fr gl gr pl pr sh sk sl sp st str th tr wh".split()
VOWELS = "a e i o u a e i o ea ee ai ou oo io ia y".split()
CODAS = ["", "", "", "n", "r", "s", "t", "l", "m", "nd", "st", "rt", "ng", "ck", "sh", "x", "ll", "nt"]
ACCENTED = "é è à ü ö ä ñ ç ø å".split()
PUNCTUATION_END = [".", ".", ".", ".", "?", "!"]
FUNCTION_WORDS = (
    "the of and to a in is that for it as was with be by on not he I this are or his from at which "
    "but have an they you were her she there been one all we their has would when if so no will can "
    "more about said what up out them also new its into than other some could time these two may first"
).split()


def made_up_word(draw: Draw, syllables: int) -> str:
    word = "".join(draw.pick(ONSETS) + draw.pick(VOWELS) + draw.pick(CODAS) for _ in range(syllables))
    if draw.chance(0.01):  # names and loanwords
        position = draw.below(len(word))
        word = word[:position] + draw.pick(ACCENTED) + word[position + 1 :]
    return word


class WebText:
    """Articles over a fixed Zipf vocabulary, with fresh rare words drawn throughout."""

    def __init__(self, draw: Draw, vocabulary: int = 60_000, new_word_rate: float = 0.006) -> None:
        self.draw = draw
        seen: set[str] = set(FUNCTION_WORDS)
        words = list(FUNCTION_WORDS)
        while len(words) < vocabulary:
            word = made_up_word(draw, draw.between(1, 4))
            if word not in seen:
                seen.add(word)
                words.append(word)
        self.words = words
        self.cumulative = zipf_weights(len(words), 1.07)
        self.new_word_rate = new_word_rate

    def word(self) -> str:
        draw = self.draw
        if draw.chance(self.new_word_rate):
            return made_up_word(draw, draw.between(2, 5))
        return draw.weighted(self.words, self.cumulative)

    def token(self) -> str:
        """A word, sometimes a number, a contraction or a capitalized name."""
        draw = self.draw
        roll = draw.rng.random()
        if roll < 0.02:
            return str(draw.between(0, 2030)) if draw.chance(0.7) else f"{draw.between(1, 999)},{draw.below(1000):03d}"
        word = self.word()
        if roll < 0.06:
            return word.capitalize()
        if roll < 0.075:
            return word + draw.pick(["'s", "'t", "'re", "'ll", "'ve", "'d"])
        return word

    def sentence(self) -> str:
        draw = self.draw
        parts = [self.token().capitalize()]
        for _ in range(draw.between(5, 30)):
            token = self.token()
            if draw.chance(0.07):
                token += draw.pick([",", ",", ",", ";", ":"])
            elif draw.chance(0.01):
                token = f"({token})"
            parts.append(token)
        text = " ".join(parts) + draw.pick(PUNCTUATION_END)
        if draw.chance(0.08):
            text = f"“{text}” {self.token()} said." if draw.chance(0.3) else f'"{text}"'
        if draw.chance(0.01):
            text += f" See https://www.{self.word()}.com/{self.word()}/{draw.between(100, 99_999)} for more."
        if draw.chance(0.01):
            text += f" {self.word().capitalize()} — {self.word()} {self.word()}."
        return text

    def article(self) -> str:
        draw = self.draw
        # Long-tailed lengths: most articles a few paragraphs, some very long.
        paragraphs = max(1, int(draw.between(1, 8) * (1 + 4 * draw.rng.random() ** 6)))
        body = [" ".join(self.sentence() for _ in range(draw.between(1, 7))) for _ in range(paragraphs)]
        title = " ".join(self.token().capitalize() for _ in range(draw.between(3, 9)))
        return title + "\n\n" + "\n\n".join(body)


def documents(profile: str, seed: int) -> Iterator[str]:
    draw = Draw(seed)
    make: Callable[[], str] = Stories(draw).story if profile == "tinystories" else WebText(draw).article
    while True:
        yield make()


def write_corpus(path: Path | None, profile: str, size: int, seed: int) -> int:
    """Write documents until `size` bytes are reached; returns the bytes written."""
    out = sys.stdout.buffer if path is None else open(path, "wb")
    written = 0
    try:
        block: list[bytes] = []
        block_bytes = 0
        for document in documents(profile, seed):
            data = (document + "\n" + ENDOFTEXT + "\n").encode("utf-8")
            block.append(data)
            block_bytes += len(data)
            written += len(data)
            if block_bytes >= 1 << 20 or written >= size:
                out.write(b"".join(block))
                block, block_bytes = [], 0
            if written >= size:
                return written
    finally:
        if path is not None:
            out.close()
    raise AssertionError("unreachable: documents() never ends")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", help="file to write, or - for standard output")
    parser.add_argument("--profile", choices=["tinystories", "owt"], default="tinystories")
    parser.add_argument("--size", type=parse_size, default=parse_size("100M"), help="bytes, e.g. 500K, 2.2G (100M)")
    parser.add_argument("--seed", type=int, default=0, help="the same seed gives the same corpus (0)")
    args = parser.parse_args(argv)
    path = None if args.output == "-" else Path(args.output)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        written = write_corpus(path, args.profile, args.size, args.seed)
    except BrokenPipeError:  # `make_corpus.py - | head`: stop quietly, and let the exit flush go nowhere
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    if path is not None:
        print(f"wrote {path}: {written:,} bytes, profile {args.profile}, seed {args.seed}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
