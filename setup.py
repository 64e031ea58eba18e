"""Build the compiled parts: the C++ in cpp/ is compiled once into one static library (`bpe`), and
each Cython binding (one per concern) links it. OpenMP is used only when a probe program shows it
really runs threads.

    cpp/*/*.cpp --compiled once-->  libbpe.a  --linked by-->  _merge_cpp (bpe_v6's merge loop)
                                                             _count_cpp    (bpe_v7's word counting)
                                                             _encode    (the tokenizer's encoder)
    _merge_cy (bpe_v5) is Cython alone and needs no library.

Every unit (a library source, a binding's Cython output) is compiled in parallel, one compiler per
usable core (`build_ext -j N` to choose), with a line per finished unit on stderr (`pip install -v`
shows them). Objects are kept in build/ and one newer than its sources is not compiled again, so
installing again (`pip install -e ".[test]"` after `pip install -e .`) only relinks.

Environment variables (parsed by cs336_basics/native/backend.py, which this file loads directly because
the package cannot be imported before it is built):
  CS336_PURE_PYTHON=1      build no extension at all (bpe_v1..bpe_v4 and the pure tokenizer still work)
  CS336_REQUIRE_OPENMP=1   fail the build instead of falling back when the compiler cannot use OpenMP
  CS336_NO_OPENMP=1        build without OpenMP even when the compiler has it (tests the fallback)
The usual CC, CXX, CFLAGS, CPPFLAGS and LDFLAGS apply to the library, the probe and the bindings.
"""

from __future__ import annotations

import functools
import glob
import importlib.util
import itertools
import os
import platform
import queue
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import threading
import time

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


def load_backend():
    spec = importlib.util.spec_from_file_location("cs336_backend", os.path.join("cs336_basics", "native", "backend.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


backend = load_backend()

LIBRARY = "bpe"
LIBRARY_SOURCES = sorted(glob.glob(os.path.join("cpp", "*", "*.cpp")))
HEADERS = sorted(glob.glob(os.path.join("cpp", "*", "*.hpp")))
# Where objects are kept between builds: setuptools' own build_temp is a new temporary directory for
# each editable install, so `pip install -e ".[test]"` after `pip install -e .` would compile again.
OBJECTS_DIR = os.path.join("build", f"objects.{sysconfig.get_platform()}-{sys.implementation.cache_tag}")
PXD_FILES = sorted(glob.glob(os.path.join("cs336_basics", "native", "*.pxd")))

# With OMP_NUM_THREADS=2 a working OpenMP prints 2; a compiler that accepts the flag but ignores the
# pragma (or a stub runtime) prints 1, so the probe can fail where "at least one thread" cannot. The
# loop is cpp/kit/omp_shim.hpp's (a long long index, num_threads, a dynamic schedule): an OpenMP that
# cannot compile it (an old MSVC /openmp) fails here, and the next flags are tried.
OPENMP_PROBE = textwrap.dedent(
    """
    #include <omp.h>
    #include <stdio.h>
    int main(void) {
        int threads = 0;
        long long squares[4] = {0, 0, 0, 0};
        #pragma omp parallel for num_threads(2) schedule(dynamic, 1)
        for (long long index = 0; index < 4; ++index) squares[index] = index * index;
        #pragma omp parallel
        {
            #pragma omp single
            threads = omp_get_num_threads();
        }
        printf("%d", squares[3] == 9 ? threads : 0);
        return 0;
    }
    """
)


# ---- Platform flags (which toolchain was built and tested where: docs/PLATFORMS.md) ----------------
# GCC and Clang take the same flags on Linux and macOS; MSVC (compiler_type "msvc") its own. POSIX-only
# calls in cpp/ (mmap, sigaction) sit behind `#if !defined(_WIN32)`, compiler builtins behind bits.hpp.


def language_flags(compiler) -> list[str]:
    if compiler.compiler_type == "msvc":
        return ["/std:c++17", "/O2"]  # setuptools adds /EHsc to C++ sources itself
    # No debug information unless CFLAGS asks for it: it is a quarter of the compile time of the
    # Cython output and ten times the size of its object (Python's own flags say -g).
    wants_debug_info = any(flag.startswith("-g") for flag in os.environ.get("CFLAGS", "").split())
    return ["-std=c++17", "-O3", *([] if wants_debug_info else ["-g0"])]


# Homebrew's libomp is keg-only: its headers and library are under the prefix, not on any search path.
# Apple Silicon's Homebrew lives in /opt/homebrew, Intel's in /usr/local; the machine's own comes first.
HOMEBREW_LIBOMP = ["/opt/homebrew/opt/libomp", "/usr/local/opt/libomp"]


def openmp_candidates(compiler) -> list[tuple[list[str], list[str]]]:
    """(compile flags, link flags) to try in order, for this platform's compilers; the probe keeps the first
    that builds a program that runs two threads."""
    if compiler.compiler_type == "msvc":
        # MSVC's OpenMP 2.0 (vcomp140.dll, which a wheel carries: delvewheel), all the core needs; then
        # /openmp:llvm (VS 2019 16.9+), LLVM's runtime.
        return [(["/openmp"], []), (["/openmp:llvm"], [])]
    if sys.platform == "darwin":
        # Apple clang has no -fopenmp driver flag: the preprocessor takes it and libomp is linked, from
        # CPPFLAGS/LDFLAGS if they name it, else from Homebrew's prefix for this machine, then the other.
        prefixes = sorted(HOMEBREW_LIBOMP, key=lambda prefix: ("homebrew" in prefix) != (platform.machine() == "arm64"))
        apple = [(["-Xpreprocessor", "-fopenmp"], ["-lomp"])]
        for prefix in prefixes:
            if os.path.isdir(prefix):
                apple.append(
                    (["-Xpreprocessor", "-fopenmp", f"-I{prefix}/include"], [f"-L{prefix}/lib", "-lomp"])
                )
        return [*apple, (["-fopenmp"], ["-fopenmp"])]  # the last: LLVM's own clang
    return [(["-fopenmp"], ["-fopenmp"])]


def probe_openmp(compiler) -> tuple[list[str], list[str]] | None:
    """Compile, link and run the probe with setuptools' own (customized) compiler object."""
    for compile_flags, link_flags in openmp_candidates(compiler):
        with tempfile.TemporaryDirectory() as tmp:
            source = os.path.join(tmp, "omp_probe.c")
            with open(source, "w") as file:
                file.write(OPENMP_PROBE)
            try:
                objects = compiler.compile([source], output_dir=tmp, extra_postargs=compile_flags)
                # setuptools applies LDFLAGS to shared objects only; the probe needs them too (e.g.
                # -L to a libomp outside the default search path).
                compiler.link_executable(
                    objects,
                    "omp_probe",
                    output_dir=tmp,
                    extra_preargs=os.environ.get("LDFLAGS", "").split(),
                    extra_postargs=link_flags,
                )
                binary = os.path.join(tmp, compiler.executable_filename("omp_probe"))
                result = subprocess.run(
                    [binary], capture_output=True, text=True, timeout=30, env={**os.environ, "OMP_NUM_THREADS": "2"}
                )
            except Exception:  # noqa: BLE001 - any failure of the toolchain means "no OpenMP"
                continue
            if result.returncode == 0 and result.stdout.strip() == "2":
                return compile_flags, link_flags
    return None


def is_stale(target: str, sources: list[str]) -> bool:
    if not os.path.exists(target):
        return True
    built = os.path.getmtime(target)
    return any(os.path.getmtime(source) > built for source in sources)


def build_jobs(requested: object) -> int:
    """`build_ext -j N` when given, else one compiler per usable core."""
    if isinstance(requested, int) and not isinstance(requested, bool) and requested > 0:
        return requested
    return backend.usable_cores()


class Progress:
    """One line on stderr per finished unit (shown by `pip install -v`, and by `setup.py build_ext`)."""

    def __init__(self, total: int, jobs: int) -> None:
        self.total, self.done, self.started = total, 0, time.monotonic()
        self.lock = threading.Lock()
        if total:
            self.say(f"compiling {total} units, {jobs} at a time")

    def say(self, message: str) -> None:
        print(f"cs336_basics: {message}", file=sys.stderr, flush=True)

    def finished(self, unit: str, seconds: float) -> None:
        with self.lock:
            self.done += 1
            elapsed = time.monotonic() - self.started
            self.say(f"[{self.done}/{self.total}] {unit} ({seconds:.1f} s; {elapsed:.0f} s so far)")


class CompilePool:
    """`jobs` threads running compiler commands, the highest priority first: the library's sources
    wait while a binding's Cython output (the longest units) is ready to compile, so the slowest unit
    starts early. Compilers are subprocesses, so threads run them in parallel."""

    def __init__(self, jobs: int, progress: Progress) -> None:
        self.queue: queue.PriorityQueue = queue.PriorityQueue()
        self.progress = progress
        self.errors: list[BaseException] = []
        self.order = itertools.count()
        self.workers = [threading.Thread(target=self.work, daemon=True) for _ in range(jobs)]
        for worker in self.workers:
            worker.start()

    def submit(self, priority: int, unit: str, compile_unit) -> None:
        self.queue.put((priority, next(self.order), unit, compile_unit))

    def work(self) -> None:
        while True:
            _, _, unit, compile_unit = self.queue.get()
            if compile_unit is None:
                return
            if self.errors:  # one failure ends the build: compile nothing more
                continue
            started = time.monotonic()
            try:
                compile_unit()
            except BaseException as error:  # noqa: BLE001 - re-raised in the building thread
                self.errors.append(error)
                continue
            self.progress.finished(unit, time.monotonic() - started)

    def finish(self) -> None:
        """Wait for every submitted unit; the first compiler error is raised here."""
        for _ in self.workers:
            self.submit(LAST, "", None)
        for worker in self.workers:
            worker.join()
        if self.errors:
            raise self.errors[0]


BINDING_FIRST, LIBRARY_NEXT, LAST = 0, 1, 2


class BuildWithLibrary(build_ext):
    """build_ext that compiles cpp/ into one static library and links it into the bindings: every
    stale unit is queued on one pool (Cython translates each binding here while the pool compiles),
    then the library is archived and the bindings are linked."""

    def build_extensions(self) -> None:
        compiler = self.compiler
        openmp = None if backend.env_flag(backend.NO_OPENMP_ENV) else probe_openmp(compiler)
        if openmp is None:
            reason = f"{backend.NO_OPENMP_ENV} is set" if backend.env_flag(backend.NO_OPENMP_ENV) else (
                "the compiler cannot build and run OpenMP programs"
            )
            message = f"cs336_basics: building without OpenMP ({reason}); bpe_v7 will run on one thread"
            if backend.env_flag(backend.REQUIRE_OPENMP_ENV):
                sys.exit(f"{message} (and {backend.REQUIRE_OPENMP_ENV} is set)")
            print(message, file=sys.stderr)
        compile_flags = language_flags(compiler) + (openmp[0] if openmp else [])
        link_flags = openmp[1] if openmp else []

        # Objects and bindings depend on the compiler and its flags: another compiler, CFLAGS, or a
        # switch between a build with and one without OpenMP rebuilds everything (the bindings inline
        # bpe::openmp_enabled from omp_shim.hpp).
        library_dir = os.path.join(OBJECTS_DIR, "libbpe")
        configuration = " ".join([*getattr(compiler, "compiler_so", []), *compile_flags, "|", *link_flags])
        stamp = os.path.join(OBJECTS_DIR, "flags.txt")
        if not os.path.exists(stamp) or open(stamp).read() != configuration:
            self.force = True
            os.makedirs(OBJECTS_DIR, exist_ok=True)
            with open(stamp, "w") as file:
                file.write(configuration)
        library_objects = compiler.object_filenames(LIBRARY_SOURCES, output_dir=library_dir)
        library_file = compiler.library_filename(LIBRARY, output_dir=library_dir)
        stale_library = [
            (source, target)
            for source, target in zip(LIBRARY_SOURCES, library_objects)
            if self.force or is_stale(target, [source, *HEADERS])
        ]
        for extension in self.extensions:
            extension.extra_compile_args = compile_flags
            if getattr(extension, "links_library", False):
                extension.libraries = [LIBRARY]
                extension.library_dirs = [library_dir]
                extension.extra_link_args = link_flags

        stale_bindings = [extension for extension in self.extensions if self.force or self.binding_is_stale(extension)]
        jobs = build_jobs(self.parallel)
        pool = CompilePool(jobs, Progress(len(stale_library) + len(stale_bindings), jobs))
        for source, _ in stale_library:
            compile_source = functools.partial(
                compiler.compile, [source], output_dir=library_dir, include_dirs=["cpp"], extra_postargs=compile_flags
            )
            pool.submit(LIBRARY_NEXT, source, compile_source)
        try:
            # The largest binding first: its Cython output is the longest unit to compile.
            for extension in sorted(stale_bindings, key=lambda e: -os.path.getsize(e.sources[0])):
                self.submit_binding(pool, extension)
        finally:
            pool.finish()
        if stale_library or not os.path.exists(library_file):
            compiler.create_static_lib(library_objects, LIBRARY, output_dir=library_dir)
        for extension in self.extensions:
            self.link_binding(extension, library_file)

    def binding_object(self, extension: Extension) -> str:
        translated = os.path.splitext(extension.sources[0])[0] + ".cpp"  # where Cython writes it
        return self.compiler.object_filenames([translated], output_dir=OBJECTS_DIR)[0]

    def binding_is_stale(self, extension: Extension) -> bool:
        """Whether the binding's object is older than its .pyx, any .pxd or any C++ header (a
        superset of what it includes, so that nothing it depends on is missed)."""
        return is_stale(self.binding_object(extension), [*extension.sources, *PXD_FILES, *HEADERS])

    def submit_binding(self, pool: CompilePool, extension: Extension) -> None:
        """Translate the binding's .pyx into C++ (here, while the pool compiles) and queue its compilation."""
        from Cython.Build import cythonize

        (translated,) = cythonize([extension], compiler_directives={"language_level": "3"}, quiet=True)
        compile_binding = functools.partial(
            self.compiler.compile,
            translated.sources,
            output_dir=OBJECTS_DIR,
            include_dirs=extension.include_dirs,
            extra_postargs=extension.extra_compile_args,
        )
        pool.submit(BINDING_FIRST, translated.sources[0], compile_binding)

    def link_binding(self, extension: Extension, library_file: str) -> None:
        target = self.get_ext_fullpath(extension.name)
        objects = [self.binding_object(extension)]
        inputs = [*objects, library_file] if getattr(extension, "links_library", False) else objects
        if not self.force and not is_stale(target, inputs):
            return
        self.compiler.link_shared_object(
            objects,
            target,
            libraries=self.get_libraries(extension),
            library_dirs=extension.library_dirs,
            runtime_library_dirs=extension.runtime_library_dirs,
            extra_postargs=extension.extra_link_args,
            export_symbols=self.get_export_symbols(extension),
            build_temp=self.build_temp,
            target_lang="c++",
        )


def binding(name: str, links_library: bool) -> Extension:
    # Compiled under the installed name: Cython writes the module name into every class and function
    # it defines (their __module__), which is how pickle finds them again, in a Dask worker too. From
    # the checkout, cs336_basics is an alias of cs336_bpe (cs336_basics/__init__.py), so both names
    # reach these modules; the init symbol (PyInit_<name>) does not depend on the package.
    source = f"cs336_basics/native/{name}.pyx"
    extension = Extension(f"cs336_bpe.native.{name}", [source], include_dirs=["cpp"], language="c++")
    extension.links_library = links_library
    return extension


def extensions() -> list[Extension]:
    if backend.pure_python_forced():
        print(f"cs336_basics: {backend.PURE_PYTHON_ENV} is set, building no compiled extension", file=sys.stderr)
        return []
    # Cython translates the .pyx files in build_ext, while the library compiles.
    return [
        binding("_merge_cy", links_library=False),
        binding("_merge_cpp", links_library=True),
        binding("_count_cpp", links_library=True),
        binding("_encode", links_library=True),
    ]


setup(ext_modules=extensions(), cmdclass={"build_ext": BuildWithLibrary})
