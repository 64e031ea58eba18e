# Progress reported by C++ without the GIL (a count so far), relayed to a Python callable that is
# given the increase since its last call (tqdm.update fits), at most once per `every`. Calling into
# Python is also where a pending Ctrl-C or SIGTERM handler runs: what the callable raises
# (KeyboardInterrupt included) lands in `errors` and tells the C++ to stop; the binding raises it
# once the C++ returns. Inline, so every binding compiles its own copy and no extension imports
# another.
from cpython.ref cimport PyObject
from libcpp cimport bool as cbool


cdef struct ProgressRelay:
    PyObject* report  # a callable, or None
    PyObject* errors  # a list
    size_t every
    size_t reported
    bint failed


cdef inline void start_relay(ProgressRelay* relay, object report, list errors, size_t every) noexcept:
    relay.report = <PyObject*>report
    relay.errors = <PyObject*>errors
    relay.every = every
    relay.reported = 0
    relay.failed = report is None


cdef inline void flush_progress(ProgressRelay* relay, size_t total_done) noexcept:
    cdef size_t done = total_done - relay.reported
    relay.reported = total_done
    if done == 0 or relay.failed:
        return
    try:
        (<object>relay.report)(done)
    except BaseException as error:
        relay.failed = True
        (<object>relay.errors).append(error)


cdef inline cbool relay_progress(void* context, size_t total_done) noexcept nogil:
    """The C++ callback: relays the progress; true (stop) once the callable has raised."""
    cdef ProgressRelay* relay = <ProgressRelay*>context
    if relay.failed or total_done - relay.reported < relay.every:
        return relay.failed
    with gil:
        flush_progress(relay, total_done)
    return relay.failed
