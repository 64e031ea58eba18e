# The contract of cpp/bpe_encode.hpp for Cython: the encoder needs no GIL, and every C++ exception
# it throws (std::invalid_argument, InvalidUtf8Error) becomes a Python ValueError via `except +`.
from libc.stdint cimport uint32_t
from libcpp.pair cimport pair
from libcpp.string cimport string
from libcpp.vector cimport vector


cdef extern from "<string_view>" namespace "std" nogil:
    # Declared here because libcpp.string_view needs Cython >= 3.1.
    cdef cppclass string_view:
        string_view(const char* data, size_t size)


cdef extern from "bpe_encode.hpp" namespace "bpe" nogil:
    cdef struct MergeRule:
        uint32_t left
        uint32_t right
        uint32_t merged

    cdef cppclass Encoder:
        Encoder(
            const vector[uint32_t]& byte_ids,
            const vector[MergeRule]& merges,
            const vector[pair[string, uint32_t]]& special_tokens,
            size_t cache_slots,
        ) except +
        void encode(string_view text, vector[uint32_t]& out) except +
        size_t cache_slots()


cdef class NativeEncoder:
    cdef Encoder* encoder
