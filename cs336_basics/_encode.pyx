# cython: language_level=3
"""The binding to `bpe::Encoder` (cpp/bpe_encode.hpp), the compiled path of cs336_basics.tokenizer.

It only converts types: the tokenizer's tables into the C++ encoder once, then per call the text's
UTF-8 bytes in and an `array('I')` of ids out, with the GIL released while the C++ runs. Checks of
the vocabulary and merges, and the error messages, live in tokenizer.py.
"""

cimport cs336_basics._libbpe as lib
from cpython.array cimport array, clone
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.stdint cimport uint32_t
from libc.string cimport memcpy
from libcpp.pair cimport pair
from libcpp.string cimport string
from libcpp.string_view cimport string_view
from libcpp.vector cimport vector

cdef array UINT32_ARRAY = array("I")
assert UINT32_ARRAY.itemsize == sizeof(uint32_t), "array('I') must hold 32-bit unsigned ints"


cdef class NativeEncoder:
    """`byte_ids`: the id of each byte 0..255; `merges`: (left id, right id, merged id) in rank
    order; `special_tokens`: (UTF-8 bytes, id) pairs; `cache_slots`: size of the word cache."""

    cdef lib.Encoder* encoder

    def __cinit__(self, list byte_ids, list merges, list special_tokens, size_t cache_slots):
        cdef vector[uint32_t] c_byte_ids = byte_ids
        cdef vector[lib.MergeRule] c_merges
        cdef lib.MergeRule rule
        c_merges.reserve(len(merges))
        for rule.left, rule.right, rule.merged in merges:
            c_merges.push_back(rule)
        cdef vector[pair[string, uint32_t]] c_specials = special_tokens
        self.encoder = new lib.Encoder(c_byte_ids, c_merges, c_specials, cache_slots)

    def __dealloc__(self):
        del self.encoder

    @property
    def cache_slots(self) -> int:
        return self.encoder.cache_slots()

    def encode(self, str text) -> array:
        """The ids of `text`, special tokens included."""
        cdef bytes utf8
        cdef const char* data
        cdef Py_ssize_t size
        if text.isascii():  # then CPython stores the str as its own UTF-8: no copy
            data = PyUnicode_AsUTF8AndSize(text, &size)
        else:  # a temporary copy, rather than a UTF-8 cache kept alive inside the caller's str
            utf8 = text.encode("utf-8")
            data = utf8
            size = len(utf8)
        cdef vector[uint32_t] ids
        with nogil:
            # Text runs 2.5 to 4.5 bytes per token; reserving 2 spares the regrowth copies, and the
            # pages of the part never written are never touched.
            ids.reserve(<size_t>size // 2 + 16)
            self.encoder.encode(string_view(data, <size_t>size), ids)
        cdef array result = clone(UINT32_ARRAY, <Py_ssize_t>ids.size(), False)
        if ids.size():
            memcpy(result.data.as_voidptr, ids.data(), ids.size() * sizeof(uint32_t))
        return result
