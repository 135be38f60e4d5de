"""RMSNorm in CuTe DSL: the forward, the backward and the dweight sum, as opsmith ``cute_op`` host functions.

Long rows are split over a thread-block cluster (sm_90+): each CTA of the cluster holds a slice of the row,
and the row's sums go to every CTA of the cluster through distributed shared memory (``st.async`` into each
peer's reduction slots, completing on the peer's mbarrier), so no CTA re-reads its slice from HBM and no
cluster-wide barrier is on a row's critical path. ``cluster_size`` below decides how many CTAs a row takes.

Layout of the work (``VEC`` elements = 16 bytes where the row length and the pointers allow it):
    a row is ``V = N / VEC`` vectors; CTA ``r`` of a cluster of ``C`` owns vectors ``[r * VPC, (r + 1) * VPC)``
    (``VPC = cdiv(V, C)``); thread ``t`` of a row's ``TPR`` threads holds vectors ``t, t + TPR, ...`` of it.
The backward is persistent: cluster ``g`` takes rows ``g, g + G, ...`` (``G`` = the partial buffer's rows),
stages each row's ``x`` and ``dy`` in shared memory with ``cp.async`` one or two rows ahead (``STAGES``: rows
land while earlier ones are computed, without registers holding the bytes in flight), and adds ``dy * x * rstd``
to its slice of one partial dweight row; ``rmsnorm_dw`` sums the partial rows.

Every index into a tensor is 64-bit (a row's offset is ``row * N`` as Int64): tensors past 2^31 elements run.
"""

from __future__ import annotations

import math
import operator

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass import Float32, Float64, Int32, Int64, const_expr
from cutlass.cute.nvgpu import cpasync

#: Shared memory a backward CTA may take for its stages (of the H100/H200's 227 KiB a block can have).
_STAGE_BYTES = 200 * 1024


def cluster_size(n: int, most: int = 8) -> int:
    """CTAs per row in the backward: one per 8,192 elements, at most ``most`` (8 is the portable cluster
    size). The backward's partial buffer has a row per persistent cluster, ``2 * sm_count // cluster_size(n)``
    of them, 7/8 of that for clusters of 4 and 8 (``_partial_rows`` in ``rmsnorm.py``: a cluster must fit one
    GPC); a config with a smaller ``most`` launches that many smaller clusters (one CTA per SM instead of two,
    each with a longer slice)."""
    return min(most, -(-n // 8192))


def fwd_cluster_size(n: int, split: int) -> int:
    """CTAs per row in the forward: one per ``split`` elements (a config: 16,384 keeps 64 bf16 a thread in
    registers at 256 threads without spilling; 8,192 halves that for two CTAs per SM), at most 8."""
    return min(8, -(-n // split))


def _vec(n: int, dtype: type, *ptrs: cute.Pointer) -> int:
    """Elements per vector: 16 bytes, or fewer where the row length or a pointer's alignment forbid it."""
    width = dtype.width // 8
    v = math.gcd(n, 16 // width)
    for p in ptrs:
        v = math.gcd(v, max(1, p.alignment // width))
    return v


def _row(ptr: cute.Pointer, row: Int64, n: int, vec: int) -> cute.Tensor:
    """Row ``row`` of a row-major (rows, n) tensor as (vec, n // vec) vectors; the offset is 64-bit, and the
    row start keeps the base pointer's alignment since n is a multiple of vec."""
    base = cute.make_ptr(ptr.dtype, (ptr + row * n).toint(), cute.AddressSpace.gmem,
                         assumed_align=min(ptr.alignment, vec * ptr.dtype.width // 8))  # fmt: skip
    return cute.make_tensor(base, cute.make_layout((vec, n // vec), stride=(1, vec)))


def _check_dtypes(x: cute.Pointer, **others: cute.Pointer) -> None:
    """One element type for every tensor (as the CUDA C++ kernel's static_asserts say), refused at compile."""
    for name, p in others.items():
        if p.dtype != x.dtype:
            raise TypeError(
                f"rmsnorm: {name} must have the dtype of x ({x.dtype}), got {p.dtype}; pass "
                f"{name}.to(x.dtype) (rms_norm and the modules cast the weight)"
            )


def _acc(dtype: type) -> type:
    return Float64 if const_expr(dtype == Float64) else Float32


@cute.jit
def _rsqrt(v: cute.Numeric) -> cute.Numeric:
    if const_expr(v.dtype == Float64):
        return 1.0 / cute.math.sqrt(v)
    return cute.math.rsqrt(v)


@cute.jit
def _send(vals: tuple, slot: cute.Pointer, mbar: cute.Pointer, peer: Int32) -> None:
    """st.async ``vals`` (one or two accumulators) into ``slot`` of CTA ``peer``, completing on its ``mbar``."""
    dst = cute.arch.map_dsmem_ptr(slot, peer).toint()
    bar = cute.arch.map_dsmem_ptr(mbar, peer).toint()
    t = "f64" if const_expr(vals[0].dtype == Float64) else "f32"
    if const_expr(len(vals) == 1):
        cute.arch.inline_ptx(f"st.async.shared::cluster.mbarrier::complete_tx::bytes.{t} [{{$r0}}], {{$r1}}, [{{$r2}}];",
                             read_only_args=[Int32(dst), vals[0], Int32(bar)])  # fmt: skip
    else:
        cute.arch.inline_ptx(f"st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.{t} [{{$r0}}], "
                             f"{{{{$r1}}, {{$r2}}}}, [{{$r3}}];",
                             read_only_args=[Int32(dst), vals[0], vals[1], Int32(bar)])  # fmt: skip


@cute.jit
def _row_sum(vals: tuple, red: cute.Tensor, mbar: cute.Pointer, phase: Int32, tpr: cutlass.Constexpr,
             cluster: cutlass.Constexpr) -> tuple:  # fmt: skip
    """The sums over a row of each thread's values (a tuple of one or two), in every thread of the row.

    Within a warp by shuffles; across the row's warps through ``red`` in shared memory; across a cluster,
    every warp st.asyncs its sums into slot (warp, rank) of every peer's ``red``, and each CTA waits on its
    own mbarrier for all W * C slots. ``red``: (warps, cluster, len(vals)) accumulators of this row's stage.
    """
    lane, warp = cute.arch.lane_idx(), cute.arch.warp_idx()
    group = min(32, tpr)
    out = [cute.arch.warp_reduction(v, operator.add, threads_in_group=group) for v in vals]
    if const_expr(tpr > 32 or cluster > 1):
        warps_per_row = max(1, tpr // 32)
        first = (warp // warps_per_row) * warps_per_row
        if const_expr(cluster == 1):
            if lane == 0:
                for k in cutlass.range_constexpr(len(vals)):
                    red[warp, 0, k] = out[k]
            cute.arch.barrier()
        else:
            rank = cute.arch.block_idx_in_cluster()
            if lane < cluster:
                _send(tuple(out), red.iterator + cute.crd2idx((warp, rank, 0), red.layout), mbar, lane)
            cute.arch.mbarrier_wait(mbar, phase)
        entries = warps_per_row * cluster
        for k in cutlass.range_constexpr(len(vals)):
            acc = out[k].dtype(0.0)
            for it in cutlass.range_constexpr((entries + 31) // 32):
                e = lane + it * 32
                if e < entries:
                    acc = acc + red[first + e % warps_per_row, e // warps_per_row, k]
            out[k] = cute.arch.warp_reduction(acc, operator.add)
    return tuple(out)


# ----------------------------------------------------------------------------------------------------------
# Forward: y = x * rsqrt(mean(x^2) + eps) * weight, a row (or a cluster's slice of it) in registers.


@cute.kernel
def _fwd_kernel(x: cute.Pointer, w: cute.Pointer, y: cute.Pointer, eps: Float32, rows: Int64,
                n: cutlass.Constexpr, vec: cutlass.Constexpr, tpr: cutlass.Constexpr, maxv: cutlass.Constexpr,
                cluster: cutlass.Constexpr, threads: cutlass.Constexpr):  # fmt: skip
    dtype = x.dtype
    acc_t = _acc(dtype)
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    nv, vpc = n // vec, (n // vec + cluster - 1) // cluster
    rank = cute.arch.block_idx_in_cluster() if const_expr(cluster > 1) else Int32(0)
    rpb = threads // tpr
    row = Int64(bidx) * rpb + tidx // tpr
    t = tidx % tpr
    live = row < rows

    smem = cutlass.memory.SmemAllocator()
    red = smem.allocate_tensor(acc_t, cute.make_layout((threads // 32, cluster, 1), stride=(cluster, 1, 1)), 16)
    mbar = smem.allocate_array(Int64, 1) if const_expr(cluster > 1) else None
    if const_expr(cluster > 1):
        if tidx == 0:
            cute.arch.mbarrier_init(mbar, 1)
        cute.arch.mbarrier_init_fence()
        cute.arch.cluster_arrive_relaxed()

    gx, gw, gy = _row(x, row, n, vec), _row(w, Int64(0), n, vec), _row(y, row, n, vec)
    rx = cute.make_rmem_tensor((vec, maxv), dtype)
    rw = cute.make_rmem_tensor((vec, maxv), dtype)
    rx.fill(0.0)
    rw.fill(0.0)
    load = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), dtype, num_bits_per_copy=vec * dtype.width)
    for i in cutlass.range_constexpr(maxv):
        j = t + i * tpr
        k = rank * vpc + j
        if live and j < vpc and k < nv:
            cute.copy(load, gx[None, k], rx[None, i])
    xs = rx.load().to(acc_t)
    ss = (xs * xs).reduce(cute.ReductionOp.ADD, acc_t(0.0), 0)
    if const_expr(cluster > 1):
        if tidx == 0:
            cute.arch.mbarrier_arrive_and_expect_tx(mbar, (threads // 32) * cluster * (acc_t.width // 8))
        cute.arch.cluster_wait()  # every peer's mbarrier is initialized before a st.async reaches it
    for i in cutlass.range_constexpr(maxv):  # the weight loads overlap the reduction
        j = t + i * tpr
        k = rank * vpc + j
        if j < vpc and k < nv:
            cute.copy(load, gw[None, k], rw[None, i])
    (ss,) = _row_sum((ss,), red, mbar, Int32(0), tpr, cluster)
    rstd = _rsqrt(ss / n + eps.to(acc_t))
    ry = cute.make_rmem_tensor((vec, maxv), dtype)
    ry.store((xs * rstd * rw.load().to(acc_t)).to(dtype))
    for i in cutlass.range_constexpr(maxv):
        j = t + i * tpr
        k = rank * vpc + j
        if live and j < vpc and k < nv:
            cute.copy(load, ry[None, i], gy[None, k])


@cute.jit
def rmsnorm_fwd(x: cute.Pointer, weight: cute.Pointer, eps: Float32, numel: Int64, y: cute.Pointer,
                stream: cuda.CUstream, N: cutlass.Constexpr, THREADS: cutlass.Constexpr = 256,
                SPLIT: cutlass.Constexpr = 16384):  # fmt: skip
    """y = rms_norm(x, weight, eps) over rows of ``N`` (compiled in) elements; ``numel`` = x.numel(). Rows
    longer than ``SPLIT`` elements are split over a cluster."""
    _check_dtypes(x, weight=weight, y=y)
    vec = _vec(N, x.dtype, x, weight, y)
    cluster = fwd_cluster_size(N, SPLIT)
    vpc = -(-(N // vec) // cluster)
    tpr = min(THREADS, 1 << max(0, (vpc - 1).bit_length()))  # threads per row: up to THREADS, a power of 2
    maxv = -(-vpc // tpr)
    rpb = THREADS // tpr
    rows = numel // N
    _fwd_kernel(x, weight, y, eps, rows, N, vec, tpr, maxv, cluster, THREADS).launch(
        grid=[Int32((rows + rpb - 1) // rpb), cluster, 1], block=[THREADS, 1, 1],
        cluster=[1, cluster, 1] if const_expr(cluster > 1) else None, stream=stream)  # fmt: skip


# ----------------------------------------------------------------------------------------------------------
# Backward: dx = rstd * (dy * w) - x * rstd^3 * mean(dy * w * x); partial dweight rows += dy * x * rstd.


@cute.jit
def _stage_row(x: cute.Pointer, dy: cute.Pointer, sx: cute.Tensor, sg: cute.Tensor, row: Int64, rows: Int64, s: Int32,
               t: Int32, rank: Int32, n: cutlass.Constexpr, vec: cutlass.Constexpr, maxv: cutlass.Constexpr,
               threads: cutlass.Constexpr, cluster: cutlass.Constexpr, copy_in: cute.CopyAtom) -> None:  # fmt: skip
    """cp.async this thread's vectors of row ``row`` of x and dy into stage ``s``, as one commit group (an
    empty one past the last row, so that the wait counts stay right)."""
    nv = n // vec
    vpc = (nv + cluster - 1) // cluster
    if row < rows:
        gx, gdy = _row(x, row, n, vec), _row(dy, row, n, vec)
        for i in cutlass.range_constexpr(maxv):
            j = t + i * threads
            if j < vpc and rank * vpc + j < nv:
                cute.copy(copy_in, gx[None, rank * vpc + j], sx[None, i, t, s])
                cute.copy(copy_in, gdy[None, rank * vpc + j], sg[None, i, t, s])
    cute.arch.cp_async_commit_group()


def _staging_atom(dtype: type, vec: int) -> cute.CopyAtom:
    """cp.async for 4, 8 or 16 bytes (16 bypassing L1: .cg); a row of odd length in 2-byte elements is
    staged by plain copies."""
    bits = vec * dtype.width
    if bits < 32:
        return cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), dtype, num_bits_per_copy=bits)
    mode = cpasync.LoadCacheMode.GLOBAL if bits == 128 else cpasync.LoadCacheMode.ALWAYS
    return cute.make_copy_atom(cpasync.CopyG2SOp(cache_mode=mode), dtype, num_bits_per_copy=bits)


@cute.jit
def _bwd_row(sx: cute.Tensor, sg: cute.Tensor, s: Int32, rw: cute.Tensor, dw: cute.Tensor, gdx: cute.Tensor,
             red: cute.Tensor, mbar: cute.Pointer | None, phase: Int32, eps: Float32, t: Int32, rank: Int32,
             n: cutlass.Constexpr, vec: cutlass.Constexpr, maxv: cutlass.Constexpr, threads: cutlass.Constexpr,
             cluster: cutlass.Constexpr, copy: cute.CopyAtom) -> None:  # fmt: skip
    """One staged row: the row's two sums, then dx (stored) and its dweight terms (added to ``dw``). Two passes
    over the stage, a vector at a time (holding the whole slice in float32 registers took ~170 a thread at
    8,192 elements a CTA: one CTA per SM, half the persistent grid waiting)."""
    dtype = sx.element_type
    acc_t = _acc(dtype)
    nv, vpc = n // vec, (n // vec + cluster - 1) // cluster
    rx, rg, rdx = (cute.make_rmem_tensor((vec,), dtype) for _ in range(3))
    ss, sgw = acc_t(0.0), acc_t(0.0)
    for i in cutlass.range_constexpr(maxv):
        j = t + i * threads
        if j < vpc and rank * vpc + j < nv:
            cute.autovec_copy(sx[None, i, t, s], rx)
            cute.autovec_copy(sg[None, i, t, s], rg)
            xv = rx.load().to(acc_t)
            gwv = rg.load().to(acc_t) * rw[None, i].load().to(acc_t)
            ss = ss + (xv * xv).reduce(cute.ReductionOp.ADD, acc_t(0.0), 0)
            sgw = sgw + (gwv * xv).reduce(cute.ReductionOp.ADD, acc_t(0.0), 0)
    ss, sgw = _row_sum((ss, sgw), red, mbar, phase, threads, cluster)
    rstd = _rsqrt(ss / n + eps.to(acc_t))
    c = sgw / n * rstd * rstd * rstd
    for i in cutlass.range_constexpr(maxv):
        jd = t + i * threads
        if jd < vpc and rank * vpc + jd < nv:
            cute.autovec_copy(sx[None, i, t, s], rx)
            cute.autovec_copy(sg[None, i, t, s], rg)
            xv, gv = rx.load().to(acc_t), rg.load().to(acc_t)
            rdx.store((gv * rw[None, i].load().to(acc_t) * rstd - xv * c).to(dtype))
            cute.copy(copy, rdx, gdx[None, rank * vpc + jd])
            dw[None, i].store(dw[None, i].load() + gv * xv * rstd)


@cute.kernel
def _bwd_kernel(dy: cute.Pointer, x: cute.Pointer, w: cute.Pointer, pr: cute.Pointer, dx: cute.Pointer,
                eps: Float32, rows: Int64, groups: Int32, n: cutlass.Constexpr, vec: cutlass.Constexpr,
                maxv: cutlass.Constexpr, cluster: cutlass.Constexpr, threads: cutlass.Constexpr,
                stages: cutlass.Constexpr):  # fmt: skip
    dtype = x.dtype
    acc_t = _acc(dtype)
    t, _, _ = cute.arch.thread_idx()
    g, _, _ = cute.arch.block_idx()
    nv, vpc = n // vec, (n // vec + cluster - 1) // cluster
    rank = cute.arch.block_idx_in_cluster() if const_expr(cluster > 1) else Int32(0)

    smem = cutlass.memory.SmemAllocator()
    warps = threads // 32
    red = smem.allocate_tensor(acc_t, cute.make_layout((warps, cluster, 2, 2), stride=(cluster * 2, 2, 1, warps * cluster * 2)),
                               16)  # fmt: skip
    mbar = smem.allocate_array(Int64, 2) if const_expr(cluster > 1) else None
    # Stage s of this thread's vector i at [:, i, t, s]: a warp's 32 vectors are adjacent (no bank conflicts),
    # and a thread reads back only what its own cp.async wrote, so reusing a stage needs no CTA barrier.
    stage = cute.make_layout((vec, maxv, threads, stages), stride=(1, vec * threads, vec, vec * threads * maxv))
    sx = smem.allocate_tensor(dtype, stage, 16)
    sg = smem.allocate_tensor(dtype, stage, 16)
    if const_expr(cluster > 1):
        if t == 0:
            cute.arch.mbarrier_init(mbar, 1)
            cute.arch.mbarrier_init(mbar + 1, 1)
        cute.arch.mbarrier_init_fence()
        cute.arch.cluster_arrive_relaxed()

    copy_in = _staging_atom(dtype, vec)
    copy = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), dtype, num_bits_per_copy=vec * dtype.width)
    gw = _row(w, Int64(0), n, vec)
    rw = cute.make_rmem_tensor((vec, maxv), dtype)
    rw.fill(0.0)
    dw = cute.make_rmem_tensor((vec, maxv), acc_t)
    dw.fill(0.0)
    for i in cutlass.range_constexpr(maxv):
        jw = t + i * threads
        if jw < vpc and rank * vpc + jw < nv:
            cute.copy(copy, gw[None, rank * vpc + jw], rw[None, i])

    first = Int64(g)
    count = (rows - first + groups - 1) // groups if first < rows else Int64(0)
    for k in cutlass.range_constexpr(stages - 1):  # the first rows in flight before the loop
        _stage_row(x, dy, sx, sg, first + k * groups, rows, Int32(k), t, rank, n, vec, maxv, threads, cluster, copy_in)
    if const_expr(cluster > 1):
        cute.arch.cluster_wait()  # every peer's mbarriers are initialized before a st.async reaches them
    for it in cutlass.range(count, unroll=1):
        row = first + it * groups
        s, par = Int32(it % stages), Int32(it % 2)  # this row's stage; its reduction slots and mbarrier
        ahead = row + (stages - 1) * groups  # (itself with one stage)
        _stage_row(x, dy, sx, sg, ahead, rows, Int32((it + stages - 1) % stages), t, rank, n, vec, maxv, threads,
                   cluster, copy_in)  # fmt: skip
        cute.arch.cp_async_wait_group(stages - 1)  # this row's copies have landed; later rows' are in flight
        if const_expr(cluster > 1):  # noqa: SIM102 (a compile-time test, then a runtime one)
            if t == 0:
                cute.arch.mbarrier_arrive_and_expect_tx(mbar + par, warps * cluster * 2 * (acc_t.width // 8))
        _bwd_row(sx, sg, s, rw, dw, _row(dx, row, n, vec), red[None, None, None, par],
                 mbar + par if const_expr(cluster > 1) else None, Int32((it // 2) % 2), eps, t, rank, n, vec, maxv,
                 threads, cluster, copy)  # fmt: skip
    gp = _row(pr, first, n, vec)
    for i in cutlass.range_constexpr(maxv):
        jp = t + i * threads
        if jp < vpc and rank * vpc + jp < nv:
            cute.autovec_copy(dw[None, i], gp[None, rank * vpc + jp])


def _bwd_plan(n: int, vec: int, dtype: type, threads: int, most: int, stages: int) -> tuple[int, int, int]:
    """(CTAs per row, vectors per thread, stages) of the backward: the fewest CTAs from the config's cap up
    (``cluster_size``) whose slice of a row fits shared memory ``stages`` times (rows in flight), or fewer."""
    cluster = cluster_size(n, most)
    while True:
        vpc = -(-(n // vec) // cluster)  # vectors per CTA
        maxv = -(-vpc // threads)
        slice_bytes = maxv * threads * vec * dtype.width // 8
        for k in range(stages, 0, -1):
            if 2 * k * slice_bytes <= _STAGE_BYTES:
                return cluster, maxv, k
        if cluster >= 8:
            raise ValueError(f"rmsnorm (CuTe DSL): a row of {n} {dtype} elements needs {2 * slice_bytes // 1024} KiB "
                             f"of shared memory per CTA of an 8-CTA cluster, over {_STAGE_BYTES // 1024} KiB; use "
                             "impl='cuda' or impl='triton' for rows this long.")  # fmt: skip
        cluster = min(8, cluster * 2)


@cute.jit
def rmsnorm_bwd(grad_y: cute.Pointer, x: cute.Pointer, weight: cute.Pointer, eps: Float32, partial: cute.Pointer,
                numel: Int64, prows: Int32, dx: cute.Pointer, stream: cuda.CUstream, N: cutlass.Constexpr,
                THREADS: cutlass.Constexpr = 256, CLUSTER_MAX: cutlass.Constexpr = 8,
                STAGES: cutlass.Constexpr = 2):  # fmt: skip
    """dx, and ``partial[g, :]`` = the dweight terms of rows g, g + prows, ... (prows = partial's rows)."""
    _check_dtypes(x, weight=weight, grad_y=grad_y, dx=dx)
    if const_expr(partial.dtype != _acc(x.dtype)):
        raise TypeError(f"rmsnorm: partial must be {_acc(x.dtype)} for {x.dtype} inputs, got {partial.dtype}")
    vec = _vec(N, x.dtype, grad_y, x, weight, dx)
    cluster, maxv, stages = _bwd_plan(N, vec, x.dtype, THREADS, CLUSTER_MAX, STAGES)
    _bwd_kernel(grad_y, x, weight, partial, dx, eps, numel // N, prows, N, vec, maxv, cluster, THREADS, stages).launch(
        grid=[prows, cluster, 1], block=[THREADS, 1, 1],
        cluster=[1, cluster, 1] if const_expr(cluster > 1) else None, stream=stream)  # fmt: skip


# ----------------------------------------------------------------------------------------------------------
# dweight: the column sums of the partial rows, in a fixed order (deterministic), cast to the weight's dtype.


@cute.kernel
def _dw_kernel(pr: cute.Pointer, dw: cute.Pointer, prows: Int32, n: Int64):
    acc_t = pr.dtype
    lane, warp = cute.arch.lane_idx(), cute.arch.warp_idx()
    b, _, _ = cute.arch.block_idx()
    col = Int64(b) * 32 + lane
    smem = cutlass.memory.SmemAllocator()
    part = smem.allocate_tensor(acc_t, cute.make_layout((32, 33), stride=(33, 1)), 16)  # 33: no bank conflicts
    gp = cute.make_tensor(pr, cute.make_layout(Int64(prows) * n))
    acc = acc_t(0.0)
    if col < n:
        for r in cutlass.range(warp, prows, 32, unroll=4):  # warp w sums rows w, w + 32, ...
            acc = acc + gp[Int64(r) * n + col]
    part[lane, warp] = acc
    cute.arch.barrier()
    if warp == 0:
        total = acc_t(0.0)
        for k in cutlass.range_constexpr(32):  # in a fixed order: the same bits on every run
            total = total + part[lane, k]
        if col < n:
            gdw = cute.make_tensor(dw, cute.make_layout(n))
            gdw[col] = total.to(dw.dtype)


@cute.jit
def rmsnorm_dw(partial: cute.Pointer, dweight: cute.Pointer, prows: Int32, n: Int64, stream: cuda.CUstream):
    """dweight[j] = sum over the partial rows of partial[:, j]: 32 columns a block, its 32 warps splitting
    the rows."""
    _dw_kernel(partial, dweight, prows, n).launch(grid=[Int32((n + 31) // 32), 1, 1], block=[1024, 1, 1],
                                                   stream=stream)  # fmt: skip
