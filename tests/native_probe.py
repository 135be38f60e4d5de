"""Runs in a fresh process that never imports opsmith: loads a native op library and reports, as JSON on the
last line of stdout, what the tests compare with the Python ops.

    python tests/native_probe.py LIB meta CASES.json    schemas, Meta outputs, CPU-tensor errors, meta autograd
    python tests/native_probe.py LIB gpu DATA.pt        eager, compile, export and CUDA-graph outputs vs the
                                                        JIT op's, bit for bit (forward and backward)
    python tests/native_probe.py LIB stable-gpu DATA.pt the same for a stable-ABI library (static shapes, no
                                                        backward)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch


def _op(name: str):
    ns, op = name.split("::")
    return getattr(getattr(torch.ops, ns), op).default


def _first_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0]}"


def meta(cases: list[dict]) -> dict:
    """Per op: schema, Meta outputs (shape, dtype) for the given input specs, the error for a CPU tensor."""
    out: dict = {}
    for c in cases:
        op = _op(c["op"])
        args = [torch.empty(a["shape"], dtype=getattr(torch, a["dtype"]), device="meta") if isinstance(a, dict) else a
                for a in c["args"]]  # fmt: skip
        got = op(*args)
        got = got if isinstance(got, tuple) else () if got is None else (got,)
        cpu = [torch.randn(a.shape).to(a.dtype) if isinstance(a, torch.Tensor) else a for a in args]
        try:
            op(*cpu)
            err = "no error"
        except Exception as e:
            err = _first_line(e)
        out[c["op"]] = {"schema": str(op._schema), "outputs": [[list(t.shape), str(t.dtype)] for t in got], "cpu": err}
        if c.get("grad"):  # a backward that is one op (not a program): its Autograd kernel calls that op
            leaves = [a.detach().requires_grad_() for a in args if isinstance(a, torch.Tensor)]
            it = iter(leaves)
            res = op(*[next(it) if isinstance(a, torch.Tensor) else a for a in args])
            gs = torch.autograd.grad(res.sum(), leaves)
            out[c["op"]]["grads"] = [[list(g.shape), str(g.dtype)] for g in gs]
            try:
                torch.autograd.grad(op(leaves[0]).sum(), leaves[:1], create_graph=True)  # a one-input op
                out[c["op"]]["double"] = "no error"
            except Exception as e:
                out[c["op"]]["double"] = _first_line(e)
    grads = {}
    for impl in ("cuda", "triton"):
        name = f"opsmith::rmsnorm_{impl}"
        if not hasattr(torch.ops.opsmith, f"rmsnorm_{impl}"):
            continue
        x = torch.empty(6, 64, device="meta", dtype=torch.bfloat16).requires_grad_()
        w = torch.empty(64, device="meta", dtype=torch.bfloat16).requires_grad_()
        y = _op(name)(x, w, 1e-6)
        gx, gw = torch.autograd.grad(y.sum(), (x, w))
        (only_x,) = torch.autograd.grad(_op(name)(x, w, 1e-6).sum(), (x,))
        try:
            torch.autograd.grad(_op(name)(x, w, 1e-6).sum(), (x,), create_graph=True)
            double = "no error"
        except Exception as e:
            double = _first_line(e)
        grads[name] = {"dx": [list(gx.shape), str(gx.dtype)], "dw": [list(gw.shape), str(gw.dtype)],
                       "only_x": list(only_x.shape), "double": double}  # fmt: skip
    return {"ops": out, "grads": grads}


def _same(a, b) -> bool:
    a = a if isinstance(a, tuple | list) else (a,)
    b = b if isinstance(b, tuple | list) else (b,)
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def gpu(data: list[dict], stable: bool = False) -> dict:
    """Every case through every way of calling the op, compared bit for bit with what the JIT op gave.
    ``stable``: a stable-ABI library, whose Meta kernel takes concrete sizes (compile with static shapes) and
    which has no Autograd kernels (gradients are not compared)."""
    failures: list[str] = []
    ran = 0
    for c in data:
        op, args, want = _op(c["op"]), c["args"], c["want"]
        mutated = c.get("mutated")

        def call(fn, args=args, mutated=mutated):
            a = [x.clone() if isinstance(x, torch.Tensor) else x for x in args]
            r = fn(*a)
            return tuple(a[k] for k in mutated) if mutated else r

        got = call(op)
        if not _same(got, want):
            failures.append(f"{c['op']}: eager output differs from the JIT op's")
        torch._dynamo.reset()  # one lambda's code object for every op: a fresh start each, not recompiles
        if not mutated:
            compiled = torch.compile(lambda *a, op=op: op(*a), fullgraph=True, dynamic=not stable)
            if not _same(call(compiled), want):
                failures.append(f"{c['op']}: torch.compile(fullgraph=True, dynamic={not stable}) output differs")

            class M(torch.nn.Module):
                def forward(self, *a, op=op):
                    return op(*a)

            ep = torch.export.export(M(), tuple(args))
            if not _same(call(ep.module()), want):
                failures.append(f"{c['op']}: torch.export output differs")
        static = [x.clone() if isinstance(x, torch.Tensor) else x for x in args]
        g = torch.cuda.CUDAGraph()
        op(*[x.clone() if isinstance(x, torch.Tensor) else x for x in static])  # warm-up (loads the module)
        with torch.cuda.graph(g):
            captured = op(*static)
        for k, x in enumerate(static):  # the graph reads the static inputs: refill them, then replay
            if isinstance(x, torch.Tensor):
                x.copy_(args[k])
        g.replay()
        torch.cuda.synchronize()
        result = tuple(static[k] for k in mutated) if mutated else captured
        if not _same(result, want):
            failures.append(f"{c['op']}: CUDA graph replay output differs")
        if "grad_out" in c and not stable:
            leaves = [x.clone().requires_grad_() if isinstance(x, torch.Tensor) else x for x in args]
            y = op(*leaves)
            grads = torch.autograd.grad(y, [x for x in leaves if isinstance(x, torch.Tensor)], c["grad_out"])
            if not _same(tuple(grads), c["want_grads"]):
                failures.append(f"{c['op']}: backward differs from the JIT op's")
            torch._dynamo.reset()
            compiled = torch.compile(lambda *a, op=op: op(*a), fullgraph=True, dynamic=True)
            leaves = [x.clone().requires_grad_() if isinstance(x, torch.Tensor) else x for x in args]
            grads = torch.autograd.grad(compiled(*leaves), [x for x in leaves if isinstance(x, torch.Tensor)],
                                        c["grad_out"])  # fmt: skip
            if not _same(tuple(grads), c["want_grads"]):
                failures.append(f"{c['op']}: backward under torch.compile differs from the JIT op's")
        ran += 1
    return {"ran": ran, "failures": failures, "opsmith_imported": "opsmith" in sys.modules}


if __name__ == "__main__":
    lib, mode, data = sys.argv[1:4]
    torch.ops.load_library(lib)
    if mode == "meta":
        result = meta(json.loads(Path(data).read_text()))
    else:
        result = gpu(torch.load(data, weights_only=True), stable=mode == "stable-gpu")
    result["opsmith_imported"] = "opsmith" in sys.modules
    print(json.dumps(result))
