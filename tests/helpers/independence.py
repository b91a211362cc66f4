"""Whether a helper package stands apart from ``toolkit``: generators that test ppscope from
the outside must not share its code or constants."""

from __future__ import annotations

import ast
from pathlib import Path

__all__ = ["toolkit_imports"]


def toolkit_imports(package: Path) -> list[str]:
    """``file:line what`` for every import of ``toolkit`` in the package's modules, in every
    form (``import toolkit.x``, ``from toolkit.x import y``), and every dynamic import
    (``import_module``, ``__import__``), whose target ``ast`` cannot tell."""
    found = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") in (
                "import_module",
                "__import__",
            ):
                found.append(f"{path.name}:{node.lineno} imports dynamically")
                continue
            else:
                continue
            found += [
                f"{path.name}:{node.lineno} {m}" for m in modules if m.split(".")[0] == "toolkit"
            ]
    return found
