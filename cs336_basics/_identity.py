"""One package under two names. Installed, this package is `cs336_bpe`; in its checkout the folder is
`cs336_basics/`, which the CLI, the tests and `scripts/` import by that name. Loaded twice, under
each name, every module would exist twice: two `BPEInputError` classes (an `except` through one name
misses an error raised through the other), and compiled classes, which are named `cs336_bpe.*` when
built (setup.py), that pickle could not find again. So `cs336_bpe` is the one identity: importing
`cs336_basics` from the checkout binds this folder as `cs336_bpe` (unless it already is) and makes
every `cs336_basics.x` the module `cs336_bpe.x`, the same object.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType

CANONICAL = "cs336_bpe"
CHECKOUT = "cs336_basics"


class _ModuleAlias:
    """The loader of a module found under a second name: the module of `_target(name)`, the same object
    (not a copy), keeping its own spec. A meta path finder and loader by duck typing: importlib.abc
    would cost 13 ms to import."""

    def __init__(self) -> None:
        self._specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def _target(self, fullname: str) -> str:
        raise NotImplementedError

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self._target(spec.name))
        # The import machinery sets __spec__ to the alias spec after this; exec_module puts it back.
        self._specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self._specs.pop(module.__spec__.name, module.__spec__)


class CheckoutAlias(_ModuleAlias):
    """Finds `cs336_basics.x` as the already-imported (or now imported) `cs336_bpe.x`, and `cs336_bpe.x`
    in the folder `cs336_bpe` was bound to (an editable install's finder would look in its own)."""

    is_checkout_alias = True  # the mark of one, whichever copy of this file defined it

    def _target(self, fullname: str) -> str:
        return canonical_name(fullname)

    def find_spec(self, fullname: str, path: object = None, target: object = None):
        if fullname.startswith(CANONICAL + "."):
            parent = sys.modules.get(fullname.rpartition(".")[0])
            if parent is None or not hasattr(parent, "__path__"):
                return None
            return importlib.machinery.PathFinder.find_spec(fullname, list(parent.__path__))
        if not fullname.startswith(CHECKOUT + "."):
            return None
        canonical = canonical_name(fullname)
        spec = importlib.util.find_spec(canonical)
        if spec is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=spec.submodule_search_locations is not None)

    def get_code(self, fullname: str):
        # `python -m cs336_basics.x` (runpy) runs the canonical module's code as __main__.
        spec = importlib.util.find_spec(canonical_name(fullname))
        return spec.loader.get_code(spec.name)  # type: ignore[union-attr]

    def is_package(self, fullname: str) -> bool:
        spec = importlib.util.find_spec(canonical_name(fullname))
        return spec is not None and spec.submodule_search_locations is not None


# Modules that moved into the subpackages by role (docs/LAYOUT.md): each old name still imports, the same
# module object, with a DeprecationWarning; `python -m` runs the module under its new name.
MOVED_MODULES = {
    "cli": "commands.cli",
    "count_cli": "commands.count_cli",
    "encode_cli": "commands.encode_cli",
    "report": "commands.report",
    "swap_in": "commands.swap_in",
    "command_line": "commands.command_line",
    "demo": "commands.demo",
    "seed_tiktoken_cache": "commands.seed_tiktoken_cache",
    "contract": "rules.contract",
    "pattern": "rules.pattern",
    "unicode_classes": "rules.unicode_classes",
    "tie_break": "rules.tie_break",
    "merge_limits": "rules.merge_limits",
    "presets": "rules.presets",
    "start_from": "rules.start_from",
    "byte_level": "rules.byte_level",
    "backend": "native.backend",
    "_count_cpp": "native._count_cpp",
    "_encode": "native._encode",
    "_merge_cpp": "native._merge_cpp",
    "_merge_cy": "native._merge_cy",
    "serialization": "outputs.serialization",
    "export": "outputs.export",
    "formats": "ingest.sources",
    "counting": "ingest.counting",
    "text_ranges": "ingest.text_ranges",
    "stream_counter": "ingest.stream_counter",
    "document_batches": "ingest.document_batches",
    "read_ahead": "ingest.read_ahead",
    "cluster": "ingest.cluster",
    "word_counts": "ingest.word_counts",
}


class MovedModules(_ModuleAlias):
    """Finds `cs336_bpe.<old>` as the module `cs336_bpe.<new>` of MOVED_MODULES."""

    is_moved_modules = True

    @staticmethod
    def _new_name(fullname: str) -> str | None:
        if not fullname.startswith(CANONICAL + "."):
            return None
        new = MOVED_MODULES.get(fullname[len(CANONICAL) + 1 :])
        return None if new is None else f"{CANONICAL}.{new}"

    def find_spec(self, fullname: str, path: object = None, target: object = None):
        if self._new_name(fullname) is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=False)

    def _target(self, fullname: str) -> str:
        new = self._new_name(fullname)
        warnings.warn(f"{fullname} is now {new}; import it by that name", DeprecationWarning, stacklevel=3)
        return new  # type: ignore[return-value]

    def get_code(self, fullname: str):
        new = self._new_name(fullname)
        source = (
            "import runpy, warnings\n"
            f"warnings.warn({fullname!r} ' is now ' {new!r}, DeprecationWarning)\n"
            f"runpy.run_module({new!r}, run_name='__main__', alter_sys=True)\n"
        )
        return compile(source, f"<{fullname}, now {new}>", "exec")

    def is_package(self, fullname: str) -> bool:
        return False


def install_moved_modules() -> None:
    """Old module names import again (once per process, whichever copy of this file runs)."""
    if not any(getattr(finder, "is_moved_modules", False) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedModules())


def canonical_name(name: str) -> str:
    return CANONICAL + name[len(CHECKOUT) :]


def adopt_canonical_name(package_file: str) -> ModuleType:
    """The package `cs336_bpe` for the checkout folder holding `package_file` (its `__init__.py`),
    imported if needed, with `cs336_basics.x` imports redirected to it from now on."""
    from pathlib import Path

    folder = Path(package_file).resolve().parent
    loaded = sys.modules.get(CANONICAL)
    if loaded is not None:
        where = Path(loaded.__file__ or "").resolve().parent
        if where != folder:
            raise ImportError(
                f"{CANONICAL} is already imported from {where}, a different copy than this checkout's "
                f"{CHECKOUT}/; import one of the two"
            )
        package = loaded
    else:
        spec = importlib.util.find_spec(CANONICAL)
        if spec is not None and spec.origin and Path(spec.origin).resolve().parent == folder:
            package = importlib.import_module(CANONICAL)  # installed in editable mode from here
        else:
            # Not installed, or installed from another copy: this checkout is the one this process runs.
            spec = importlib.util.spec_from_file_location(
                CANONICAL, folder / "__init__.py", submodule_search_locations=[str(folder)]
            )
            package = importlib.util.module_from_spec(spec)
            sys.modules[CANONICAL] = package
            try:
                spec.loader.exec_module(package)
            except BaseException:
                del sys.modules[CANONICAL]
                raise
    if not any(getattr(finder, "is_checkout_alias", False) for finder in sys.meta_path):
        sys.meta_path.insert(0, CheckoutAlias())
    return package
