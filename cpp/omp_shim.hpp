// The one place that knows whether OpenMP was compiled in. Everything else calls these helpers, so
// a build without OpenMP (the compiler probe in setup.py failed) still compiles and runs on one thread.
#pragma once

#ifdef _OPENMP
#include <omp.h>
// An OpenMP directive, e.g. BPE_OMP_PRAGMA("omp parallel for"): nothing at all without OpenMP, so
// that build does not warn about an unknown pragma at every parallel loop.
#define BPE_OMP_PRAGMA(directive) _Pragma(directive)
#else
#define BPE_OMP_PRAGMA(directive)
#endif

namespace bpe {

inline bool openmp_enabled() {
#ifdef _OPENMP
    return true;
#else
    return false;
#endif
}

// Threads a parallel region would use by default (OMP_NUM_THREADS, else the core count).
inline int omp_default_threads() {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

inline int omp_thread_id() {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

}  // namespace bpe
