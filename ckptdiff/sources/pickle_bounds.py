"""A torch pickle's size as a tree, counted from its opcodes before it is unpickled (nothing in it runs).

A pickle can share one object under many references: unpickling and walking it then costs once per reference,
so a few kilobytes can expand a millionfold. One linear pass over the opcodes counts the objects, the references
and the size they expand to, and ``check_expansion`` refuses a pickle past the bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import SourceError

#: The most objects data.pkl may unpickle to when each shared one is counted once per reference (what walking it,
#: or hashing or printing its tuples, costs), beyond its own objects counted twice: torch writes about one
#: reference per object, while a 10 KB pickle of lists each holding the last one 800 times expands 800³-fold.
MAX_EXPANSION_BEYOND_OBJECTS = 1_000_000
#: The deepest data.pkl may nest objects (a state dict is a handful of levels: checkpoint, state dict, the tensor's
#: rebuild arguments). The unpickler hashes a dict key tuple by recursing in C, without Python's recursion check:
#: a key nested 200,000 tuples deep, a few hundred kilobytes, overflows the stack and kills the process.
MAX_NESTING = 1_000


@dataclass(frozen=True)
class PickleShape:
    """What data.pkl builds, counted from its opcodes without running it: its ``opcodes``, the ``objects`` they
    make and their ``references`` (one object inside another, or left on the stack), the size it ``expands``
    to as a tree, each shared object counted once per reference, up to ``limit`` (past it: ``limit + 1``), and
    how deep it nests (``depth``: one object alone is 1)."""

    opcodes: int
    objects: int
    references: int
    expands: int
    limit: int
    depth: int


#: Opcodes that add to the container below their arguments instead of making a new object.
_IN_PLACE = frozenset(("APPEND", "APPENDS", "SETITEM", "SETITEMS", "ADDITEMS", "BUILD"))
_MARK = -1
#: What each opcode does to the stack, by kind: ("mark"|"put"|"memoize"|"get"|"dup"|"pop"|"pop_mark"|"none"), or
#: ("objects", items taken below a mark or from the top, whether it takes a mark, in place, pushes one).
_Effect = tuple[str, int, bool, bool, bool]
_EFFECTS: dict[str, _Effect] = {}


def _effects() -> dict[str, _Effect]:
    """Each opcode's stack effect, from pickletools' descriptions (computed once)."""
    if not _EFFECTS:
        import pickletools

        simple = {"MARK": "mark", "PUT": "put", "BINPUT": "put", "LONG_BINPUT": "put", "MEMOIZE": "memoize",
                  "GET": "get", "BINGET": "get", "LONG_BINGET": "get", "DUP": "dup", "POP": "pop",
                  "POP_MARK": "pop_mark", "PROTO": "none", "FRAME": "none", "STOP": "none"}  # fmt: skip
        for opcode in pickletools.opcodes:
            before = opcode.stack_before
            marked = pickletools.markobject in before
            below = before.index(pickletools.markobject) if marked else len(before)
            kind = simple.get(opcode.name, "objects")
            _EFFECTS[opcode.name] = (kind, below, marked, opcode.name in _IN_PLACE, bool(opcode.stack_after))
    return _EFFECTS


def pickle_shape(raw: bytes, beyond: int = MAX_EXPANSION_BEYOND_OBJECTS) -> PickleShape:
    """Count what ``raw`` builds in one pass over its opcodes (pickletools' stack effects; a memo get is one more
    reference to the object put), then its size as a tree, each object's computed once: linear in the pickle.
    The limit is twice the objects, plus ``beyond``. Raises ValueError (or IndexError, KeyError) for a pickle the
    unpickler would not read either."""
    import pickletools

    effects = _effects()
    children: list[list[int]] = []
    stack: list[int] = []
    memo: dict[Any, int] = {}
    opcodes = 0
    for opcode, argument, _ in pickletools.genops(raw):
        opcodes += 1
        kind, below, marked, in_place, pushes = effects[opcode.name]
        if kind == "objects":
            popped: list[int] = []
            if marked:
                mark = _last_mark(stack)
                popped = stack[mark + 1 :]
                del stack[mark:]
            if below:
                if len(stack) < below:
                    raise IndexError("the stack is empty")
                popped[:0] = stack[-below:]
                del stack[-below:]
            if _MARK in popped:
                raise ValueError("a mark where an object belongs")
            if in_place:
                children[popped[0]].extend(popped[1:])
                stack.append(popped[0])
            elif pushes:
                children.append(popped)
                stack.append(len(children) - 1)
        elif kind == "get":
            stack.append(memo[argument])
        elif kind in ("put", "memoize"):
            if stack[-1] == _MARK:
                raise ValueError("a mark is memoized")
            memo[len(memo) if kind == "memoize" else argument] = stack[-1]
        elif kind == "mark":
            stack.append(_MARK)
        elif kind == "dup":
            stack.append(stack[-1])
        elif kind == "pop":
            stack.pop()
        elif kind == "pop_mark":
            del stack[_last_mark(stack) :]
    roots = [item for item in stack if item != _MARK]
    limit = 2 * len(children) + beyond
    expands, depth = _tree_size(children, roots, limit)
    return PickleShape(opcodes, len(children), len(roots) + sum(map(len, children)), expands, limit, depth)


def _last_mark(stack: list[int]) -> int:
    for at in range(len(stack) - 1, -1, -1):
        if stack[at] == _MARK:
            return at
    raise ValueError("no mark on the stack")


def _tree_size(children: list[list[int]], roots: list[int], limit: int) -> tuple[int, int]:
    """The objects under ``roots``, each shared one counted once per reference, up to ``limit + 1``, and the
    deepest nesting among them. Depth first without recursion, each object's size computed once; a reference back
    to an object still being counted (a cycle) counts one."""
    size = [0] * len(children)  # 0: not counted yet
    depth = [0] * len(children)
    busy = [False] * len(children)
    total = 0
    for root in roots:
        pending = [(root, 0)]
        busy[root] = True
        while pending:
            node, at = pending[-1]
            kids = children[node]
            while at < len(kids) and (size[kids[at]] or busy[kids[at]]):
                at += 1
            if at < len(kids):
                pending[-1] = (node, at + 1)
                busy[kids[at]] = True
                pending.append((kids[at], 0))
                continue
            pending.pop()
            busy[node] = False
            size[node] = min(1 + sum(size[kid] or 1 for kid in kids), limit + 1)
            depth[node] = 1 + max((depth[kid] for kid in kids), default=0)
        total = min(total + size[root], limit + 1)
    return total, max((depth[root] for root in roots), default=0)


def check_expansion(raw: bytes, name: str) -> None:
    """Refuse a pickle whose shared references multiply what it builds, before it is unpickled: the unpickler
    hashes a shared tuple once per reference, and the state-dict search walks shared lists as often."""
    try:
        shape = pickle_shape(raw)
    except (ValueError, IndexError, KeyError) as err:
        raise SourceError(name, f"data.pkl is not a readable tensor pickle ({type(err).__name__}: {err})") from None
    if shape.expands > shape.limit:
        raise SourceError(
            name,
            f"data.pkl builds {shape.objects:,} objects that expand to over {shape.limit:,} through shared "
            "references (a pickle bomb, not a state dict)",
        )
    if shape.depth > MAX_NESTING:
        raise SourceError(
            name,
            f"data.pkl nests objects {shape.depth:,} deep, more than the {MAX_NESTING:,} ckptdiff reads (a pickle "
            "bomb, not a state dict)",
        )
