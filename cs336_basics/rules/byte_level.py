"""GPT-2's byte-level alphabet: each byte as a printable character, as vocab.json and merges.txt
write tokens. A leaf: it imports nothing of the package."""

from __future__ import annotations

from functools import cache


@cache
def gpt2_bytes_to_unicode() -> dict[int, str]:
    """GPT-2's table: printable bytes map to themselves, the other 68 to chr(256), chr(257), ..."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {byte: chr(byte) for byte in printable}
    for offset, byte in enumerate(byte for byte in range(256) if byte not in table):
        table[byte] = chr(256 + offset)
    return table


@cache
def gpt2_unicode_to_bytes() -> dict[str, int]:
    return {char: byte for byte, char in gpt2_bytes_to_unicode().items()}
