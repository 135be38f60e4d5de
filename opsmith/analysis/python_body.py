"""Reads of a Python kernel body (a ``@triton.jit`` function) from its AST.

A parameter is read where the body names it (``ast.Name`` in load context). Assignments make dependencies
(``X_ptr += row * X_row_stride``: ``X_ptr`` now depends on ``X_row_stride``). An address is the pointer argument
of a memory access: the first argument (or ``pointer=``/``base=``) of ``tl.load``, ``tl.store``, ``tl.atomic_*``;
the base and the strides of ``tl.make_block_ptr`` and ``tl.make_tensor_descriptor`` (the strides address the
base); the object of a method access (``desc.store(offsets, v)``: the descriptor); and each argument of a call to
a helper (a plain name, ``_attn_inner(acc, K + offset, ...)``) that names a parameter itself, which the helper may
access. Assignments count how often they replace a name's value, so ``KernelReads.certain`` can leave out what
runs through a name given several values.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any

from .reads import KernelReads, addresses_of

__all__ = ["python_reads", "strings_of"]

_ACCESS = {"load", "store", "make_block_ptr", "make_tensor_descriptor", "atomic_add", "atomic_max", "atomic_min",
           "atomic_and", "atomic_or", "atomic_xor", "atomic_xchg", "atomic_cas"}  # fmt: skip


#: Accesses whose addresses come from a base and explicit strides (``tl.make_tensor_descriptor(Y, shape, strides=
#: [stride_x, 1], ...)``, then ``desc.store(...)``): both are the address.
_DESCRIBED = {"make_block_ptr", "make_tensor_descriptor"}


def _function(kernel: Any) -> Any:
    """The plain Python function under ``@triton.jit`` (and any wrapper with ``.fn``)."""
    fn = kernel
    for _ in range(8):
        if inspect.isfunction(fn):
            return fn
        fn = getattr(fn, "fn", None)
    raise TypeError("no Python function under the kernel")


def _names(node: ast.AST | None) -> set[str]:
    if node is None:
        return set()
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _value_names(node: ast.AST | None) -> set[str]:
    """The names a value depends on. A loaded value (``y = tl.load(Y_ptr)``) depends on memory, not on the
    address it came from: Liger's ``tl.load(weight_ptr + y)`` indexes by data, not by Y's stride."""
    if node is None:
        return set()
    out: set[str] = set()
    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Call) and _callee(n) in ("load", "atomic_add", "atomic_max", "atomic_min", "atomic_xchg",
                                                       "atomic_cas", "atomic_and", "atomic_or", "atomic_xor"):  # fmt: skip
            continue
        if isinstance(n, ast.Name):
            out.add(n.id)
        todo += list(ast.iter_child_nodes(n))
    return out


def _callee(n: ast.Call) -> str:
    f = n.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _targets(t: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(t) if isinstance(n, ast.Name)]


def python_reads(kernel: Any) -> KernelReads:
    fn = _function(kernel)
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))
    a = node.args
    params = tuple(p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs))
    deps: dict[str, set[str]] = {}
    given: dict[str, int] = {}  # how many assignments replace each name's value (``x = x + d`` accumulates)
    read: set[str] = set()
    accesses: list[ast.AST] = []
    helper_args: list[ast.AST] = []
    for stmt in node.body:
        for n in ast.walk(stmt):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                read.add(n.id)
            elif isinstance(n, ast.Assign | ast.AnnAssign | ast.AugAssign):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                value = _value_names(n.value)
                for t in targets:
                    for name in _targets(t):
                        deps.setdefault(name, set()).update(value)
                        if not isinstance(n, ast.AugAssign) and name not in value:
                            given[name] = given.get(name, 0) + 1
            elif isinstance(n, ast.For):
                for name in _targets(n.target):
                    deps.setdefault(name, set()).update(_value_names(n.iter))
                    given[name] = given.get(name, 0) + 1
            elif isinstance(n, ast.Call):
                f = n.func
                if _callee(n) in ("load", "store") and isinstance(f, ast.Attribute) and not (
                        isinstance(f.value, ast.Name) and f.value.id in ("tl", "triton", "language")):  # fmt: skip
                    accesses.append(f.value)  # ``desc.store(offsets, v)``: the descriptor is the address
                elif _callee(n) in _ACCESS:
                    ptr = next((k.value for k in n.keywords if k.arg in ("pointer", "base", "ptr")), None)
                    accesses.append(ptr if ptr is not None else n.args[0] if n.args else None)
                    if _callee(n) in _DESCRIBED:  # a block pointer's or descriptor's strides address its base
                        strides = next((k.value for k in n.keywords if k.arg == "strides"), None)
                        accesses[-1] = ast.Tuple([accesses[-1], strides if strides is not None else
                                                  n.args[2] if len(n.args) > 2 else ast.Tuple([])])  # fmt: skip
                elif isinstance(f, ast.Name):  # a @triton.jit helper: an argument naming a parameter itself may
                    # be an address it accesses (``K + offset``); one that only derives from parameters (``acc``,
                    # ``q``) carries values, and following it would tie every tensor to every other
                    helper_args += [*n.args, *(k.value for k in n.keywords)]
    # An augmented assignment reads its target too (``X_ptr += ...`` reads X_ptr).
    read |= {t.target.id for t in ast.walk(node) if isinstance(t, ast.AugAssign) and isinstance(t.target, ast.Name)}
    pset = set(params)
    accesses += [a for a in helper_args if _names(a) & pset]
    exprs = [_names(e) for e in accesses if e is not None]
    several = {n for n, c in given.items() if c > 1}
    return KernelReads(params, frozenset(read & pset), addresses_of(exprs, deps, pset), "the Triton function's source",
                       addresses_of(exprs, deps, pset, several))  # fmt: skip


def strings_of(fn: Any) -> set[str]:
    """The string constants of a function's code and of the code it nests (a heuristic's ``args["n_rows"]``)."""
    out: set[str] = set()
    todo = [getattr(fn, "__code__", None)]
    while todo:
        code = todo.pop()
        if code is None:
            continue
        for c in code.co_consts:
            if isinstance(c, str):
                out.add(c)
            elif hasattr(c, "co_consts"):
                todo.append(c)
    return out
