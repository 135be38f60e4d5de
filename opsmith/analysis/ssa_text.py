"""Dataflow over a compiler's SSA text: Triton's TTIR (MLIR) and NVRTC's PTX, as ``reads.KernelReads``.

Both are read the same way: every defined value depends on the operands of the instruction that defines it,
except a value loaded from memory, which depends on memory and not on its address (Liger's ``tl.load(weight_ptr
+ y)`` indexes by data, not by the stride that found ``y``). An access (a load, a store, an atomic, a descriptor
or block pointer access) is addressed by everything its pointer operand depends on. After SSA construction,
inlining and dead-code removal, a name the source reused for two tensors' offsets is two values, a macro or a
helper is its expansion, a compound assignment is an add: nothing the source spells differently needs a rule of
its own, and a flow found here is a flow the compiled kernel has (``KernelReads.certain`` is ``addresses``).

A PTX register given a value in two places (a loop's phi, lowered to moves) keeps the union of both: both
values reach it, so that too is a real flow.
"""

from __future__ import annotations

import linecache
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from .reads import KernelReads, addresses_of, closure

__all__ = ["flows", "ptx_flows", "ttir_flows"]

_LOC = re.compile(r'\bloc\((?:[^()"]|"[^"]*"|\((?:[^()"]|"[^"]*"|\([^()]*\))*\))*\)')
_VALUE = re.compile(r"%[\w.$-]+(?:#\d+)?")
_DEF = re.compile(r"^\s*((?:%[\w.$-]+(?::\d+)?\s*,\s*)*%[\w.$-]+(?::\d+)?)\s*=\s*(\"?[\w.]+\"?)(.*)$")
_BLOCK_ARGS = re.compile(r"^\s*\^\w+\((.*)\)\s*:\s*$")
_ITER = re.compile(r"(%[\w.$-]+)\s*=\s*(%[\w.$-]+(?:#\d+)?)")


def flows(params: Iterable[str], deps: dict[str, set[str]], accesses: list[set[str]], used: set[str],
          where: str, at: list[str] | None = None) -> KernelReads:  # fmt: skip
    """``KernelReads`` from a body's value graph: ``params`` the kernel's parameter values in order (already
    named as the declaration names them), ``used`` every value some instruction reads, ``at`` each access's
    source line ("line N: text", or "")."""
    names = tuple(params)
    pset = set(names)
    addresses = addresses_of(accesses, deps, pset)
    lines: dict[tuple[str, str], str] = {}
    for access, line in zip(accesses, at or (), strict=False):
        if line:
            tied = closure(deps, access) & pset
            for p in tied:
                for q in tied:
                    lines.setdefault((p, q), line)
    return KernelReads(names, frozenset(used & pset), addresses, where, addresses, lines=lines)


def _quoted(path: str, line: int, text: str | None = None) -> str:
    """ "line N: the source there", from ``text`` (CUDA C++: the registered string) or the file (Triton)."""
    if text is not None:
        rows = text.splitlines()
        src = rows[line - 1].strip() if 0 < line <= len(rows) else ""
    else:
        src = linecache.getline(path, line).strip()
    return f"line {line}: {src}" if src else ""


def _ttir_locations(text: str) -> dict[str, tuple[str, int]]:
    """TTIR's location aliases (``#loc7 = loc("file.py":15:12)``), each resolved to the kernel's own (file, line):
    a helper inlined at a call site (``callsite(#inner at #outer)``) is quoted at the call."""
    raw = dict(re.findall(r"^(#loc\d*) = loc\((.*)\)\s*$", text, re.M))

    def resolve(v: str, depth: int = 0) -> tuple[str, int] | None:
        if depth > 32:
            return None
        if m := re.match(r'"([^"]*)":(\d+):\d+', v):
            return m.group(1), int(m.group(2))
        if m := re.match(r"callsite\((#loc\d*) at (#loc\d*)\)", v):
            return resolve(m.group(2), depth + 1)
        if m := re.match(r'"[^"]*"\((#loc\d*)\)', v):
            return resolve(m.group(1), depth + 1)
        if v in raw:
            return resolve(raw[v], depth + 1)
        return None

    return {k: r for k in raw if (r := resolve(k)) is not None}


# -- TTIR ----------------------------------------------------------------------------------------------------

#: Ops whose results are memory's values, not functions of their operands.
_TT_DATA = ("tt.load", "tt.atomic_rmw", "tt.atomic_cas", "tt.descriptor_load", "tt.descriptor_gather",
            "tt.experimental_descriptor_load", "tt.descriptor_reduce")  # fmt: skip
#: Ops that access memory through their first value operand.
_TT_ACCESS = (*_TT_DATA, "tt.store", "tt.descriptor_store", "tt.descriptor_scatter",
              "tt.experimental_descriptor_store")  # fmt: skip
#: Ops whose regions feed their results (scf.for's iter_args, scf.if's branches, tt.reduce's combiner).
_YIELDS = ("scf.yield", "scf.condition", "tt.reduce.return", "tt.scan.return", "tt.map_elementwise.return")


_FOR = re.compile(r"(%[\w.$-]+)\s*=\s*(%[\w.$-]+)\s+to\s+(%[\w.$-]+)\s+step\s+(%[\w.$-]+)")
_CONST = re.compile(r"^(%[\w.$-]+)\s*=\s*arith\.constant\s+(-?\d+)\s*:")


def _results(spelled: str) -> list[str]:
    """An op's result names as its users spell them: ``%r`` for one, ``%r#0``... for a packed ``%r:2``."""
    out = []
    for r in spelled.split(","):
        name, _, count = r.strip().partition(":")
        out += [f"{name}#{i}" for i in range(int(count))] if count else [name]
    return out


@dataclass
class _Region:
    """An op with regions, while its body is read: what its yields and block arguments feed."""

    op: str
    results: list[str]
    carried: list[str]  # scf.for's iter_args, scf.while's "before" arguments
    operands: list[str]
    after: list[str] = field(default_factory=list)  # scf.while's "do" arguments
    condition: list[str] | None = None  # scf.while: the values scf.condition passes on
    loop: int | None = None  # scf.for: its index among the loops (its location comes on its closing line)

    def block_args(self, args: list[str], deps: dict[str, set[str]]) -> None:
        """A region's ``^bb0(...)``: scf.while's "do" region gets what scf.condition passes, position by position;
        a combiner (tt.reduce, tt.scan) gets its op's operands."""
        if self.op == "scf.while" and self.condition is not None and len(self.condition) == len(args):
            for a, v in zip(args, self.condition, strict=True):
                deps.setdefault(a, set()).add(v)
            self.after += args
            return
        for a in args:
            deps.setdefault(a, set()).update(self.operands)
        self.carried += args

    def yields(self, op: str, operands: list[str], deps: dict[str, set[str]]) -> None:
        """A yield feeds the op's results and what it carries to the next iteration: position by position for
        scf.for, scf.if and scf.while (a loop carrying two pointers keeps them apart), all to all elsewhere."""
        if self.op == "scf.while" and op == "scf.condition":
            self.condition = operands[1:]
            pairs = [(self.results, operands[1:])]
        elif self.op == "scf.while":
            pairs = [(self.carried, operands)]
        elif self.op in ("scf.for", "scf.if"):
            pairs = [(self.results, operands), (self.carried, operands)]
        else:
            pairs = []
        if pairs and all(len(t) in (0, len(v)) for t, v in pairs):
            for t, v in pairs:
                for r, x in zip(t, v if t else (), strict=False):
                    deps.setdefault(r, set()).add(x)
            return
        for r in self.results + self.carried + self.after:
            deps.setdefault(r, set()).update(operands)


def ttir_flows(text: str, arg_names: list[str]) -> KernelReads:
    """The reads of the one ``tt.func public`` in ``text`` (after the ttir stage: inlined, canonicalized), its
    arguments named ``arg_names`` in order (the kernel's runtime parameters).

    A loop's induction variable depends on its start and step, not its bound: a size that reaches a loop's bound
    and no load, store or branch (``for i in range(0, N, BLOCK)`` over unmasked blocks) is ``loop_bounds``."""
    body = re.sub(r"loc\((#loc\d*)\)\s*$", r"@@\1", text, flags=re.M)  # each op's own location, kept
    body = _LOC.sub("", body)
    head = re.search(r"tt\.func\s+public\s+@[\w$.]+\((.*?)\)\s*(?:attributes|\{)", body, re.S)
    if head is None:
        raise ValueError("no public tt.func in the TTIR")
    if "tt.call" in body:
        raise ValueError("the TTIR calls a function Triton did not inline (noinline=True)")
    args = [m.group(0) for m in re.finditer(r"%[\w.$-]+(?=\s*:)", head.group(1))]
    if len(args) != len(arg_names):
        raise ValueError(f"the TTIR function takes {len(args)} arguments, the kernel {len(arg_names)}")
    rename = dict(zip(args, arg_names, strict=True))
    locations = _ttir_locations(text)
    at: list[str] = []  # each access's quoted line
    deps: dict[str, set[str]] = {}
    accesses: list[set[str]] = []
    used: set[str] = set()
    sinks: set[str] = set()  # what a load, store or branch reads: a size reaching one bounds an access
    loops: list[tuple[str, str]] = []  # (bound, step) per scf.for
    loop_at: list[str] = []  # each loop's quoted line
    constants: dict[str, int] = {}
    stack: list[_Region] = []
    for line in body[head.end():].splitlines():  # fmt: skip
        line, _, loc = line.strip().partition("@@")
        line = line.strip()
        if not line:
            continue
        closes = line.startswith("}")
        if closes and stack and not line.endswith("{"):
            region = stack.pop()
            if region.loop is not None and loc in locations:  # MLIR prints a region op's location after it
                loop_at[region.loop] = _quoted(*locations[loc])
        if (m := _BLOCK_ARGS.match(line)) and stack:
            stack[-1].block_args(_VALUE.findall(m.group(1)), deps)
            continue
        if c := _CONST.match(line):
            constants[c.group(1)] = int(c.group(2))
        m = _DEF.match(line)
        results = _results(m.group(1)) if m else []
        if m:
            op, rest = m.group(2).strip('"'), m.group(3)
        else:  # ``tt.store %p, %v``, ``scf.condition(%c) %a, %b``
            op = re.match(r'"?([\w.]*)', line).group(1)  # type: ignore[union-attr]
            rest = line[len(op) + line.startswith('"') :]
        operands = [rename.get(v, v) for v in _VALUE.findall(rest)]
        carried: list[str] = []
        if op in ("scf.for", "scf.while"):  # ``scf.for %iv = %lb to %ub step %s iter_args(%acc = %init)``
            f = _FOR.search(rest) if op == "scf.for" else None
            if f is not None:
                iv, lb, ub, step = (rename.get(v, v) for v in f.groups())
                deps.setdefault(iv, set()).update((lb, step))
                loops.append((ub, step))
                loop_at.append("")
            for a, init in _ITER.findall(rest[f.end() :] if f is not None else rest):
                deps.setdefault(a, set()).add(rename.get(init, init))
                carried.append(a)
            operands = [v for v in operands if v not in carried and (f is None or v != f.group(1))]
        used.update(operands)
        if op in _YIELDS and stack:
            stack[-1].yields(op, operands, deps)
            if op == "scf.condition":
                sinks.update(operands[:1])
            continue
        for r in results:
            deps.setdefault(r, set()).update(() if op in _TT_DATA else operands)
        if op in _TT_ACCESS and operands:
            accesses.append({operands[0]})
            at.append(_quoted(*locations[loc]) if loc in locations else "")
            sinks.update(operands)
        elif op in ("scf.if", "cf.cond_br", "tt.assert"):
            sinks.update(operands[:1])
        if line.endswith("{") and not closes:
            stack.append(_Region(op, results, carried, operands, loop=len(loops) - 1 if op == "scf.for" else None))
    reads = flows(arg_names, deps, accesses, used, "the kernel's TTIR", at)
    bounds = _loop_bounds(reads, deps, sinks, loops, constants)
    lines = {("", p): q for p, k in bounds.items() for (ub, _), q in zip(loops, loop_at, strict=True)
             if q and p in closure(deps, [ub])}  # fmt: skip
    return replace(reads, loop_bounds=bounds, lines=reads.lines | lines)


def _loop_bounds(reads: KernelReads, deps: dict[str, set[str]], sinks: set[str], loops: list[tuple[str, str]],
                 constants: dict[str, int]) -> dict[str, int]:  # fmt: skip
    """Parameters that reach the bound of a loop stepping by a constant over one and no access or branch."""
    bounding = closure(deps, sinks)
    out = {}
    for ub, step in loops:
        k = constants.get(step, 0)
        for p in (closure(deps, [ub]) & reads.read) - bounding:
            if k > 1:
                out[p] = k
    return out


# -- PTX -----------------------------------------------------------------------------------------------------

_PTX_REG = re.compile(r"%[\w$]+")
#: Functions of the CUDA runtime a kernel calls without inlining (``assert``, ``printf``, device ``malloc``).
_PTX_RUNTIME = ("__assertfail", "vprintf", "malloc", "free", "__nv_")
_PTX_MEMORY = re.compile(r"^(ld|ldu|st|atom|red|cp\.async|prefetch|multimem)\b")


_PTX_LOC = re.compile(r"^\.loc\s+(\d+)\s+(\d+)\s+\d+(?:.*inlined_at\s+(\d+)\s+(\d+))?")


def ptx_flows(ptx: str, entry: str, arg_names: list[str], source: str | None = None,
              source_name: str = "") -> KernelReads:  # fmt: skip
    """The reads of ``.entry entry`` in ``ptx``, its ``.param``s named ``arg_names`` in order. A struct passed by
    value is one parameter: a member read is a read of it. With line info (``-lineinfo``: ``.loc`` directives),
    accesses are quoted from ``source``, the file PTX calls ``source_name``."""
    m = re.search(r"\.entry\s+" + re.escape(entry) + r"\s*\((.*?)\)\s*(?:\.[\w]+[^{]*)?\{", ptx, re.S)
    if m is None:
        raise ValueError(f"no .entry {entry} in the PTX")
    params = re.findall(r"\.param\s+[^,]*?([\w$]+)\s*(?:\[\d+\])?\s*(?:,|$)", m.group(1).strip())
    if len(params) != len(arg_names):
        raise ValueError(f"the PTX entry takes {len(params)} parameters, the kernel {len(arg_names)}")
    rename = dict(zip(params, arg_names, strict=True))
    body, depth = ptx[m.end() :], 1
    end = len(body)
    for i, ch in enumerate(body):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth == 0:
            end = i
            break
    files = {n: name for n, name in re.findall(r'^\s*\.file\s+(\d+)\s+"([^"]*)"', ptx, re.M)}
    deps: dict[str, set[str]] = {}
    accesses: list[set[str]] = []
    at: list[str] = []
    used: set[str] = set()
    line = ""
    for chunk in body[:end].split(";"):
        kept = []
        for row in chunk.splitlines():  # directives, braces and labels before an instruction, then the instruction
            row = re.sub(r"//.*", "", row).strip()
            if (loc := _PTX_LOC.match(row)) is not None:
                f, n = (loc.group(3), loc.group(4)) if loc.group(3) else (loc.group(1), loc.group(2))
                ours = source is not None and files.get(f, "").rsplit("/", 1)[-1] == source_name  # not a header
                line = (_quoted("", int(n), source) if ours else "") or line
                continue
            row = re.sub(r"^(\$?\w+:\s*)+", "", row.lstrip("{} \t"))  # labels
            if row and (kept or not row.startswith(".")):
                kept.append(row)
        stmt = re.sub(r"^@!?%\w+\s+", "", " ".join(kept))  # a guard predicate decides whether, not where
        if not stmt:
            continue
        opcode, _, rest = stmt.partition(" ")
        if opcode.startswith(("bra", "ret", "exit", "bar", "membar", "fence")):
            continue
        if opcode.startswith("call"):
            callee = re.search(r"([A-Za-z_$][\w$]*)\s*,", re.sub(r"^\s*\([^)]*\)\s*,", "", rest))
            if callee is None or not callee.group(1).startswith(_PTX_RUNTIME):
                raise ValueError("the entry calls a function the compiler did not inline")
            continue  # assert's and printf's arguments are values (a message, a format), no kernel address
        names = [rename.get(t, t) for t in re.findall(r"[\w$]+_param_\d+", rest)]
        used.update(names)
        inside = set(_PTX_REG.findall(" ".join(re.findall(r"\[([^\]]*)\]", rest))))
        regs = _PTX_REG.findall(re.sub(r"\[[^\]]*\]", " ", rest))
        memory = _PTX_MEMORY.match(opcode)
        if memory and not opcode.startswith(("ld.param", "st.param")):
            accesses.append(inside)
            at.append(line)
            used.update(inside)
            if opcode.startswith(("st", "red", "prefetch")):  # no result: every register is a value stored
                used.update(regs)
                continue
        # The results: the first operand, a ``{%a, %b}`` vector of them, or ``%p|%q`` (setp's two predicates).
        first = re.match(r"\s*(\{[^}]*\}|%[\w$]+(?:\|%[\w$]+)?)", rest)
        dsts = _PTX_REG.findall(first.group(1)) if first else []
        srcs = [r for r in regs if r not in dsts] if dsts else regs
        used.update(srcs)
        for dst in dsts:
            if opcode.startswith("ld.param"):
                deps.setdefault(dst, set()).update(names, inside)
            elif memory:
                deps.setdefault(dst, set())  # a loaded (or atomically returned) value is memory's
            else:
                deps.setdefault(dst, set()).update(srcs, names)
    return flows(arg_names, deps, accesses, used, "the kernel's PTX", at)
