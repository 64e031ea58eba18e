"""The package imports itself only relatively, so that it runs unchanged as `cs336_bpe` when installed
beside a student's own `cs336_basics` (an absolute `cs336_basics.x` would import theirs)."""

from __future__ import annotations

import ast
import re

from tests.support import REPO_ROOT

PACKAGE = REPO_ROOT / "cs336_basics"
# Run as a file, not imported: it puts the checkout on sys.path and imports the CLI by name.
ENTRY_SCRIPTS = {"test_trainer.py"}


def absolute_self_imports(source: str) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "cs336_basics":
            lines.append(node.lineno)
        elif isinstance(node, ast.Import) and any(alias.name.split(".")[0] == "cs336_basics" for alias in node.names):
            lines.append(node.lineno)
    return lines


def test_python_modules_import_the_package_relatively() -> None:
    found = {
        path.name: lines
        for path in sorted(PACKAGE.glob("*.py"))
        if path.name not in ENTRY_SCRIPTS and (lines := absolute_self_imports(path.read_text(encoding="utf-8")))
    }
    assert found == {}, "use `from .module import name` inside the package"


def test_cython_modules_import_python_code_relatively() -> None:
    # `cimport cs336_basics.x` is resolved at compile time and stays; a Python-level import runs when
    # the extension loads, under whatever name the package has.
    runtime_import = re.compile(r"^\s*(from\s+cs336_basics[.\w]*\s+import\b|import\s+cs336_basics\b)", re.M)
    found = {
        path.name: [match.group(0).strip() for match in runtime_import.finditer(path.read_text(encoding="utf-8"))]
        for path in sorted([*PACKAGE.glob("*.pyx"), *PACKAGE.glob("*.pxd")])
    }
    assert {name: lines for name, lines in found.items() if lines} == {}
