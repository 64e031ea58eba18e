"""Build the compiled trainers: one setup(), extensions declared from a list, OpenMP only when it works.

Environment variables:
  CS336_PURE_PYTHON=1      build no extension at all (bpe_v1..bpe_v4 and the pure tokenizer still work)
  CS336_REQUIRE_OPENMP=1   fail the build instead of falling back when the compiler cannot use OpenMP
  CS336_NO_OPENMP=1        build without OpenMP even when the compiler has it (tests the fallback)
  CS336_EXTENSIONS=a,b     build only these extensions (for developers iterating on one of them)
"""

import glob
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import textwrap

from setuptools import Extension, setup

CXX_FLAGS = ["-std=c++17", "-O3"]
OPENMP_PROBE = textwrap.dedent(
    """
    #include <omp.h>
    #include <stdio.h>
    int main(void) {
        int threads = 0;
        #pragma omp parallel reduction(+:threads)
        threads += 1;
        printf("%d", threads);
        return threads > 0 ? 0 : 1;
    }
    """
)


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def openmp_flags() -> list[str]:
    """Compile, link and run a tiny OpenMP program; return the flags that made it work, or []."""
    compiler = os.environ.get("CXX") or sysconfig.get_config_var("CXX") or "c++"
    compiler = compiler.split()
    if shutil.which(compiler[0]) is None:
        return []
    for flags in (["-fopenmp"], ["-Xpreprocessor", "-fopenmp", "-lomp"]):
        with tempfile.TemporaryDirectory() as tmp:
            source = os.path.join(tmp, "probe.cpp")
            binary = os.path.join(tmp, "probe")
            with open(source, "w") as f:
                f.write(OPENMP_PROBE)
            try:
                subprocess.run([*compiler, *flags, source, "-o", binary], check=True, capture_output=True)
                subprocess.run([binary], check=True, capture_output=True, timeout=30)
            except (OSError, subprocess.SubprocessError):
                continue
            return flags
    return []


def extensions() -> list[Extension]:
    if env_flag("CS336_PURE_PYTHON"):
        print("cs336_basics: CS336_PURE_PYTHON is set, building no compiled extension", file=sys.stderr)
        return []
    from Cython.Build import cythonize

    omp = [] if env_flag("CS336_NO_OPENMP") else openmp_flags()
    if not omp:
        if env_flag("CS336_NO_OPENMP"):
            reason = "CS336_NO_OPENMP is set"
        else:
            reason = "the compiler cannot build OpenMP programs"
        message = f"cs336_basics: building without OpenMP ({reason}); bpe_v7 will run on one thread"
        if env_flag("CS336_REQUIRE_OPENMP"):
            sys.exit(message + " (and CS336_REQUIRE_OPENMP is set)")
        print(message, file=sys.stderr)
    omp_link = [flag for flag in omp if flag != "-Xpreprocessor"]

    # (module, sources, uses OpenMP); every module is C++ so the pure-Cython one can use libcpp too.
    declared = [
        ("cs336_basics._merge_cy", ["cs336_basics/_merge_cy.pyx"], False),
        # bpe_v6 runs the loop on one thread; bpe_v7 reaches it through this module too and counts
        # the initial pairs on its threads.
        ("cs336_basics._merge_cpp", ["cs336_basics/_merge_cpp.pyx", "cpp/bpe_merge.cpp"], True),
        (
            "cs336_basics._native",
            [
                "cs336_basics/_native.pyx",
                "cpp/pretokenize.cpp",
                "cpp/word_count.cpp",
                "cpp/bpe_merge.cpp",
            ],
            True,
        ),
        (
            "cs336_basics._encode",
            ["cs336_basics/_encode.pyx", "cpp/bpe_encode.cpp", "cpp/pretokenize.cpp"],
            False,
        ),
    ]
    wanted = {name.strip() for name in os.environ.get("CS336_EXTENSIONS", "").split(",") if name.strip()}
    modules = []
    for name, sources, parallel in declared:
        if wanted and name.rsplit(".", 1)[-1] not in wanted:
            continue
        modules.append(
            Extension(
                name,
                sources=sources,
                include_dirs=["cpp"],
                depends=sorted(glob.glob("cpp/*.hpp")),  # a header edit rebuilds what includes it
                language="c++",
                extra_compile_args=CXX_FLAGS + (omp if parallel else []),
                extra_link_args=omp_link if parallel else [],
                define_macros=[("CS336_OPENMP_PROBED", "1" if omp else "0")],
            )
        )
    compiled = cythonize(modules, compiler_directives={"language_level": "3"}, quiet=True)
    # Cython names each module after its folder (cs336_basics/, where its .pxd is found); installed,
    # the package is cs336_bpe (pyproject.toml's package-dir), a name that cannot collide with the
    # CS336 assignment's own cs336_basics. The init symbol (PyInit__native ...) is the same under both.
    for module in compiled:
        module.name = module.name.replace("cs336_basics.", "cs336_bpe.", 1)
    return compiled


setup(ext_modules=extensions())
