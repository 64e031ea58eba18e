"""Text: UTF-8 bytes, compressed or not; the fallback when nothing says another format. Plain text is
counted in place (memory-mapped, random access); compressed text is decompressed in blocks."""

from __future__ import annotations

import json

from ..rules.contract import BPEInputError
from .sources import InputFile, read_blocks
from .table import InputFormat

# How much of a text file's decompressed start is read to look for a JSON first line.
_SNIFF_BYTES = 1 << 20


def _refuse_json_lines_as_text(source: InputFile, text_field: str, detected: bool) -> None:
    """Training on JSON syntax as if it were prose gives a wrong tokenizer silently: refuse a file
    taken for text by its name when the first non-empty line of the (decompressed) text is a JSON
    object holding `text_field`."""
    if not detected:
        return
    head = bytearray()
    for block in read_blocks(source, block_bytes=64 << 10):
        head += block
        stripped = head.lstrip()
        if b"\n" in stripped or len(head) >= _SNIFF_BYTES:
            break
    first_line = bytes(head).lstrip().split(b"\n", 1)[0].strip()
    if not first_line.startswith(b"{"):
        return
    try:
        record = json.loads(first_line)
    except ValueError:
        return
    if isinstance(record, dict) and isinstance(record.get(text_field), str):
        raise BPEInputError(
            f"{source.path} looks like JSON lines (its first line is a JSON object with a {text_field!r} field), "
            f"not text: choose with --format jsonl (format='jsonl') to train on that field, or --format text "
            f"(format='text') to train on the raw lines"
        )


FORMAT = InputFormat("text", "text", check=_refuse_json_lines_as_text)
