// The one place that knows whether OpenMP was compiled in. Everything else calls these helpers, so
// a build without OpenMP (the compiler probe in setup.py failed) still compiles and runs on one thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <cstdio>
#include <mutex>
#include <time.h>
#ifdef __linux__
#include <unistd.h>
#endif

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

// CPU seconds of every thread of this process so far; negative where the platform cannot say.
inline double process_cpu_seconds() {
#ifdef CLOCK_PROCESS_CPUTIME_ID
    timespec now{};
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now) != 0) return -1;
    return double(now.tv_sec) + 1e-9 * double(now.tv_nsec);
#else
    return -1;
#endif
}

// Whether `helpers` more threads would find idle cores now, by the kernel's count of runnable
// tasks (this one among them) against the online cores: 1 yes, 0 no, -1 unknown (not Linux).
// A glance, not a measurement: the count is of this instant, and of the whole machine.
inline int idle_cores_for(size_t helpers) {
#ifdef __linux__
    std::FILE* file = std::fopen("/proc/loadavg", "r");
    if (file == nullptr) return -1;
    double averages[3];
    long running = 0;
    const int read = std::fscanf(file, "%lf %lf %lf %ld/", &averages[0], &averages[1], &averages[2], &running);
    std::fclose(file);
    const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
    if (read != 4 || running < 1 || cores < 1) return -1;
    return cores - running >= long(helpers) ? 1 : 0;
#else
    (void)helpers;
    return -1;
#endif
}

inline int omp_thread_id() {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

inline int omp_team_size() {
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

// A barrier of the innermost parallel region (nothing outside one, or without OpenMP).
inline void omp_barrier() {
    BPE_OMP_PRAGMA("omp barrier")
}

// Runs `body(index)` for every index on `threads` threads and rethrows the first exception after
// the loop (exceptions must not leave an OpenMP region). Once a body has thrown, no thread starts
// another: the state the bodies share may be broken (out of memory halfway through an update).
// One thread or one index runs inline: no thread team to wake, which matters for small inputs on a
// busy machine.
template <typename Body>
void parallel_for(size_t count, int threads, Body&& body) {
    if (threads <= 1 || count <= 1) {
        for (size_t index = 0; index < count; ++index) body(index);
        return;
    }
    threads = int(std::min<size_t>(size_t(threads), count));
    std::exception_ptr failure;
    std::mutex failure_mutex;
    std::atomic<bool> failed{false};
    BPE_OMP_PRAGMA("omp parallel for num_threads(threads) schedule(dynamic, 1)")
    for (long long index = 0; index < static_cast<long long>(count); ++index) {
        if (failed.load(std::memory_order_acquire)) continue;
        try {
            body(size_t(index));
        } catch (...) {
            std::lock_guard<std::mutex> lock(failure_mutex);
            if (!failure) failure = std::current_exception();
            failed.store(true, std::memory_order_release);
        }
    }
    if (failure) std::rethrow_exception(failure);
}

// Runs each phase in turn on one team of up to `threads` threads, with a barrier between phases:
// `phase(index)` for every index in [0, count), index i on team thread i % team size (OpenMP may
// give fewer threads than asked; without OpenMP one thread runs every index in order). One team
// instead of a region per phase: a merge's steps pay one fork and join. After the first exception
// the remaining work is skipped, but every thread still passes every barrier; it is rethrown after
// the team ends.
template <typename... Phases>
void parallel_phases(size_t count, int threads, Phases&&... phases) {
    threads = int(std::max<size_t>(1, std::min<size_t>(size_t(std::max(threads, 1)), count)));
    std::exception_ptr failure;
    std::mutex failure_mutex;
    std::atomic<bool> failed{false};
    const auto run = [&](size_t first, size_t step, auto& phase) {
        for (size_t index = first; index < count && !failed.load(std::memory_order_acquire); index += step) {
            try {
                phase(index);
            } catch (...) {
                std::lock_guard<std::mutex> lock(failure_mutex);
                if (!failure) failure = std::current_exception();
                failed.store(true, std::memory_order_release);
            }
        }
    };
    if (threads == 1) {
        (run(0, 1, phases), ...);
    } else {
        BPE_OMP_PRAGMA("omp parallel num_threads(threads)")
        {
            const size_t first = size_t(omp_thread_id());
            const size_t step = size_t(omp_team_size());
            // The comma fold runs the phases in order; each ends at the team's barrier.
            ((run(first, step, phases), omp_barrier()), ...);
        }
    }
    if (failure) std::rethrow_exception(failure);
}

}  // namespace bpe
