"""The package's modules import only downwards, by a declared layer table, and no import forms a cycle.

Every import counts: module level, inside functions, under ``TYPE_CHECKING``, of a parent package
(``from .. import x`` runs that package's ``__init__``), and the module names that importlib registries load
(string constants naming ``ckptdiff.*`` modules, and f-strings over ``__name__``).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "ckptdiff"

#: Layer of each module or subpackage (the first match of the longest prefix); a module may import only from
#: its own layer or lower ones. Same-layer imports are allowed but must not form a cycle.
LAYERS: dict[str, int] = {
    "ckptdiff.version": 0,
    "ckptdiff.errors": 0,
    "ckptdiff.limits": 0,
    "ckptdiff.dtypes": 0,
    "ckptdiff.progress": 0,
    "ckptdiff.policy_keys": 0,
    "ckptdiff.strict_json": 0,
    "ckptdiff.config_values": 0,
    "ckptdiff.frozen_dict": 0,
    "ckptdiff.safetensors_header": 1,
    "ckptdiff.checkpoint": 2,
    "ckptdiff.sources": 3,
    "ckptdiff.report": 4,
    "ckptdiff.policy": 5,
    "ckptdiff.naming": 5,
    "ckptdiff.base_layouts": 5,
    "ckptdiff.families": 5,
    "ckptdiff.values": 5,
    "ckptdiff.comparison": 6,
    "ckptdiff.pipeline": 7,
    "ckptdiff.formats": 8,
    "ckptdiff.convert": 8,  # plan, write, prove: reads sources, replays engines, renders its own plan
    "ckptdiff.config_file": 9,
    "ckptdiff.cli": 10,
    "ckptdiff.cli_environment": 10,
    "ckptdiff.cli_help": 10,
    "ckptdiff.cli_output": 10,
    "ckptdiff.cli_destinations": 10,
    "ckptdiff.cli_convert": 10,
    "ckptdiff.cli_completion": 10,
    "ckptdiff.cli_inputs": 10,
    "ckptdiff.__main__": 11,
    "ckptdiff": 11,  # the package's API (__init__): compare(), render()
    "ckptdiff.result": 11,  # compare()'s Result: the report with a notebook's conveniences, worded by the formats
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer(name: str) -> int:
    best = max((prefix for prefix in LAYERS if name == prefix or name.startswith(prefix + ".")), key=len)
    return LAYERS[best]


def known(name: str, modules: set[str]) -> str | None:
    """The package module an import names (``from ckptdiff.x import y`` may name module ``ckptdiff.x.y``)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(path: Path, name: str, modules: set[str]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            stem = f"{base}.{node.module}" if node.level and node.module else base if node.level else node.module or ""
            # ``from P import m`` of a module m imports P.m (and P, which a package's own modules already run);
            # of any other name, it imports P itself: a parent package's __init__ too
            targets = [f"{stem}.{alias.name}" if f"{stem}.{alias.name}" in modules else stem for alias in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("ckptdiff."):
            targets = [node.value] if node.value in modules else []  # an importlib registry entry
        elif isinstance(node, ast.JoinedStr):  # f"{__name__}.{name}": every module of this package is reachable
            head = node.values[0] if node.values else None
            if (
                isinstance(head, ast.FormattedValue)
                and isinstance(head.value, ast.Name)
                and head.value.id == "__name__"
            ):
                targets = [m for m in modules if m.startswith(name + ".") and m.count(".") == name.count(".") + 1]
        for target in targets:
            module = known(target, modules)
            if module is not None and module != name:
                found.add(module)
    return found


def graph() -> dict[str, set[str]]:
    paths = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    modules = set(paths)
    return {name: imports_of(path, name, modules) for name, path in paths.items()}


def test_every_import_goes_down_the_layer_table() -> None:
    upward = sorted(
        f"{name} ({layer(name)}) imports {target} ({layer(target)})"
        for name, targets in graph().items()
        for target in targets
        if layer(target) > layer(name)
    )
    assert upward == []


def test_no_import_cycle() -> None:
    """No cycle, leaving out a module's imports of its own ancestor packages: Python runs a package's __init__
    before any of its modules, so ``from . import X`` there finds X already defined (the layer test still counts
    those imports, so none can point up)."""
    edges = {
        name: {target for target in targets if not name.startswith(target + ".")} for name, targets in graph().items()
    }
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for target in sorted(edges.get(node, ())):
            if state.get(target) == 1:
                cycles.append(stack[stack.index(target) :] + [target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    assert cycles == []


def test_the_checker_sees_lazy_typed_and_registry_imports() -> None:
    edges = graph()
    assert "ckptdiff.formats.json" in edges["ckptdiff.formats"]  # the format registry
    assert "ckptdiff.pipeline" in edges["ckptdiff"]  # compare() imports it inside the function
    assert "ckptdiff.report" in edges["ckptdiff.formats"]  # under TYPE_CHECKING
    assert "ckptdiff.sources" in edges["ckptdiff.sources.hub"]  # its parent package, for SourceOptions


def test_no_module_imports_the_package_root() -> None:
    """The root (``ckptdiff/__init__.py``, the API) is the top layer: ``from .. import __version__`` inside a
    function would be an upward arrow (the version lives in ``ckptdiff.version``)."""
    assert sorted(name for name, targets in graph().items() if "ckptdiff" in targets) == []
