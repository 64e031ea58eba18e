"""Build the compiled parts: the C++ in cpp/ is compiled once into one static library (`bpe`), and
each Cython binding (one per concern) links it. OpenMP is used only when a probe program shows it
really runs threads.

    cpp/*.cpp  --compiled once-->  libbpe.a  --linked by-->  _merge_cpp (bpe_v6's merge loop)
                                                             _count_cpp    (bpe_v7's word counting)
                                                             _encode    (the tokenizer's encoder)
    _merge_cy (bpe_v5) is Cython alone and needs no library.

Environment variables (parsed by cs336_basics/backend.py, which this file loads directly because
the package cannot be imported before it is built):
  CS336_PURE_PYTHON=1      build no extension at all (bpe_v1..bpe_v4 and the pure tokenizer still work)
  CS336_REQUIRE_OPENMP=1   fail the build instead of falling back when the compiler cannot use OpenMP
  CS336_NO_OPENMP=1        build without OpenMP even when the compiler has it (tests the fallback)
The usual CC, CXX, CFLAGS, CPPFLAGS and LDFLAGS apply to the library, the probe and the bindings.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import platform
import subprocess
import sys
import tempfile
import textwrap

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


def load_backend():
    spec = importlib.util.spec_from_file_location("cs336_backend", os.path.join("cs336_basics", "backend.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


backend = load_backend()

LIBRARY = "bpe"
LIBRARY_SOURCES = sorted(glob.glob(os.path.join("cpp", "*.cpp")))
HEADERS = sorted(glob.glob(os.path.join("cpp", "*.hpp")))

# With OMP_NUM_THREADS=2 a working OpenMP prints 2; a compiler that accepts the flag but ignores the
# pragma (or a stub runtime) prints 1, so the probe can fail where "at least one thread" cannot. The
# loop is cpp/omp_shim.hpp's (a long long index, num_threads, a dynamic schedule): an OpenMP that
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
    return ["-std=c++17", "-O3"]


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


class BuildWithLibrary(build_ext):
    """build_ext that first compiles cpp/ into one static library and links it into the bindings."""

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

        # Objects and bindings depend on the flags: a switch between a build with and one without
        # OpenMP rebuilds everything (the bindings inline bpe::openmp_enabled from omp_shim.hpp).
        library_dir = os.path.join(self.build_temp, "libbpe")
        configuration = " ".join([*compile_flags, "|", *link_flags])
        stamp = os.path.join(self.build_temp, "libbpe-flags.txt")
        if not os.path.exists(stamp) or open(stamp).read() != configuration:
            self.force = True
            os.makedirs(self.build_temp, exist_ok=True)
            with open(stamp, "w") as file:
                file.write(configuration)
        objects = compiler.object_filenames(LIBRARY_SOURCES, output_dir=library_dir)
        for source, target in zip(LIBRARY_SOURCES, objects):
            if self.force or is_stale(target, [source, *HEADERS]):
                compiler.compile([source], output_dir=library_dir, include_dirs=["cpp"], extra_postargs=compile_flags)
        compiler.create_static_lib(objects, LIBRARY, output_dir=library_dir)
        library_file = compiler.library_filename(LIBRARY, output_dir=library_dir)

        for extension in self.extensions:
            extension.extra_compile_args = compile_flags
            if getattr(extension, "links_library", False):
                extension.libraries = [LIBRARY]
                extension.library_dirs = [library_dir]
                extension.extra_link_args = link_flags
                extension.depends = [*HEADERS, library_file]  # relink when the library changes
        super().build_extensions()


def binding(name: str, links_library: bool) -> Extension:
    # Compiled under the installed name: Cython writes the module name into every class and function
    # it defines (their __module__), which is how pickle finds them again, in a Dask worker too. From
    # the checkout, cs336_basics is an alias of cs336_bpe (cs336_basics/__init__.py), so both names
    # reach these modules; the init symbol (PyInit_<name>) does not depend on the package.
    extension = Extension(f"cs336_bpe.{name}", [f"cs336_basics/{name}.pyx"], include_dirs=["cpp"], language="c++")
    extension.links_library = links_library
    return extension


def extensions() -> list[Extension]:
    if backend.pure_python_forced():
        print(f"cs336_basics: {backend.PURE_PYTHON_ENV} is set, building no compiled extension", file=sys.stderr)
        return []
    from Cython.Build import cythonize

    bindings = [
        binding("_merge_cy", links_library=False),
        binding("_merge_cpp", links_library=True),
        binding("_count_cpp", links_library=True),
        binding("_encode", links_library=True),
    ]
    links = {extension.name: extension.links_library for extension in bindings}
    compiled = cythonize(bindings, compiler_directives={"language_level": "3"}, quiet=True)
    for extension in compiled:
        extension.links_library = links[extension.name]
    return compiled


setup(ext_modules=extensions(), cmdclass={"build_ext": BuildWithLibrary})
