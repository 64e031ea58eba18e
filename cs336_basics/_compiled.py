"""Import a compiled extension of this package under whatever name the package was imported as.

The package is `cs336_basics` in this repository and `cs336_bpe` when installed (so that it never
collides with the CS336 assignment's own `cs336_basics`). Python code imports its siblings
relatively; the extensions, though, were compiled as `cs336_basics.<module>`. Under that name an
extension that `cimport`s functions from a sibling imports it while it loads, and Cython registers
each loaded extension in `sys.modules`. Beside a student's package both would meet their
`cs336_basics`, so while such an extension loads, its siblings (and, if no `cs336_basics` is imported
yet, the package itself) are lent under the compiled names, and afterwards every such entry is
removed again: nobody else sees ours under their name.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

COMPILED_UNDER = "cs336_basics"
# Which compiled siblings each extension cimports from (the `cimport` lines of its .pyx and .pxd).
CIMPORTS = {"_native": ("_merge_cpp",)}


def import_compiled(name: str) -> ModuleType:
    """`from . import <name>` for a compiled extension, whatever this package is called."""
    package = __package__
    if package == COMPILED_UNDER:
        return importlib.import_module(f".{name}", package)
    lent = []
    try:
        if CIMPORTS.get(name) and COMPILED_UNDER not in sys.modules:
            # Importing `a.b` imports `a` first even when `a.b` is in sys.modules. A student's
            # package that is not imported yet must not be imported by us, so ours stands in.
            sys.modules[COMPILED_UNDER] = sys.modules[package]
            lent.append(COMPILED_UNDER)
        for sibling in CIMPORTS.get(name, ()):
            compiled_name = f"{COMPILED_UNDER}.{sibling}"
            if compiled_name not in sys.modules:
                sys.modules[compiled_name] = import_compiled(sibling)
                lent.append(compiled_name)
        module = importlib.import_module(f".{name}", package)
    finally:
        for compiled_name in lent:
            del sys.modules[compiled_name]
    compiled_name = f"{COMPILED_UNDER}.{name}"
    if sys.modules.get(compiled_name) is module:
        del sys.modules[compiled_name]
    return module
