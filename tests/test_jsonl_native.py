"""The native JSON-lines reader (`_count_cpp.json_line_texts`, cpp/io/jsonl.cpp) against json.loads.

The native side reads the common record and hands every other line back to the Python path, so
reading a file must give the same documents, the same error (message, file:line) and the same
skipped count as the pure path (`ingest.jsonl.read_json_lines` with the native reader taken away)."""

from __future__ import annotations

import json
import os
import tempfile
from functools import partial
from unittest import mock

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from cs336_basics.ingest import jsonl, sources
from cs336_basics.rules.contract import BPEInputError

native = jsonl.native_json_line_texts()
pytestmark = pytest.mark.skipif(
    native is None, reason="cs336_basics.native._count_cpp is not built or CS336_PURE_PYTHON is set"
)

FIELDS = ["text", "tëxt", "", "a"]
OTHER_KEYS = ["id", "a", "b", "tëxt", "text", "", "😀"]
SPACES = [b"", b" ", b"\t", b"\r", b"  ", b" \t\r "]
ODD_SPACES = [b"\x0b", b"\x0c", b"\xc2\xa0", b"\x00"]


# ---------------------------------------------------------------------------------------------
# Lines: mostly records, written every way JSON allows, with every kind of damage mixed in

CHARACTERS = st.one_of(
    st.characters(codec="utf-8"),  # no surrogates
    st.sampled_from(
        ['"', "\\", "/", "\b", "\f", "\n", "\r", "\t", "\x00", "\x1f", "\x7f", "é", "€", "😀", "\U0010ffff"]
    ),
)
SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
LONE_SURROGATES = ["\\ud800", "\\udbff", "\\udc00", "\\uDFFF", "\\ud83d\\u0041", "\\ud83d\\ud83d", "\\ude00\\ud83d"]


def u_escape(code: int, upper: bool) -> str:
    text = f"\\u{code:04x}"
    return text.upper().replace("\\U", "\\u") if upper else text


@st.composite
def json_string(draw: st.DrawFn) -> bytes:
    """A JSON string literal, each character written raw or escaped, sometimes wrongly."""
    pieces = ['"']
    for char in draw(st.lists(CHARACTERS, max_size=12)):
        how = draw(st.integers(0, 9))
        code = ord(char)
        if how == 0 and code > 0xFFFF:  # a surrogate pair
            high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
            pieces.append(u_escape(high, draw(st.booleans())) + u_escape(low, draw(st.booleans())))
        elif how == 1 and code <= 0xFFFF:
            pieces.append(u_escape(code, draw(st.booleans())))
        elif how == 2 and char in SHORT_ESCAPES:
            pieces.append(SHORT_ESCAPES[char])
        elif how == 3 and char in SHORT_ESCAPES or code < 0x20:
            pieces.append(SHORT_ESCAPES.get(char) or u_escape(code, False) if draw(st.integers(0, 19)) else char)
        elif char in '"\\' and draw(st.integers(0, 19)):
            pieces.append(SHORT_ESCAPES[char])
        else:
            pieces.append(char)
        if draw(st.integers(0, 99)) == 0:
            pieces.append(draw(st.sampled_from(LONE_SURROGATES + ["\\x", "\\u12", "\\u12g4", "\\"])))
    pieces.append('"')
    return "".join(pieces).encode("utf-8")


INTEGERS = st.integers(-(10**30), 10**30).map(lambda n: str(n).encode())
FLOATS = st.floats(allow_nan=False, allow_infinity=False).map(lambda x: repr(x).encode())
NUMBERS = st.one_of(
    INTEGERS,
    FLOATS,
    INTEGERS,
    FLOATS,
    st.sampled_from([b"0", b"-0", b"1.5e3", b"1E+5", b"2e-07", b"0.0e-0", b"1" * 99, b"9" * 400 + b".5"]),
    st.sampled_from(
        [b"01", b"-", b"1.", b".5", b"1e", b"+1", b"0x1f", b"1.2.3", b"-01", b"1e+", b"NaN", b"Infinity",
         b"-Infinity", b"1" * 5000, b"tru", b"nul", b"True"]
    ),
)


def member(key: bytes, value: bytes, space: st.DrawFn) -> bytes:
    return key + space() + b":" + space() + value


@st.composite
def json_value(draw: st.DrawFn, depth: int = 0) -> bytes:
    kind = draw(st.integers(0, 6 if depth < 3 else 3))
    if kind == 0:
        return draw(json_string())
    if kind == 1:
        return draw(NUMBERS)
    if kind == 2 or kind == 3:
        return draw(st.sampled_from([b"true", b"false", b"null"]))
    space = partial(draw, st.sampled_from(SPACES))
    if kind == 4:
        items = draw(st.lists(json_value(depth + 1), max_size=3))
        return b"[" + space() + (space() + b"," + space()).join(items) + space() + b"]"
    keys = draw(st.lists(st.sampled_from(OTHER_KEYS), max_size=3))
    members = [member(json.dumps(key).encode(), draw(json_value(depth + 1)), space) for key in keys]
    return b"{" + space() + b",".join(members) + space() + b"}"


@st.composite
def record_line(draw: st.DrawFn, field: str) -> bytes:
    space = partial(draw, st.sampled_from(SPACES))
    keys = draw(st.lists(st.sampled_from([key for key in OTHER_KEYS if key != field]), max_size=3))
    # Mostly the field once; sometimes missing, twice, or a key that is only like it.
    for _ in range(draw(st.sampled_from([1, 1, 1, 1, 1, 1, 0, 2]))):
        keys.insert(draw(st.integers(0, len(keys))), field)
    members = []
    for key in keys:
        way = draw(st.integers(0, 4))
        if way == 0:  # every character escaped: "t\u0065xt"
            written = ('"' + "".join(u_escape(ord(c), False) for c in key) + '"').encode()
        elif way == 1:
            written = json.dumps(key, ensure_ascii=False).encode()
        else:
            written = json.dumps(key).encode()
        value = draw(json_string()) if key == field and draw(st.integers(0, 9)) else draw(json_value())
        members.append(member(written, value, space))
    line = space() + b"{" + space() + (space() + b"," + space()).join(members) + space() + b"}" + space()
    damage = draw(st.integers(0, 29))
    if damage == 0 and line:  # a byte changed: invalid UTF-8, a NUL, a stray character
        at = draw(st.integers(0, len(line) - 1))
        damaged = draw(st.sampled_from([b"\xff", b"\xed\xa0\x80", b"\xc3", b"\x00", b",", b"}", b'"']))
        line = line[:at] + damaged + line[at + 1 :]
    elif damage == 1:
        line = b"\xef\xbb\xbf" + line
    elif damage == 2:
        line = line + draw(st.sampled_from([b"x", b",", b"{}", b"\x0b", b"\x0c"]))
    elif damage == 3:
        line = draw(st.sampled_from(ODD_SPACES)) + line
    elif damage == 4 and line:
        line = line[: draw(st.integers(0, len(line) - 1))]
    return line


def any_line(field: str) -> st.SearchStrategy[bytes]:
    return st.one_of(
        record_line(field),
        record_line(field),
        record_line(field),
        record_line(field),
        record_line(field),
        st.lists(st.sampled_from([b" ", b"\t", b"\r", b"\x0b", b"\x0c"]), max_size=4).map(b"".join),  # blank
        json_value(),  # a JSON value, most not an object
        st.binary(max_size=20).map(lambda data: data.replace(b"\n", b"")),
    )


@st.composite
def jsonl_file(draw: st.DrawFn) -> tuple[str, bytes]:
    field = draw(st.sampled_from(FIELDS))
    lines = draw(st.lists(any_line(field), max_size=8))
    endings = [draw(st.sampled_from([b"\n", b"\r\n"])) for _ in lines]
    data = b"".join(line + ending for line, ending in zip(lines, endings))
    if lines and draw(st.booleans()):
        data = data[: -len(endings[-1])]  # no newline after the last line
    return field, data


# ---------------------------------------------------------------------------------------------
# Reading a file both ways


def read(
    path: str, field: str, pure: bool, skip: bool, block_bytes: int, byte_range=None, laid_out: bool = False
) -> tuple:
    """What `read_json_lines` gives: the documents yielded, then the error (type and message) or None,
    and the skipped count and first message. `laid_out`: read a block at a time (LaidOutDocuments,
    whose fallback records come after the others: the documents are then sorted, and left out when
    reading stopped at an error)."""
    source = sources.InputFile(path, "jsonl")
    skipped = sources.BadRecords() if skip else None
    documents: list[bytes] = []
    error = None
    with (
        mock.patch.object(jsonl, "read_blocks", partial(sources.read_blocks, block_bytes=block_bytes)),
        mock.patch.object(jsonl, "native_json_line_texts", (lambda: None) if pure else native_reader),
        mock.patch.object(jsonl, "native_json_line_documents", (lambda: None) if pure else native_documents),
    ):
        try:
            for item in jsonl.read_json_lines(source, field, skipped, byte_range, laid_out):
                if laid_out:
                    assert isinstance(item, sources.LaidOutDocuments) and item.count > 0
                    documents.extend(item)
                else:
                    documents.append(item)
        except (BPEInputError, RecursionError) as caught:
            error = (type(caught).__name__, str(caught))
    if laid_out:
        documents = [] if error else sorted(documents)
    return documents, error, skipped and (skipped.count, skipped.first)


native_reader = jsonl.native_json_line_texts
native_documents = jsonl.native_json_line_documents


def assert_same_both_ways(data: bytes, field: str, block_bytes: int = 1 << 20, ranges: int = 0) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "corpus.jsonl")
        with open(path, "wb") as file:
            file.write(data)
        for skip in (False, True):
            pure = read(path, field, True, skip, block_bytes)
            assert read(path, field, False, skip, block_bytes) == pure, (data, field, skip)
            # A block at a time, for the counter to read in place: the same documents and errors.
            documents, error, skipped = pure
            laid_out = ([] if error else sorted(documents), error, skipped)
            assert read(path, field, False, skip, block_bytes, laid_out=True) == laid_out, (data, field, skip)
            assert read(path, field, True, skip, block_bytes, laid_out=True) == laid_out, (data, field, skip)
        if ranges:
            for byte_range in jsonl.jsonl_ranges(sources.InputFile(path, "jsonl"), ranges):
                pure = read(path, field, True, True, block_bytes, byte_range)
                assert read(path, field, False, True, block_bytes, byte_range) == pure, (data, byte_range)
                documents, error, skipped = pure
                laid_out = ([] if error else sorted(documents), error, skipped)
                assert read(path, field, False, True, block_bytes, byte_range, laid_out=True) == laid_out


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(jsonl_file(), st.sampled_from([1, 7, 64, 1 << 20]), st.sampled_from([0, 0, 16, 100]))
def test_files_read_the_same_both_ways(case: tuple[str, bytes], block_bytes: int, ranges: int) -> None:
    field, data = case
    assert_same_both_ways(data, field, block_bytes, ranges)


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.sampled_from(FIELDS).flatmap(lambda field: st.tuples(st.just(field), any_line(field))))
def test_each_line_is_text_only_when_json_loads_agrees(case: tuple[str, bytes]) -> None:
    field, line = case
    assume(b"\n" not in line)  # a raw newline in a string: two lines
    for data in (line, line + b"\n"):
        (item,) = native(data, field) or [None]  # "" holds no line: nothing to judge
        event("text" if isinstance(item, bytes) else "blank" if item is None else "fallback")
        if isinstance(item, bytes):
            record = json.loads(line)
            assert type(record) is dict and type(record[field]) is str
            assert record[field].encode("utf-8") == item
        elif item is None:
            assert set(line) <= set(b" \t\r")
        else:
            assert item == (0, len(line))


LINES = [
    b'{"text": "plain"}',
    b'{"a": 01, "text": "x"}',
    b'{"a": 1' + b"0" * 5000 + b', "text": "x"}',  # json.loads: int past 4300 digits, an error
    b'{"a": ' + b"9" * 5000 + b'.5, "text": "x"}',  # a float that long is fine
    b'{"a": NaN, "text": "x"}',
    b'{"a": -Infinity, "text": "x"}',
    b'{"text": "x", "text": "y"}',
    b'{"t\\u0065xt": "escaped key"}',
    b'{"text": "\\ud83d\\ude00 pair"}',
    b'{"text": "\\ud83d lone"}',
    b'{"other": "\\udc00", "text": "fine"}',
    b'{"text": "\xed\xa0\x80"}',
    b'\xef\xbb\xbf{"text": "bom"}',
    b'{"text": "tab\there"}',
    b'{"text": 5}',
    b'{"text": null}',
    b"{}",
    b"[]",
    b'"text"',
    b"\x0b",
    b"\x0c \t",
    b' \t\r',
    b'{"a": ' + b"[" * 100000 + b"]" * 100000 + b', "text": "deep"}',
    b'{"a": ' + b"[" * 63 + b"]" * 63 + b', "text": "nested"}',
    b'{"text": "x"}\x0b',
    b'{"text": "x",}',
    b'{"text": "x" "a": 1}',
]


@pytest.mark.parametrize("line", LINES, ids=range(len(LINES)))
def test_known_lines(line: bytes) -> None:
    assert_same_both_ways(b'{"text": "first"}\n' + line + b"\n" + b'{"text": "last"}', "text")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=30), min_size=1, max_size=10), st.booleans())
def test_ordinary_records_are_read_natively(texts: list[str], ensure_ascii: bool) -> None:
    lines = [
        json.dumps({"id": index, "text": text, "meta": {"n": [1.5, -2e-3, None, True]}}, ensure_ascii=ensure_ascii)
        for index, text in enumerate(texts)
    ]
    data = "\n".join(lines).encode("utf-8")
    assert native(data, "text") == [text.encode("utf-8") for text in texts]
    assert native(memoryview(data + b"\n"), "text") == [text.encode("utf-8") for text in texts]
