"""RMSNorm four ways: a PyTorch reference, a fused Triton op, a CUDA C++ op and a CuTe DSL op, each
differentiable.

    from opsmith.ops.rmsnorm import RMSNorm, LlamaRMSNorm, rms_norm
    norm = RMSNorm(4096, eps=1e-6, impl="triton").cuda()       # drop-in for torch.nn.RMSNorm
    y = rms_norm(x, weight, 1e-6, impl="cuda")                  # or "cute" (pip install 'opsmith[cute]')

Each kernel is registered through opsmith's one path (``opsmith::rmsnorm_triton``, ``opsmith::rmsnorm_cuda``,
``opsmith::rmsnorm_cute`` and their ``_backward`` ops) the first time it is used, and declares its backward
with ``Backward``: the backward op recomputes ``rstd`` from ``x`` (it reads the row anyway, so saving it would
only cost a write) and returns ``dx`` plus per-program partial sums of ``dweight``, which one ``sum`` reduces.
Every kernel indexes rows with 64 bits (``index_dtype="int64"``): tensors of more than 2^31 elements run. The
CuTe DSL kernels split long rows over a thread-block cluster (``kernels/rmsnorm_cute.py``), and so does the CUDA
C++ backward past 16,384 elements (``bwd_cluster`` in ``kernels/rmsnorm.cu``).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from importlib import resources
from typing import Literal

import torch
from torch._subclasses.fake_tensor import FakeTensor

from ..declare.spec import (
    Autotune,
    Backward,
    Buffer,
    Config,
    Dim,
    Grid,
    InputDecl,
    KernelSpec,
    Numel,
    OutputDecl,
    Reduction,
    SameAs,
    ScalarInput,
    Step,
    TuneDim,
)
from ..torchlib.registration import Op

__all__ = ["LlamaRMSNorm", "RMSNorm", "check_cases", "dweight_op", "reference_rms_norm", "rms_norm", "rmsnorm_ops"]

Impl = Literal["triton", "cuda", "cute", "torch"]
_LOCK = threading.Lock()
_OPS: dict[tuple[str, str], tuple[Op, Op]] = {}

#: Elements of rows that the persistent backward keeps in flight per SM: programs per SM are this over the
#: hidden size, within 1-8. Triton, bf16, 32,768 rows on an H200 (``bwd`` kernel alone): hidden 1,024 ran in
#: 55.8 us with 8 programs per SM (94.0 with 2), 2,048 in 103.9 with 4 (128.1 with 2), 4,096 in 199.8 with 2
#: (252.8 with 1, 203.3 with 4), 8,192 in 206.1 with 1 (209.4 with 2). Short rows need many programs: each
#: row's reduction is serial within its program. Persistent programs should all be resident (one of a second
#: wave starts only after a first-wave program finished all its rows).
_ROW_ELEMENTS_IN_FLIGHT_PER_SM = 8192


def _partials_per_sm(n: int, flavor: str) -> int:
    """Partial dweight rows (= persistent programs) per SM. CUDA: at least 2, since its grid is each config's
    resident blocks per SM (``MINB``, 1-8) within the partial's rows, and the rows it does not launch are zeroed."""
    per_sm = max(1, min(8, _ROW_ELEMENTS_IN_FLIGHT_PER_SM // max(n, 1)))
    return max(2, per_sm) if flavor == "cuda" else per_sm


def reference_rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
    """The PyTorch reference: float32 accumulation (float64 for float64), the result in x's dtype."""
    acc = x.double() if x.dtype == torch.float64 else x.float()
    y = acc * torch.rsqrt(acc.pow(2).mean(-1, keepdim=True) + eps)
    if weight is not None:
        y = y * weight.to(acc.dtype)
    return y.to(x.dtype)


def _clusters(blocks: str, c: str) -> str:
    """Persistent clusters of ``c`` blocks within ``blocks`` resident blocks, as a size expression. Clusters of 4
    and 8 must each fit in one GPC, which strands SMs: an H200 holds 30 clusters of 8 at two CTAs per SM, not
    33, and a 31st..33rd waits for a whole cluster's rows (CuTe DSL, hidden 65,536 bf16: 296 us with 33 partial
    rows, 231.6 with 30, 237.4 with 28); so 7/8 of them for clusters past 2 (an H100: at most 15 of 8 at one
    block per SM, ncu). ``c`` = 1 gives ``blocks``."""
    return f"{blocks} // {c} * (8 - min(1, {c} // 4)) // 8"


def _partial_rows(flavor: str) -> str:
    """Rows of the backward's partial-sum buffer, as a size expression: one per persistent program, within the
    rows of x (``_partials_per_sm`` programs per SM). CuTe DSL: one per persistent cluster, whose CTAs split a
    row (``rmsnorm_cute.cluster_size``: one per 8,192 elements, at most 8), two CTAs per SM in all."""
    n, least = "max(size(x, -1), 1)", 2 if flavor in ("cuda", "cute") else 1
    per_sm = f"max({least}, min(8, {_ROW_ELEMENTS_IN_FLIGHT_PER_SM} // {n}))"
    if flavor == "cuda":
        # Rows past 16,384 elements (the longest a block stages) take the cluster backward: a partial row per
        # cluster of 8 at 2 blocks per SM, or of 4 at 1 (33 on 132 SMs; the 264 partial rows of one per block
        # were 69 MB to zero and sum at hidden 65,536, 9% of the traffic). Each config launches as many of
        # them as its SHORT says the device holds at once; the rest are zeroed (256 KiB each at 65,536).
        c = f"(1 + 7 * min(1, {n} // 16385))"
        return f"min(numel(x) // {n}, max(1, sm_count * {per_sm} // {c}))"
    if flavor == "cute":
        c = f"min(8, cdiv({n}, 8192))"
        return f"min(numel(x) // {n}, max(1, {_clusters(f'sm_count * {per_sm}', c)}))"
    return f"min(numel(x) // {n}, sm_count * {per_sm})"


def _backward(bwd: Op, dweight: Op, flavor: str) -> Backward:
    """The backward as a program (plain data, so a native library runs it without Python): the backward kernel
    writes dx and per-program partial sums of dweight into a float32 (float64) buffer, then the dweight kernel
    sums the partial rows in a fixed order and casts to the weight's dtype. The second step runs only when the
    weight needs its gradient."""
    return Backward(
        fn=(Buffer("partial", shape=(_partial_rows(flavor), "size(x, -1)"), dtype="acc:x"),
            Step(bwd, ("grad_y", "x", "weight", "eps", "partial"), ("dx",)),
            Buffer("dweight", like="weight"),
            Step(dweight, ("partial", "dweight"))),
        args=("grad_y", "x", "weight", "eps"), grads=("x", "weight"), returns=("dx", "dweight"))  # fmt: skip


def _decl() -> dict:
    """The inputs every flavor declares: rows of ``C`` (``x: ("*B", "C")``), a weight of ``C`` that the kernels
    index by, a gradient of ``x``'s shape, and the float32 (float64) partial sums of dweight, a row of ``C`` per
    program. The dweight pass sums the partial rows into a tensor the caller allocates with the weight's dtype."""
    x, weight = InputDecl("x", shape=("*B", "C")), InputDecl("weight", shape=("C",))
    partial = InputDecl("partial", shape=("P", "C"), mutates=True, contiguous="require")
    return {"fwd_inputs": [x, weight, ScalarInput("eps", float)],
            "bwd_inputs": [InputDecl("grad_y", shape=("*B", "C")), x, weight, ScalarInput("eps", float), partial],
            "dw_inputs": [InputDecl("partial", shape=("P", "C"), contiguous="require"),
                          InputDecl("dweight", shape=("C",), mutates=True, contiguous="require")],
            "dw_extras": [Dim("P", "int64"), Dim("C", "int64")]}  # fmt: skip


def _register_triton(ns: str) -> tuple[Op, Op]:
    from ..api import triton_op
    from .kernels.rmsnorm_triton import rmsnorm_bwd_kernel, rmsnorm_dw_kernel, rmsnorm_fwd_kernel

    d = _decl()
    # (BLOCK, num_warps): each hidden size's best forward and backward on an H200 (bf16) is in the list:
    # 1,024 (1024, 4); 2,048 (2048, 4) and (2048, 8); 4,096 (4096, 8) and (4096, 16); 8,192 (8192, 16) and
    # (8192, 32): backward 206 us, against 350 looped with BLOCK 4,096; 16,384 (16384, 8); 65,536 (16384, 32):
    # forward 171 us against 204 with 16 warps. The others are their neighbours, for other GPUs and dtypes.
    shapes = [(1024, 2), (1024, 4), (1024, 8), (2048, 4), (2048, 8), (4096, 4), (4096, 8), (4096, 16), (8192, 8),
              (8192, 16), (8192, 32), (16384, 8), (16384, 16), (16384, 32)]  # fmt: skip
    configs = [Config({"BLOCK": b}, num_warps=w) for b, w in shapes]
    default = shapes.index((4096, 8))
    bwd = triton_op(f"{ns}::rmsnorm_triton_backward", rmsnorm_bwd_kernel, inputs=d["bwd_inputs"],
                    outputs=[OutputDecl("dx", SameAs("x"), dtype_from="x")],
                    extras=[Dim("C"), Numel("x", "int64")],
                    geometry=Grid(grid=("size(partial, 0)",)),  # one persistent program per partial row
                    autotune=Autotune(configs, key=[TuneDim("x", -1), TuneDim("x", None)], default=default),
                    index_dtype="int64")  # fmt: skip
    dweight = triton_op(f"{ns}::rmsnorm_triton_dweight", rmsnorm_dw_kernel, inputs=d["dw_inputs"], outputs=[],
                        extras=d["dw_extras"], geometry=Grid(grid=("cdiv(size(partial, -1), 32)",)),
                        index_dtype="int64")  # fmt: skip
    fwd = triton_op(
        f"{ns}::rmsnorm_triton",
        rmsnorm_fwd_kernel,
        inputs=d["fwd_inputs"],
        outputs=[OutputDecl("y", SameAs("x"))],
        extras=[Dim("C")],
        geometry=Reduction(reduce_dims=(-1,)),
        autotune=Autotune(configs, key=[TuneDim("x", -1), TuneDim("x", None)], default=default),
        backward=_backward(bwd, dweight, "triton"),
        index_dtype="int64",
    )
    return fwd, bwd


def _register_cuda(ns: str) -> tuple[Op, Op]:
    from ..api import cuda_kernel_op

    src = resources.files("opsmith.ops.kernels").joinpath("rmsnorm.cu").read_text()
    d = _decl()
    # (threads, 16-byte vectors per thread in registers): rows up to threads * maxv * 8 bf16 stay in registers.
    # (128, 1) last: a 1,024-element row in one vector per thread, without three unused vectors' registers.
    shapes = [(128, 4), (256, 2), (256, 4), (512, 1), (512, 2), (1024, 1), (1024, 2), (128, 1)]
    configs = [Config({"THREADS": t, "MAXV": v}) for t, v in shapes]
    # The backward's (threads, vectors, resident blocks per SM): 512-1,024 threads per SM and no register
    # spills (ncu, H200: MAXV 4 configs and 1,024 threads with MAXV 2 spill, and ran 1.2-2.5x slower). The
    # last two are for short rows (1,024 and 2,048 bf16), which want more, smaller blocks per SM (see
    # _ROW_ELEMENTS_IN_FLIGHT_PER_SM).
    bwd_shapes = [(512, 1, 2), (256, 2, 2), (512, 2, 1), (1024, 1, 1), (128, 1, 8), (256, 1, 4)]
    plain = {"LATE": 0, "STAGED": 0, "SMEM": 0, "CLUSTER": 1, "SHORT": 0, "OVERLAP": 0}  # each kind's other params
    bwd_configs = [
        Config({**plain, "THREADS": t, "MAXV": v, "MINB": b, "LATE": late}) for late in (0, 1) for t, v, b in bwd_shapes
    ]
    # Staged through shared memory (bwd_staged in rmsnorm.cu): rows up to threads * maxv * 8 bf16 (16,384 for the
    # first two) read once; 2 stages x (x, dy) x threads * maxv x 16 bytes of shared memory per block, within
    # the SM's 227 KiB for the resident blocks. H200, (8192, 16384) bf16, kernel alone: (512, 4, 1) 216.9 us,
    # (1024, 2, 1) 215.8 (90% of copy); (16384, 8192): (512, 2, 1) 204.2 (96%), (256, 4, 2) 216.7.
    bwd_configs += [
        Config({**plain, "THREADS": t, "MAXV": v, "MINB": b, "STAGED": 1, "SMEM": 64 * t * v})
        for t, v, b in [(512, 4, 1), (1024, 2, 1), (512, 2, 1), (256, 4, 2)]
    ]
    # Split over a cluster (bwd_cluster, sm_90+): (threads, vectors, blocks per SM, rows staged, cluster, short).
    # A block stages its slice of STAGED rows: 2 x 16 x threads * maxv bytes each. The clusters of 8 cover
    # 65,536 bf16 at 2 blocks per SM (the last two, 131,072 bf16 = 65,536 float32, at 1); the clusters of 4
    # cover 65,536 bf16 at 1 block per SM, three rows staged (196 KiB). A cluster must fit one GPC, so the SMs
    # hold fewer clusters than they have blocks for, by what the chip's GPC layout strands, and a persistent
    # cluster that does not fit waits for a whole cluster's rows: the grid is SHORT clusters fewer than the
    # blocks allow, and the tuner times each SHORT. H100, (2048, 65536) bf16, kernel alone
    # (benchmarks/probes/rmsnorm_bwd_cluster_count.py): 15 clusters of 8 at 1 block per SM and 30 of 4 fit
    # (326.0 and 338.9 us), 31 of 4 do not (403.2); more clusters were not faster (28 of 4: 329.6 us).
    cluster_shapes = [(256, 4, 2, 2, 8, 5), (256, 4, 2, 3, 8, 5), (512, 2, 2, 3, 8, 5)]
    cluster_shapes += [(512, 4, 1, 2, 8, short) for short in (1, 2)]
    cluster_shapes += [(512, 4, 1, 3, 4, short) for short in (3, 5)]
    # OVERLAP 1 (a row's exchange overlaps the previous row's dx writes) holds two rows and one in flight: the
    # three-stage shapes, and the clusters of 8 at one block per SM with a third stage (196 KiB).
    overlap_shapes = [s for s in cluster_shapes if s[3] == 3] + [(512, 4, 1, 3, 8, short) for short in (1, 2)]
    bwd_configs += [
        Config({**plain, "THREADS": t, "MAXV": v, "MINB": b, "STAGED": st, "SMEM": 32 * t * v * st, "CLUSTER": c,
                "SHORT": short, "OVERLAP": o})
        for o, shapes in ((0, cluster_shapes), (1, overlap_shapes))
        for t, v, b, st, c, short in shapes
    ]  # fmt: skip
    bwd = cuda_kernel_op(f"{ns}::rmsnorm_cuda_backward", KernelSpec(
        kernel_source=src, kernel_name="rmsnorm_bwd<{T_grad_y}, {T_x}, {T_weight}, {T_partial}, {THREADS}, {MAXV}, {MINB}, {LATE}, {STAGED}, {CLUSTER}, {OVERLAP}>",
        inputs=d["bwd_inputs"], outputs=[OutputDecl("dx", SameAs("x"), dtype_from="x")],
        extras=[Dim("C"), Numel("x", "int64"), Dim("P")],
        # The config's resident blocks per SM (its launch bounds) within the partial rows, in whole clusters.
        geometry=Grid(grid=("CLUSTER * max(1, min(size(partial, 0), sm_count * MINB // CLUSTER - SHORT))",),
                      block=("THREADS",), shared_mem="SMEM"),
        autotune=Autotune(bwd_configs, key=[TuneDim("x", -1), TuneDim("x", None)], default=0),
        index_dtype="int64"))  # fmt: skip
    dweight = cuda_kernel_op(f"{ns}::rmsnorm_cuda_dweight", KernelSpec(
        kernel_source=src, kernel_name="rmsnorm_dw<{T_partial}, {T_dweight}, 1024>", inputs=d["dw_inputs"],
        outputs=[], extras=d["dw_extras"], geometry=Grid(grid=("cdiv(size(partial, -1), 32)",), block=(1024,)),
        index_dtype="int64"))  # fmt: skip
    fwd = cuda_kernel_op(
        f"{ns}::rmsnorm_cuda",
        KernelSpec(
            kernel_source=src,
            kernel_name="rmsnorm_fwd<{T_x}, {T_weight}, {THREADS}, {MAXV}>",
            inputs=d["fwd_inputs"],
            outputs=[OutputDecl("y", SameAs("x"))],
            extras=[Dim("C")],
            geometry=Reduction(reduce_dims=(-1,), block_size="THREADS"),
            autotune=Autotune(configs, key=[TuneDim("x", -1), TuneDim("x", None)], default=1),
            index_dtype="int64",
        ),
        backward=_backward(bwd, dweight, "cuda"),
    )
    return fwd, bwd


def _register_cute(ns: str) -> tuple[Op, Op]:
    from ..api import cute_op
    from ..flavors.cute import cutlass_version

    cutlass_version()  # where CuTe DSL is missing: a ToolchainError naming the install, before the import below
    from .kernels import rmsnorm_cute as k

    d = _decl()
    # Threads per CTA; the backward's largest cluster (its partial buffer has a row per cluster of up to 8, so a
    # smaller cap launches as many smaller clusters) and its rows in flight per CTA (STAGES); the forward's
    # elements per CTA past which a row is split over a cluster. N is compiled in.
    configs = [Config({"THREADS": t, "CLUSTER_MAX": c, "STAGES": s})
               for t, c, s in ((128, 8, 2), (256, 8, 2), (512, 8, 2), (256, 4, 2), (512, 4, 2), (256, 8, 3), (512, 8, 3))]  # fmt: skip
    fwd_configs = [Config({"THREADS": t, "SPLIT": s}) for t, s in ((128, 16384), (256, 16384), (512, 16384),
                                                                   (256, 8192), (512, 8192))]  # fmt: skip
    key = [TuneDim("x", -1), TuneDim("x", None)]
    bwd = cute_op(f"{ns}::rmsnorm_cute_backward", k.rmsnorm_bwd, inputs=d["bwd_inputs"],
                  outputs=[OutputDecl("dx", SameAs("x"), dtype_from="x")],
                  extras=[Dim("C", name="N"), Numel("x", "int64", name="numel"),
                          Dim("P", "int32", name="prows")],
                  autotune=Autotune(configs, key=key, default=1), index_dtype="int64")  # fmt: skip
    dweight = cute_op(f"{ns}::rmsnorm_cute_dweight", k.rmsnorm_dw, inputs=d["dw_inputs"], outputs=[],
                      extras=[Dim("P", "int32", name="prows"), Dim("C", "int64", name="n")],
                      index_dtype="int64")  # fmt: skip
    fwd = cute_op(f"{ns}::rmsnorm_cute", k.rmsnorm_fwd, inputs=d["fwd_inputs"], outputs=[OutputDecl("y", SameAs("x"))],
                  extras=[Dim("C", name="N"), Numel("x", "int64", name="numel")],
                  autotune=Autotune(fwd_configs, key=key, default=1), backward=_backward(bwd, dweight, "cute"),
                  index_dtype="int64")  # fmt: skip
    return fwd, bwd


def rmsnorm_ops(impl: Literal["triton", "cuda", "cute"], ns: str = "opsmith") -> tuple[Op, Op]:
    """(forward op, backward op) of ``impl``, registered on first use under namespace ``ns`` (the modules
    register in their constructor, so ``torch.compile`` only ever sees the dictionary lookup). Another
    ``ns`` gives a second copy, e.g. to serve one natively beside the JIT one."""
    ops = _OPS.get((impl, ns))
    if ops is not None:
        return ops
    with _LOCK:
        if (impl, ns) not in _OPS:
            if impl == "triton":
                _OPS[impl, ns] = _register_triton(ns)
            elif impl == "cuda":
                _OPS[impl, ns] = _register_cuda(ns)
            elif impl == "cute":
                _OPS[impl, ns] = _register_cute(ns)
            else:
                raise ValueError(f"rmsnorm_ops: impl={impl!r} is not a kernel; use 'triton', 'cuda' or 'cute'.")
        return _OPS[impl, ns]


def dweight_op(impl: Literal["triton", "cuda", "cute"] = "triton", ns: str = "opsmith") -> Op:
    """The dweight pass of ``impl``'s backward program, registered with it: ``(partial, dweight)``, the column sums
    of float32 (float64) partial rows ``(P, C)`` written into ``dweight`` ``(C,)`` in its dtype, in a fixed order.
    A step for other backward programs that sum per-program partial rows (the Llama recipe's RMSNorm)."""
    fwd, _ = rmsnorm_ops(impl, ns)
    return fwd.backward.fn[-1].op  # _backward's last step


def _check_inputs(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> tuple:
    x = torch.randn(shape, device=device).to(dtype)
    weight = (1 + 0.25 * torch.randn(shape[-1], device=device)).to(dtype)
    return x, weight, 1e-6


def check_cases() -> list:
    """Both kernels' forward ops (with their backward) as conformance cases: ``opsmith check
    opsmith.ops.rmsnorm:check_cases``. Rows from 1 to 40,000 long reach the Triton kernel's looped path."""
    from ..checking.harness import CheckCase

    return [CheckCase(rmsnorm_ops(impl)[0], _check_inputs, reference_rms_norm, ((4, 1000), (2, 3, 4096), (3, 20000)),
                      (torch.float32, torch.float16, torch.bfloat16, torch.float64), tol={"atol": 1e-5, "rtol": 1e-5})
            for impl in ("triton", "cuda")]  # fmt: skip


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None = None, eps: float | None = None,
             impl: Impl = "triton") -> torch.Tensor:  # fmt: skip
    """RMSNorm over the last dimension of ``x``; ``eps=None`` means ``torch.finfo(x.dtype).eps`` like
    ``torch.nn.functional.rms_norm``. ``weight`` is cast to ``x``'s dtype (a float32 weight with bfloat16
    activations, as under autocast, costs one small cast)."""
    if eps is None:
        eps = torch.finfo(x.dtype).eps
    if impl == "torch":
        return reference_rms_norm(x, weight, eps)
    fwd, _ = rmsnorm_ops(impl)
    if weight is None:
        weight = torch.ones(x.shape[-1], dtype=x.dtype, device=x.device)
    elif weight.dtype != x.dtype:
        weight = weight.to(x.dtype)
    return fwd(x, weight, float(eps))


def _cpu_impl(impl: Impl) -> Impl:
    """What a module runs on a real CPU tensor, decided once at construction: the reference, since the kernels
    take CUDA tensors (a drop-in module runs where ``torch.nn.RMSNorm`` runs), except a Triton kernel defined
    under ``TRITON_INTERPRET=1``, which the interpreter runs on CPU tensors."""
    if impl == "torch":
        return impl
    fwd, _ = rmsnorm_ops(impl)
    return impl if getattr(fwd.variants.sources[0], "interpreted", False) else "torch"


def _impl_for(x: torch.Tensor, impl: Impl, cpu_impl: Impl) -> Impl:
    """The module's impl for ``x``: ``cpu_impl`` for a real CPU tensor; fake tensors and torch.compile trace the
    op, whose fake implementation takes any device."""
    if x.device.type != "cpu" or torch.compiler.is_compiling() or isinstance(x, FakeTensor):
        return impl
    return cpu_impl


class RMSNorm(torch.nn.Module):
    """Drop-in for ``torch.nn.RMSNorm`` (same arguments and state dict), computed by an opsmith kernel.

    ``impl``: "triton" (default), "cuda", "cute" (CuTe DSL: ``pip install 'opsmith[cute]'``) or "torch" (the
    reference). ``normalized_shape`` may span several trailing dims; they are normalized together, as in PyTorch.
    On CPU tensors it computes the reference, as a drop-in module must run there (the functional ``rms_norm``
    refuses them, naming the fix).
    """

    def __init__(self, normalized_shape: int | Sequence[int], eps: float | None = None,
                 elementwise_affine: bool = True, device: torch.device | str | None = None,
                 dtype: torch.dtype | None = None, impl: Impl = "triton") -> None:  # fmt: skip
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape, self.eps, self.elementwise_affine, self.impl = shape, eps, elementwise_affine, impl
        self._cpu_impl = _cpu_impl(impl)  # registers the ops
        if elementwise_affine:
            self.weight = torch.nn.Parameter(torch.ones(shape, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k = len(self.normalized_shape)
        if tuple(x.shape[-k:]) != self.normalized_shape:
            raise ValueError(
                f"RMSNorm: expected input with trailing shape {self.normalized_shape}, got {tuple(x.shape)}."
            )
        flat = x.reshape(*x.shape[:-k], math.prod(self.normalized_shape)) if k > 1 else x
        w = self.weight.reshape(-1) if self.weight is not None and k > 1 else self.weight
        return rms_norm(flat, w, self.eps, _impl_for(x, self.impl, self._cpu_impl)).reshape(x.shape)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, impl={self.impl!r}"
        )


class LlamaRMSNorm(torch.nn.Module):
    """Drop-in for Hugging Face's ``LlamaRMSNorm(hidden_size, eps=1e-6)`` (``weight``, ``variance_epsilon``).

    The result has the input's dtype. (Hugging Face's returns ``weight * hidden.to(input_dtype)``, which
    is float32 when only the weight is float32; models cast to bf16 as a whole behave the same either way.)
    On CPU tensors it computes the reference, as ``RMSNorm`` does.
    """

    def __init__(self, hidden_size: int, eps: float = 1e-6, impl: Impl = "triton") -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon, self.impl = eps, impl
        self._cpu_impl = _cpu_impl(impl)  # registers the ops

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        impl = _impl_for(hidden_states, self.impl, self._cpu_impl)
        return rms_norm(hidden_states, self.weight, self.variance_epsilon, impl)

    def extra_repr(self) -> str:
        return f"{tuple(self.weight.shape)}, eps={self.variance_epsilon}, impl={self.impl!r}"
