"""A built-in demo corpus: short children's stories in the spirit of TinyStories, made on the spot.

It needs no download, is the same for the same seed on every machine, and exercises what real
training data does: documents separated by `<|endoftext|>`, contractions, digits, punctuation,
quotes, blank lines, and a few names with multi-byte UTF-8 characters.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from ..rules.contract import ENDOFTEXT

DEFAULT_DEMO_BYTES = 4_000_000

NAMES = ["Lily", "Tom", "Mia", "Ben", "Sue", "Max", "Zoë", "José", "Anaïs", "Łukasz", "Søren", "Yuki", "Amélie"]
ANIMALS = ["cat", "dog", "bird", "frog", "bunny", "bear", "duck", "fox", "owl", "mouse"]
PLACES = ["park", "garden", "forest", "beach", "kitchen", "school", "river", "hill", "farm", "library"]
THINGS = ["ball", "kite", "box", "cake", "flower", "book", "hat", "boat", "drum", "shell", "map", "key"]
COLOURS = ["red", "blue", "green", "yellow", "big", "little", "shiny", "soft", "old", "funny"]
FEELINGS = ["happy", "sad", "scared", "excited", "tired", "proud", "surprised", "sleepy"]
VERBS = ["found", "lost", "saw", "wanted", "made", "shared", "painted", "hid", "carried", "dropped"]

OPENINGS = [
    "Once upon a time, there was a {colour} {animal} named {name}.",
    "One day, {name} went to the {place} with a {colour} {thing}.",
    "{name} lived near the {place}. {name} had {number} {thing}s.",
    "It was a sunny day in the {place}, and {name} felt {feeling}.",
]
MIDDLES = [
    '{name} {verb} a {colour} {thing} and said, "Look! It\'s so {colour}!"',
    "The {animal} didn't want to share the {thing}. {name} was {feeling}.",
    '"Can we play?" asked {name}. "Yes, we\'ll play at the {place}," said the {animal}.',
    "They counted {number} {thing}s, then {number2} more. That's a lot of {thing}s!",
    "{name} {verb} the {thing} near the {place}. It was {colour} and {colour2}.",
    "Suddenly, the {animal} ran away! {name} looked everywhere: under the {thing}, behind the {place}.",
    "\"I'm {feeling},\" said {name}. \"You're my best friend,\" said the {animal}.",
]
ENDINGS = [
    "In the end, {name} and the {animal} were {feeling} and played all day.",
    "From that day on, {name} always kept the {thing} safe.",
    "{name} smiled. The {colour} {thing} was the best gift of all.",
    "The moral of the story is: always share, even when you're {feeling}.",
]


# Invented words from syllables give the long tail of rare words real corpora have, so large
# vocabularies can be reached (a few hundred fixed words would run out of pairs early).
ONSETS = ["b", "br", "ch", "d", "f", "fl", "g", "gr", "h", "j", "k", "l", "m", "n", "p", "pl", "r", "s", "sh", "st",
          "t", "tr", "v", "w", "z", "ž", "ñ"]
VOWELS = ["a", "e", "i", "o", "u", "ai", "ee", "oo", "ou", "é", "ü", "ø"]
CODAS = ["", "", "n", "m", "r", "l", "st", "ck", "sh", "nd"]


def invented_word(rng: random.Random) -> str:
    return "".join(rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS) for _ in range(rng.randint(1, 3)))


def _fill(template: str, rng: random.Random) -> str:
    rare = rng.random() < 0.3
    return template.format(
        name=invented_word(rng).capitalize() if rare else rng.choice(NAMES),
        animal=rng.choice(ANIMALS),
        place=rng.choice(PLACES),
        thing=invented_word(rng) if rare else rng.choice(THINGS),
        colour=rng.choice(COLOURS),
        colour2=rng.choice(COLOURS),
        feeling=rng.choice(FEELINGS),
        verb=rng.choice(VERBS),
        number=rng.randint(2, 12),
        number2=rng.randint(1, 99),
    )


def demo_story(rng: random.Random) -> str:
    middle = " ".join(_fill(rng.choice(MIDDLES), rng) for _ in range(rng.randint(2, 6)))
    story = f"{_fill(rng.choice(OPENINGS), rng)} {middle}"
    if rng.random() < 0.5:  # a paragraph break, as many real stories have
        story += "\n\n"
    else:
        story += " "
    return story + _fill(rng.choice(ENDINGS), rng)


def write_demo_corpus(path: str | os.PathLike, size_bytes: int = DEFAULT_DEMO_BYTES, seed: int = 0) -> Path:
    """Write about `size_bytes` of stories separated by `<|endoftext|>` to `path` (atomically)."""
    from ..outputs.serialization import write_atomically

    rng = random.Random(seed)
    stories: list[str] = []
    written = 0
    while written < size_bytes:
        story = demo_story(rng) + f"\n{ENDOFTEXT}\n"
        stories.append(story)
        written += len(story.encode("utf-8"))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, "".join(stories).encode("utf-8"))
    return path
