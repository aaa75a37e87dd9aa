"""The event codes the families' sources emit, read from the code itself: each ``Event(severity, code, ...)``,
``EngineEvent(...)``, ``_plain(...)`` and ``_event(...)`` call whose severity and code are string literals, or
names a function assigns literals to (``code = "aux_ids" if read else "aux_ids_default"``)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

FAMILIES = Path(__file__).resolve().parent.parent / "ckptdiff" / "families"
CALLS = ("Event", "EngineEvent", "_plain", "_event")


def _literals(node: ast.expr, names: dict[str, list[str]]) -> list[str] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.IfExp):
        body, orelse = _literals(node.body, names), _literals(node.orelse, names)
        return None if body is None or orelse is None else body + orelse
    if isinstance(node, ast.Name):
        return names.get(node.id)
    return None


def _assigned(function: ast.AST) -> dict[str, list[str]]:
    names: dict[str, list[str]] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found = _literals(node.value, {})
            if found is not None:
                names.setdefault(node.targets[0].id, []).extend(found)
    return names


def emitted_codes() -> dict[str, set[str]]:
    """Event code → the severities the sources emit it at."""
    codes: dict[str, set[str]] = defaultdict(set)
    for path in sorted(FAMILIES.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        scopes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))]
        for scope in scopes:
            names = _assigned(scope) if isinstance(scope, ast.FunctionDef) else {}
            body = scope.body if isinstance(scope, ast.FunctionDef) else [scope]
            for node in (n for part in body for n in ast.walk(part)):
                if not isinstance(node, ast.Call) or len(node.args) < 2:
                    continue
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
                if name not in CALLS:
                    continue
                severities, found = _literals(node.args[0], names), _literals(node.args[1], names)
                for code in found or ():
                    codes[code].update(severities or ())
    return dict(codes)
