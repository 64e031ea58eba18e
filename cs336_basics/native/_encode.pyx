# cython: language_level=3
"""The binding to `bpe::Encoder` (cpp/encode/bpe_encode.hpp), the compiled path of cs336_basics.tokenizer.

It only converts types: the tokenizer's tables into the C++ encoder once, then per call the text's
UTF-8 bytes in and an `array('I')` of ids out (the C++ writes into the array itself), with the GIL
released while the C++ runs. Checks of the vocabulary and merges, and the error messages, live in
tokenizer.py.
"""

import os

from ..rules.pattern import check_native_scanners

cimport cs336_basics.native._libbpe as lib
from cpython.array cimport array, clone, resize
from cpython.list cimport PyList_New
from cpython.ref cimport PyObject
from libc.stdlib cimport free, malloc
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_DATA, PyUnicode_GET_LENGTH, PyUnicode_KIND
from libc.errno cimport errno
from libc.stdint cimport uint16_t, uint32_t
from libcpp cimport bool as cbool
from libcpp.pair cimport pair
from libcpp.string cimport string
from libcpp.string_view cimport string_view
from libcpp.vector cimport vector
from posix.unistd cimport write

from cs336_basics.native._progress cimport ProgressRelay, relay_progress, start_relay

# Raw list access, without Cython's reference counting of each item: encode_list stores millions.
cdef extern from "Python.h":
    PyObject** PySequence_Fast_ITEMS(object sequence)
    void Py_INCREF(PyObject* value)
    Py_ssize_t Py_REFCNT(PyObject* value)
    void Py_SET_REFCNT(PyObject* value, Py_ssize_t count)
    PyObject* PyLong_FromUnsignedLong_raw "PyLong_FromUnsignedLong"(unsigned long value)

# The named scanners of the C++ (kNamedScanners), checked against pattern.py's rows at load.
NATIVE_PATTERNS = tuple(lib.named_scanner_name(index).decode() for index in range(lib.kNamedScannerCount))
# Where the C++ cuts each scanner's text into chunks when it encodes on threads (a row's `cuts`).
NATIVE_CUTS = {
    lib.named_scanner_name(index).decode(): lib.named_scanner_cuts(index).decode()
    for index in range(lib.kNamedScannerCount)
}
check_native_scanners(NATIVE_PATTERNS, NATIVE_CUTS)

cdef array UINT32_ARRAY = array("I")
cdef array UINT16_ARRAY = array("H")
assert UINT32_ARRAY.itemsize == sizeof(uint32_t), "array('I') must hold 32-bit unsigned ints"
assert UINT16_ARRAY.itemsize == sizeof(uint16_t), "array('H') must hold 16-bit unsigned ints"
# encode_list shares one int object per id below this (a list of ids then costs no int allocation).
cdef size_t SHARED_INTS_LIMIT = 1 << 22
# encode cuts longer texts into pieces of about this many bytes (see NativeEncoder.encode_utf8).
cdef size_t PIECE_BYTES = 1 << 20
# Strs of at least this many characters are transcoded to UTF-8 with the GIL released.
cdef size_t TRANSCODE_WITHOUT_GIL = 1 << 16


# The UTF-8 copy CPython keeps inside a non-ASCII str once something asked for it (a str's
# PyUnicode_AsUTF8), or NULL: read, never created, so encoding leaves no copy behind.
cdef extern from *:
    """
    static const char* cs336_existing_utf8(PyObject* text, Py_ssize_t* size) {
        if (!PyUnicode_IS_COMPACT(text) || PyUnicode_IS_ASCII(text)) return NULL;
        PyCompactUnicodeObject* compact = (PyCompactUnicodeObject*)text;
        *size = compact->utf8_length;
        return compact->utf8;
    }
    """
    const char* existing_utf8 "cs336_existing_utf8"(object text, Py_ssize_t* size)


cdef class _Utf8:
    """A str's UTF-8 bytes for the C++: CPython's own copy when it has one (always for an ASCII
    str; no copy made), else our transcoding of its code units (cpp/io/code_units.hpp), several times
    faster than str.encode and freed with this object (rather than a UTF-8 copy kept alive inside
    the caller's str)."""

    cdef object owner
    cdef char* transcoded
    cdef string_view view

    def __cinit__(self, str text):
        cdef const char* data
        cdef Py_ssize_t size
        cdef size_t units, written
        cdef int unit_bytes
        cdef const void* code_units
        self.owner = text
        if text.isascii():
            data = PyUnicode_AsUTF8AndSize(text, &size)
            self.view = string_view(data, <size_t>size)
            return
        data = existing_utf8(text, &size)
        if data != NULL:
            self.view = string_view(data, <size_t>size)
            return
        units = <size_t>PyUnicode_GET_LENGTH(text)
        unit_bytes = PyUnicode_KIND(text)
        code_units = PyUnicode_DATA(text)
        self.transcoded = <char*>malloc(units * lib.max_utf8_bytes_per_unit(unit_bytes))
        if self.transcoded == NULL:
            raise MemoryError()
        if units >= TRANSCODE_WITHOUT_GIL:
            with nogil:
                written = lib.utf8_from_code_units(code_units, units, unit_bytes, self.transcoded)
        else:
            written = lib.utf8_from_code_units(code_units, units, unit_bytes, self.transcoded)
        if written == lib.kSurrogateInText:
            text.encode("utf-8")  # raises the UnicodeEncodeError that the tokenizer words
            raise AssertionError("str.encode accepted a surrogate")
        self.view = string_view(self.transcoded, written)

    def __dealloc__(self):
        free(self.transcoded)


cdef struct IdWriter:
    # Where encode_file's ids go: appended to `collected`, or written to the file descriptor `fd` as
    # `id_bytes`-byte unsigned ints in the machine's byte order (`narrow` holds the 16-bit copy).
    vector[uint32_t]* collected
    vector[uint16_t]* narrow
    int fd
    int id_bytes
    int write_errno  # set when a write failed
    bint report_progress
    ProgressRelay relay


cdef bint write_all(int fd, const char* data, size_t size, int* failure) noexcept nogil:
    cdef Py_ssize_t written
    while size > 0:
        written = write(fd, data, size)
        if written < 0:
            if errno == 4:  # EINTR: a signal arrived; its handler runs at the next progress call
                continue
            failure[0] = errno
            return False
        data += written
        size -= <size_t>written
    return True


cdef cbool take_ids(void* context, const uint32_t* ids, size_t count, size_t bytes_done) noexcept nogil:
    cdef IdWriter* writer = <IdWriter*>context
    cdef size_t i
    if writer.collected != NULL:
        writer.collected.insert(writer.collected.end(), ids, ids + count)
    elif writer.id_bytes == 2:
        writer.narrow.resize(count)
        for i in range(count):
            writer.narrow[0][i] = <uint16_t>ids[i]
        if not write_all(writer.fd, <const char*>writer.narrow.data(), count * 2, &writer.write_errno):
            return True
    elif not write_all(writer.fd, <const char*>ids, count * 4, &writer.write_errno):
        return True
    return writer.report_progress and relay_progress(&writer.relay, bytes_done)


cdef class NativeEncoder:
    """`byte_ids`: the id of each byte 0..255; `merges`: (left id, right id, merged id) in rank
    order; `special_tokens`: (UTF-8 bytes, id) pairs; `cache_slots`: size of each thread's cache;
    `pattern`: the pre-tokenizer, by its native scanner's name (`pattern.NamedPattern.scanner`)."""

    cdef lib.Encoder* encoder
    cdef list ints  # ints[i] is i, for every id below SHARED_INTS_LIMIT
    cdef bint all_ids_shared  # every id has its int in `ints`
    cdef vector[Py_ssize_t] uses  # encode_list's references per shared int, zero between calls

    def __cinit__(self, list byte_ids, list merges, list special_tokens, size_t cache_slots, str pattern="gpt2",
                  unsigned unicode_table=0):
        cdef lib.PretokenPattern code = lib.PretokenPattern.kGpt2  # found below
        cdef bytes spelled = pattern.encode()
        if not lib.find_named_scanner(string_view(<const char*>spelled, len(spelled)), code):
            raise ValueError(f"the compiled encoder runs the patterns {NATIVE_PATTERNS}, not {pattern!r}")
        largest = max(max(byte_ids), max([merged for _, _, merged in merges], default=0),
                      max([token_id for _, token_id in special_tokens], default=0))
        self.ints = list(range(min(largest + 1, SHARED_INTS_LIMIT)))
        self.all_ids_shared = largest < SHARED_INTS_LIMIT
        self.uses.assign(len(self.ints), 0)
        cdef vector[uint32_t] c_byte_ids = byte_ids
        cdef vector[lib.MergeRule] c_merges
        cdef lib.MergeRule rule
        c_merges.reserve(len(merges))
        for rule.left, rule.right, rule.merged in merges:
            c_merges.push_back(rule)
        cdef vector[pair[string, uint32_t]] c_specials = special_tokens
        self.encoder = new lib.Encoder(c_byte_ids, c_merges, c_specials, cache_slots, code, unicode_table)

    def __dealloc__(self):
        del self.encoder

    @property
    def cache_slots(self) -> int:
        return self.encoder.cache_slots()

    def encode(self, str text) -> array:
        """The ids of `text`, special tokens included."""
        return self.encode_utf8(_Utf8(text))

    cdef array encode_utf8(self, _Utf8 utf8):
        # A long text goes in pieces, the array sized for the ids so far plus one piece's worst case
        # (one id per byte, and the spare the C++ asks for) and grown by half when short: an
        # array of the whole text's worst case (four bytes per byte of text) would be mapped afresh
        # by the allocator on every call, its pages faulted in again as the ids are written.
        cdef size_t size = utf8.view.size()
        cdef vector[size_t] cuts
        if size <= PIECE_BYTES:
            cuts.push_back(0)
            cuts.push_back(size)
        else:
            cuts = self.encoder.pieces(utf8.view, PIECE_BYTES)
        # A third of an id per byte to start with: GPT-2's vocabulary gives some 0.35 on mixed text.
        cdef size_t capacity = min(size, size // 3 + PIECE_BYTES) + lib.kEncoderSpareIds
        cdef array result = clone(UINT32_ARRAY, <Py_ssize_t>capacity, False)
        cdef size_t count = 0, piece, needed
        cdef string_view text
        for piece in range(cuts.size() - 1):
            text = utf8.view.substr(cuts[piece], cuts[piece + 1] - cuts[piece])
            needed = count + text.size() + lib.kEncoderSpareIds
            if needed > capacity:
                capacity = max(needed, capacity + capacity // 2)
                resize(result, <Py_ssize_t>capacity)
            with nogil:
                count += self.encoder.encode(text, <uint32_t*>result.data.as_voidptr + count)
        resize(result, <Py_ssize_t>count)
        return result

    def encode_list(self, str text) -> list:
        """The ids of `text` as a list of ints, each id's int object shared (no allocation per id)."""
        cdef array id_array = self.encode_utf8(_Utf8(text))
        cdef const uint32_t* ids = <const uint32_t*>id_array.data.as_voidptr
        cdef size_t count = len(id_array), i
        cdef PyObject** shared_ints = PySequence_Fast_ITEMS(self.ints)
        cdef size_t shared = len(self.ints)
        cdef list result = PyList_New(<Py_ssize_t>count)
        cdef PyObject** items = PySequence_Fast_ITEMS(result)
        cdef PyObject* value
        cdef Py_ssize_t* uses = self.uses.data()
        cdef uint32_t token
        if self.all_ids_shared:
            # The list's references counted per id in the encoder's array (zero between calls, the GIL
            # held throughout) and added once per id: an increment per item would write to a different
            # int object (32 bytes each) every time. No allocation per call, no pass over every id.
            for i in range(count):
                items[i] = shared_ints[ids[i]]
                uses[ids[i]] += 1
            for i in range(count):
                token = ids[i]
                if uses[token] != 0:
                    Py_SET_REFCNT(shared_ints[token], Py_REFCNT(shared_ints[token]) + uses[token])
                    uses[token] = 0
            return result
        for i in range(count):
            if ids[i] < shared:
                value = shared_ints[ids[i]]
                Py_INCREF(value)
            else:
                value = PyLong_FromUnsignedLong_raw(ids[i])
                if value == NULL:  # out of memory: the list so far is freed with `result`
                    raise MemoryError()
            items[i] = value  # the list owns the reference
        return result

    def encode_batch(self, list texts, int num_threads) -> list:
        """The ids of each text, encoded on `num_threads` threads (<= 0: OpenMP's default)."""
        cdef list sources = [_Utf8(text) for text in texts]
        cdef list results = []
        cdef vector[string_view] views
        cdef vector[uint32_t*] outs
        cdef vector[size_t] counts = vector[size_t](len(sources))
        cdef _Utf8 source
        cdef array ids
        for source in sources:
            ids = clone(UINT32_ARRAY, <Py_ssize_t>(source.view.size() + lib.kEncoderSpareIds), False)
            results.append(ids)
            views.push_back(source.view)
            outs.push_back(<uint32_t*>ids.data.as_voidptr)
        with nogil:
            self.encoder.encode_batch(views, outs.data(), counts.data(), num_threads)
        for i in range(len(results)):
            resize(results[i], <Py_ssize_t>counts[i])
        return results

    def encode_file(self, path, int num_threads, size_t chunk_bytes, int id_bytes, int fd=-1, progress=None):
        """The ids of the UTF-8 file at `path` as an array of `id_bytes`-byte ints ('H' or 'I'), or,
        given a file descriptor `fd`, written there in the machine's byte order, returning how many.
        `progress` (optional) is called with the bytes encoded since its previous call."""
        cdef string c_path = os.fsencode(path)
        cdef vector[uint32_t] collected
        cdef vector[uint16_t] narrow
        cdef IdWriter writer
        cdef size_t total
        errors = []
        writer.collected = &collected if fd < 0 else NULL
        writer.narrow = &narrow
        writer.fd = fd
        writer.id_bytes = id_bytes
        writer.write_errno = 0
        writer.report_progress = progress is not None
        start_relay(&writer.relay, progress, errors, 1)
        with nogil:
            total = self.encoder.encode_file(c_path, num_threads, chunk_bytes, take_ids, &writer)
        if errors:
            raise errors[0]
        if writer.write_errno:
            raise OSError(writer.write_errno, os.strerror(writer.write_errno))
        if fd >= 0:
            return total
        cdef array result = clone(UINT32_ARRAY if id_bytes == 4 else UINT16_ARRAY, <Py_ssize_t>total, False)
        cdef uint16_t* narrow_out = <uint16_t*>result.data.as_voidptr
        cdef uint32_t* wide_out = <uint32_t*>result.data.as_voidptr
        cdef size_t i
        with nogil:
            if id_bytes == 4:
                for i in range(total):
                    wide_out[i] = collected[i]
            else:
                for i in range(total):
                    narrow_out[i] = <uint16_t>collected[i]
        return result
