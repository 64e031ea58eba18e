# Word counts held in C++ lent from the binding that holds them (_count_cpp's NativeWordCounts) to
# the one that trains on them (_merge_cpp), without a copy: a capsule of a pointer to the
# bpe::CountedWords, named so that nothing else passes for one. Neither extension cimports the other's
# classes (the installed package is cs336_bpe, the checkout's cs336_basics); the lender keeps the
# table alive for the call.
cimport cs336_basics.native._libbpe as lib
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_New

cdef extern from *:
    """
    static const char* const cs336_held_words_name = "cs336_bpe.CountedWords";
    """
    const char* HELD_WORDS_NAME "cs336_held_words_name"


cdef inline object lend_words(lib.CountedWords* words):
    return PyCapsule_New(words, HELD_WORDS_NAME, NULL)


# Raises ValueError (from CPython) for anything that is not a capsule lend_words made.
cdef inline lib.CountedWords* borrowed_words(object capsule) except NULL:
    return <lib.CountedWords*>PyCapsule_GetPointer(capsule, HELD_WORDS_NAME)
