// RMSNorm forward and backward, generic over the element type (float, double, __half, __nv_bfloat16).
//
//   y  = x * rstd * w,             rstd = 1 / sqrt(mean(x^2) + eps)      (per row of n elements)
//   dx = rstd * g - x * rstd^3 * mean(g * x),   g = dy * w
//   dw = sum over rows of dy * x * rstd          (per-block partial rows, summed by rmsnorm_dw)
//
// Accumulation is in float (double for double inputs). A row is held in registers when it fits
// (n <= THREADS * VEC * MAXV with 16-byte vectors, e.g. 8,192 bf16 at 256 threads), so x is read from
// memory once; otherwise the kernels stream the row twice (the second pass mostly hits L2), in 16-byte
// vectors when the row and pointers allow it, element by element otherwise.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

namespace {

template <typename A, typename B> struct Same { static constexpr bool value = false; };
template <typename A> struct Same<A, A> { static constexpr bool value = true; };

template <typename T> struct Acc { typedef float type; };
template <> struct Acc<double> { typedef double type; };

template <typename T> struct Cvt;
template <> struct Cvt<float> {
    static __device__ __forceinline__ float in(float v) { return v; }
    static __device__ __forceinline__ float out(float v) { return v; }
};
template <> struct Cvt<double> {
    static __device__ __forceinline__ double in(double v) { return v; }
    static __device__ __forceinline__ double out(double v) { return v; }
};
template <> struct Cvt<__half> {
    static __device__ __forceinline__ float in(__half v) { return __half2float(v); }
    static __device__ __forceinline__ __half out(float v) { return __float2half_rn(v); }
};
template <> struct Cvt<__nv_bfloat16> {
    static __device__ __forceinline__ float in(__nv_bfloat16 v) { return __bfloat162float(v); }
    static __device__ __forceinline__ __nv_bfloat16 out(float v) { return __float2bfloat16_rn(v); }
};

__device__ __forceinline__ float rsqrt_(float v) { return rsqrtf(v); }
__device__ __forceinline__ double rsqrt_(double v) { return rsqrt(v); }

template <typename T> struct alignas(16) Vec { T v[16 / sizeof(T)]; };

// One 128-bit access per vector: copying Vec<__nv_bfloat16> as a struct may become eight 2-byte accesses.
// (Streaming cache hints, __ldcs/__stcs, measured slower: forward 159 vs 134 us at (8, 4096, 4096) bf16.)
template <typename T> __device__ __forceinline__ Vec<T> load16(const T* p, long long j) {
    Vec<T> v;
    *reinterpret_cast<uint4*>(&v) = reinterpret_cast<const uint4*>(p)[j];
    return v;
}
template <typename T> __device__ __forceinline__ void store16(T* p, long long j, const Vec<T>& v) {
    reinterpret_cast<uint4*>(p)[j] = *reinterpret_cast<const uint4*>(&v);
}

template <typename A> __device__ __forceinline__ A warp_sum(A v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Sums of two values over the block (every thread gets both), with one barrier: red holds 2 * 64 slots and
// consecutive rows alternate halves (parity), so a warp that runs ahead into the next row writes the half no
// one is still reading.
template <typename A, int THREADS> __device__ __forceinline__ void block_sum2_1bar(A& a, A& b, A* red, int parity) {
    a = warp_sum(a);
    b = warp_sum(b);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    A* r = red + 64 * parity;
    if (lane == 0) { r[warp] = a; r[32 + warp] = b; }
    __syncthreads();
    a = lane < THREADS / 32 ? r[lane] : A(0);
    b = lane < THREADS / 32 ? r[32 + lane] : A(0);
    a = warp_sum(a);
    b = warp_sum(b);
}

// The same on red's first 64 slots, with a second barrier so the next row may reuse them.
template <typename A, int THREADS> __device__ __forceinline__ void block_sum2(A& a, A& b, A* red) {
    block_sum2_1bar<A, THREADS>(a, b, red, 0);
    __syncthreads();
}

// MAXV: 16-byte vectors per thread kept in registers (a config parameter: THREADS * MAXV vectors must cover
// the row; more registers than the row needs cost occupancy, since unrolled arrays are allocated whole).
template <typename T, typename TW>
__device__ __forceinline__ bool aligned16(const T* a, const T* b, const TW* c, long long n) {
    constexpr int VEC = 16 / sizeof(T);
    const unsigned long long addr = (unsigned long long)a | (unsigned long long)b | (unsigned long long)c;
    return n % VEC == 0 && addr % 16 == 0;
}
template <typename T, typename TW>
__device__ __forceinline__ bool vector_ok(const T* a, const T* b, const TW* c, long long n, int threads, int maxv) {
    constexpr int VEC = 16 / sizeof(T);
    return aligned16(a, b, c, n) && n <= (long long)threads * VEC * maxv;
}

}  // namespace

// One block per row. Parameters: x, weight, eps (inputs), n (extra), y (output).
template <typename T, typename TW, int THREADS, int MAXV>
__global__ void __launch_bounds__(THREADS)
rmsnorm_fwd(const T* __restrict__ x, const TW* __restrict__ w, double eps, long long n, T* __restrict__ y) {
    static_assert(Same<T, TW>::value, "rmsnorm: weight must have the dtype of x; pass weight.to(x.dtype)");
    typedef typename Acc<T>::type A;
    constexpr int VEC = 16 / sizeof(T);
    __shared__ A red[64];
    const long long row = blockIdx.x;
    const T* xr = x + row * n;
    T* yr = y + row * n;
    A ss = 0, unused = 0;
    if (vector_ok(xr, yr, w, n, THREADS, MAXV)) {
        const long long nv = n / VEC;
        Vec<T> xs[MAXV];
#pragma unroll
        for (int i = 0; i < MAXV; ++i) {
            const long long j = threadIdx.x + (long long)i * THREADS;
            if (j < nv) {
                xs[i] = load16(xr, j);
#pragma unroll
                for (int k = 0; k < VEC; ++k) { const A a = Cvt<T>::in(xs[i].v[k]); ss += a * a; }
            }
        }
        block_sum2<A, THREADS>(ss, unused, red);
        const A rstd = rsqrt_(ss / A(n) + A(eps));
#pragma unroll
        for (int i = 0; i < MAXV; ++i) {
            const long long j = threadIdx.x + (long long)i * THREADS;
            if (j < nv) {
                const Vec<T> wk = load16(reinterpret_cast<const T*>(w), j);
                Vec<T> o;
#pragma unroll
                for (int k = 0; k < VEC; ++k) o.v[k] = Cvt<T>::out(Cvt<T>::in(xs[i].v[k]) * rstd * Cvt<T>::in(wk.v[k]));
                store16(yr, j, o);
            }
        }
    } else if (aligned16(xr, yr, w, n)) {  // a long row: two streaming passes of 16-byte vectors
        const long long nv = n / VEC;
        for (long long j = threadIdx.x; j < nv; j += THREADS) {
            const Vec<T> v = load16(xr, j);
#pragma unroll
            for (int k = 0; k < VEC; ++k) { const A a = Cvt<T>::in(v.v[k]); ss += a * a; }
        }
        block_sum2<A, THREADS>(ss, unused, red);
        const A rstd = rsqrt_(ss / A(n) + A(eps));
        for (long long j = threadIdx.x; j < nv; j += THREADS) {
            const Vec<T> v = load16(xr, j), wk = load16(reinterpret_cast<const T*>(w), j);
            Vec<T> o;
#pragma unroll
            for (int k = 0; k < VEC; ++k) o.v[k] = Cvt<T>::out(Cvt<T>::in(v.v[k]) * rstd * Cvt<T>::in(wk.v[k]));
            store16(yr, j, o);
        }
    } else {
        for (long long j = threadIdx.x; j < n; j += THREADS) { const A a = Cvt<T>::in(xr[j]); ss += a * a; }
        block_sum2<A, THREADS>(ss, unused, red);
        const A rstd = rsqrt_(ss / A(n) + A(eps));
        for (long long j = threadIdx.x; j < n; j += THREADS)
            yr[j] = Cvt<T>::out(Cvt<T>::in(xr[j]) * rstd * Cvt<TW>::in(w[j]));
    }
}

// Loads row `row` of x and dy (16-byte vectors, thread-strided) into registers, if it exists.
template <typename T, int THREADS, int MAXV>
__device__ __forceinline__ void load_row(Vec<T> (&xv)[MAXV], Vec<T> (&gv)[MAXV], const T* __restrict__ x,
                                         const T* __restrict__ dy,
                                         long long row, long long rows, long long n, long long nv) {
#pragma unroll
    for (int i = 0; i < MAXV; ++i) {
        const long long j = threadIdx.x + (long long)i * THREADS;
        if (j < nv && row < rows) {
            xv[i] = load16(x + row * n, j);
            gv[i] = load16(dy + row * n, j);
        }
    }
}

// 16-byte copies from global to shared memory that complete asynchronously (cp.async, sm_80+; a plain copy
// before that), so a row's bytes are in flight without holding registers.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define RMSNORM_CP_ASYNC 1
#endif
__device__ __forceinline__ void copy16_async(void* dst, const void* src) {
#ifdef RMSNORM_CP_ASYNC
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"((unsigned)__cvta_generic_to_shared(dst)),
                 "l"(src));
#else
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
#endif
}
__device__ __forceinline__ void copy_commit() {
#ifdef RMSNORM_CP_ASYNC
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}
__device__ __forceinline__ void copy_wait_but_newest() {
#ifdef RMSNORM_CP_ASYNC
    asm volatile("cp.async.wait_group 1;\n" ::);
#endif
}
template <int N> __device__ __forceinline__ void copy_wait_all_but() {
#ifdef RMSNORM_CP_ASYNC
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// Thread-block clusters (sm_90+): distributed shared memory and mbarriers, in PTX. A kernel's cluster size is
// compiled in (__cluster_dims__), so an ordinary launch of a grid of whole clusters runs it.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define RMSNORM_CLUSTERS 1
#define RMSNORM_CLUSTER_DIMS(C) __cluster_dims__(C, 1, 1)
#else
#define RMSNORM_CLUSTER_DIMS(C)
#endif
#ifdef RMSNORM_CLUSTERS
__device__ __forceinline__ unsigned smem_u32(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
// The address of the same shared-memory variable in CTA `rank` of this cluster.
__device__ __forceinline__ unsigned peer_u32(unsigned addr, unsigned rank) {
    unsigned out;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(out) : "r"(addr), "r"(rank));
    return out;
}
// Two accumulators into a peer's shared memory, counted on the peer's mbarrier when they land.
__device__ __forceinline__ void send2(unsigned dst, float a, float b, unsigned bar) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];"
                 ::"r"(dst), "f"(a), "f"(b), "r"(bar) : "memory");
}
__device__ __forceinline__ void send2(unsigned dst, double a, double b, unsigned bar) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f64 [%0], {%1, %2}, [%3];"
                 ::"r"(dst), "d"(a), "d"(b), "r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(arrivals) : "memory");
}
__device__ __forceinline__ void mbar_expect(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    asm volatile("{\n\t.reg .pred done;\n"
                 "WAIT:\n\tmbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "\t@!done bra WAIT;\n}" ::"r"(bar), "r"(parity) : "memory");
}
// Every CTA of the cluster has initialized its mbarriers before any peer's st.async reaches them.
__device__ __forceinline__ void cluster_start() {
    asm volatile("fence.mbarrier_init.release.cluster;\n\tbarrier.cluster.arrive.relaxed.aligned;\n\t"
                 "barrier.cluster.wait.aligned;" ::: "memory");
}
#endif

// A block's slice of a row staged in shared memory: the row's vectors [lo, lo + count), thread t holding slice
// vectors t, t + THREADS, ... (MAXV of them), with their weights and their dweight terms (summed over the rows
// the block takes) in registers. Stage s of vector i of x (dy) is at stage[((s * 2 + 0 (1)) * MAXV + i) *
// THREADS + t]: a warp's vectors are adjacent (no bank conflicts), and each thread copies, reads and writes
// only its own vectors, so its own cp.async wait orders them and reusing a stage needs no barrier.
template <typename T, typename A, int THREADS, int MAXV>
struct StagedSlice {
    static constexpr int VEC = 16 / sizeof(T);
    uint4* stage;
    long long lo, count;
    Vec<T> ws[MAXV];
    A dw[MAXV][VEC];

    __device__ __forceinline__ StagedSlice(uint4* stage_, const T* w, long long lo_, long long count_)
        : stage(stage_), lo(lo_), count(count_) {
#pragma unroll
        for (int i = 0; i < MAXV; ++i) {
            if (has(i)) ws[i] = load16(w, lo + threadIdx.x + i * THREADS);
#pragma unroll
            for (int k = 0; k < VEC; ++k) dw[i][k] = 0;
        }
    }
    __device__ __forceinline__ bool has(int i) const { return threadIdx.x + (long long)i * THREADS < count; }
    __device__ __forceinline__ uint4& at(int s, int tensor, int i) const {
        return stage[((s * 2 + tensor) * MAXV + i) * THREADS + threadIdx.x];
    }
    // cp.async this thread's vectors of row r of x and dy into stage s, as one commit group (an empty one past
    // the last row keeps the wait counting right).
    __device__ __forceinline__ void issue(const T* x, const T* dy, long long r, long long rows, long long n, int s) {
        if (r < rows) {
#pragma unroll
            for (int i = 0; i < MAXV; ++i) {
                if (has(i)) {
                    const long long j = lo + threadIdx.x + i * THREADS;
                    copy16_async(&at(s, 0, i), reinterpret_cast<const uint4*>(x + r * n) + j);
                    copy16_async(&at(s, 1, i), reinterpret_cast<const uint4*>(dy + r * n) + j);
                }
            }
        }
        copy_commit();
    }
    // This thread's terms of the row's two sums: x^2 and dy * w * x.
    __device__ __forceinline__ void sums(int s, A& ss, A& sg) const {
        ss = 0;
        sg = 0;
#pragma unroll
        for (int i = 0; i < MAXV; ++i) {
            if (has(i)) {
                const uint4 xr = at(s, 0, i), gr = at(s, 1, i);
                const Vec<T>& xv = reinterpret_cast<const Vec<T>&>(xr);
                const Vec<T>& gv = reinterpret_cast<const Vec<T>&>(gr);
#pragma unroll
                for (int k = 0; k < VEC; ++k) {
                    const A a = Cvt<T>::in(xv.v[k]);
                    ss += a * a;
                    sg += Cvt<T>::in(gv.v[k]) * Cvt<T>::in(ws[i].v[k]) * a;
                }
            }
        }
    }
    // dx of this thread's vectors (into the row dxr) and their dweight terms, from the row's rstd and
    // c = mean(dy * w * x) * rstd^3.
    __device__ __forceinline__ void grads(int s, A rstd, A c, T* dxr) {
#pragma unroll
        for (int i = 0; i < MAXV; ++i) {
            if (has(i)) {
                const uint4 xr = at(s, 0, i), gr = at(s, 1, i);
                const Vec<T>& xv = reinterpret_cast<const Vec<T>&>(xr);
                const Vec<T>& gv = reinterpret_cast<const Vec<T>&>(gr);
                Vec<T> o;
#pragma unroll
                for (int k = 0; k < VEC; ++k) {
                    const A a = Cvt<T>::in(xv.v[k]), g = Cvt<T>::in(gv.v[k]);
                    o.v[k] = Cvt<T>::out(rstd * g * Cvt<T>::in(ws[i].v[k]) - a * c);
                    dw[i][k] += g * a * rstd;
                }
                store16(dxr, lo + threadIdx.x + i * THREADS, o);
            }
        }
    }
    // The slice's dweight terms into the partial row pr.
    __device__ __forceinline__ void store(A* pr) const {
#pragma unroll
        for (int i = 0; i < MAXV; ++i) {
            if (has(i)) {
                const long long j = lo + threadIdx.x + i * THREADS;
#pragma unroll
                for (int k = 0; k < VEC; ++k) pr[j * VEC + k] = dw[i][k];
            }
        }
    }
};

// The staged backward for rows up to THREADS * MAXV 16-byte vectors: x and dy rows go to shared memory by
// cp.async in two stages (the next row streams in while this one is computed), so a long row is read once
// and bytes stay in flight without registers. A row held in registers instead leaves one block per SM bound
// by latency: (8192, 16384) bf16 on an H200 took 383.7 us that way, 215.8 us staged (90% of copy), where the
// two streaming passes took 546.5. The block meets once per row, for the row's two sums. Dynamic shared
// memory: 2 stages x (x, dy) x THREADS * MAXV x 16 bytes.
template <typename T, typename A, int THREADS, int MAXV>
__device__ __forceinline__ void bwd_staged(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ w,
                                           double eps, A* __restrict__ pr, long long n, long long rows,
                                           T* __restrict__ dx) {
    constexpr int VEC = 16 / sizeof(T);
    extern __shared__ uint4 rms_stage[];
    __shared__ A red[2][2][32];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    StagedSlice<T, A, THREADS, MAXV> slice(rms_stage, w, 0, n / VEC);
    long long row = blockIdx.x;
    slice.issue(x, dy, row, rows, n, 0);
    int s = 0, parity = 0;
    for (; row < rows; row += gridDim.x) {
        slice.issue(x, dy, row + gridDim.x, rows, n, s ^ 1);
        copy_wait_but_newest();  // this row's copies have landed
        A ss, sg;
        slice.sums(s, ss, sg);
        ss = warp_sum(ss);
        sg = warp_sum(sg);
        if (lane == 0) { red[parity][0][warp] = ss; red[parity][1][warp] = sg; }
        __syncthreads();  // one barrier a row: the next row writes the other parity's slots
        ss = warp_sum(lane < THREADS / 32 ? red[parity][0][lane] : A(0));
        sg = warp_sum(lane < THREADS / 32 ? red[parity][1][lane] : A(0));
        parity ^= 1;
        const A rstd = rsqrt_(ss / A(n) + A(eps));
        slice.grads(s, rstd, sg / A(n) * rstd * rstd * rstd, dx + row * n);
        s ^= 1;
    }
    slice.store(pr);
}

// The cluster backward, for rows too long for one block's shared memory (hidden 65,536 bf16 is 128 KiB each of x
// and dy): a cluster of CLUSTER blocks takes a row, block `rank` of it the vectors [rank * vpc, (rank + 1) * vpc)
// (vpc = cdiv(n / VEC, CLUSTER)), staged by cp.async STAGES - 1 rows ahead as in bwd_staged, so each byte is
// read once and a block's slice of dweight stays in registers. A row's two sums cross the cluster without a
// cluster barrier: each warp st.asyncs its sums into slot (rank, warp) of every peer's `red`, and each block
// waits on its own mbarrier for all CLUSTER * WARPS slots. Every block adds the slots in the same order, so the
// cluster agrees on rstd bit for bit. Clusters are persistent: cluster g takes rows g, g + G, ... (G clusters)
// into partial row g, and zeroes its slice of the partial rows G, G + ... that no cluster takes. H100, (2048,
// 65536) bf16, the shipped kernel streaming each row twice read 1.58 GB and wrote 0.82-0.86 GB for 0.805 GB of
// x, dy and dx (28% of copy).
//
// OVERLAP = 1 pipelines the exchange: a block sends row i's sums, then writes row i - 1's dx while they cross the
// cluster, so no block idles for a round trip per row (needs a third stage: rows i - 1 and i are both held).
// The exchange slots rotate: a row's sums land in slot i % SLOTS, on that slot's mbarrier, and row i + SLOTS
// may reuse it once this block has read row i. With OVERLAP a peer sends row j after reading row j - 2's sums
// from every block, which this block sends after reading row j - 4's: SLOTS = 4. Without, a peer sends row j
// after reading row j - 1's, which this block sends after reading row j - 2's: SLOTS = 2.
template <typename T, typename A, int THREADS, int MAXV, int STAGES, int CLUSTER, int OVERLAP>
__device__ __forceinline__ void bwd_cluster(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ w,
                                            double eps, A* __restrict__ partial, long long n, long long rows,
                                            long long prows, T* __restrict__ dx) {
#ifdef RMSNORM_CLUSTERS
    static_assert(STAGES >= 2 + OVERLAP, "rmsnorm: the cluster backward keeps a row in flight (two with OVERLAP)");
    constexpr int VEC = 16 / sizeof(T), WARPS = THREADS / 32, SLOTS = OVERLAP ? 4 : 2;
    extern __shared__ uint4 rms_stage[];                    // StagedSlice's stages
    __shared__ alignas(16) A red[SLOTS][CLUSTER][WARPS][2];  // [slot][peer][warp][sum of x^2, sum of dy*w*x]
    __shared__ alignas(8) unsigned long long mbar[SLOTS];
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    const unsigned rank = blockIdx.x % CLUSTER;
    const long long g = blockIdx.x / CLUSTER, groups = gridDim.x / CLUSTER;
    const long long nv = n / VEC, vpc = (nv + CLUSTER - 1) / CLUSTER, lo = rank * vpc;
    const long long hi = lo + vpc < nv ? lo + vpc : nv;
    for (long long r = g + groups; r < prows; r += groups)
        for (long long e = lo * VEC + t; e < hi * VEC; e += THREADS) partial[r * n + e] = A(0);
    if (t == 0) {
#pragma unroll
        for (int k = 0; k < SLOTS; ++k) mbar_init(smem_u32(&mbar[k]), 1);
    }
    cluster_start();
    StagedSlice<T, A, THREADS, MAXV> slice(rms_stage, w, lo, hi - lo);
#pragma unroll
    for (int k = 0; k < STAGES - 1; ++k) slice.issue(x, dy, g + k * groups, rows, n, k);
    const unsigned peer_red = smem_u32(&red[0][rank][warp][0]), slot_bytes = CLUSTER * WARPS * 2 * sizeof(A);
    // Row i's sums (staged in stage i % STAGES) into slot i % SLOTS of every block of the cluster.
    auto send = [&](long long i) {
        const int slot = (int)(i % SLOTS);
        const unsigned bar = smem_u32(&mbar[slot]);
        if (t == 0) mbar_expect(bar, slot_bytes);
        A ss, sg;
        slice.sums((int)(i % STAGES), ss, sg);
        ss = warp_sum(ss);
        sg = warp_sum(sg);
        if (lane < CLUSTER) send2(peer_u32(peer_red + slot * slot_bytes, lane), ss, sg, peer_u32(bar, lane));
    };
    // Row i's sums from the whole cluster, then its dx (row `row` of dx) and dweight terms.
    auto finish = [&](long long i, long long row) {
        const int slot = (int)(i % SLOTS);
        mbar_wait(smem_u32(&mbar[slot]), (unsigned)(i / SLOTS) & 1u);
        A ss = 0, sg = 0;
        for (int e = lane; e < CLUSTER * WARPS; e += 32) {
            ss += red[slot][e / WARPS][e % WARPS][0];
            sg += red[slot][e / WARPS][e % WARPS][1];
        }
        ss = warp_sum(ss);
        sg = warp_sum(sg);
        const A rstd = rsqrt_(ss / A(n) + A(eps));
        slice.grads((int)(i % STAGES), rstd, sg / A(n) * rstd * rstd * rstd, dx + row * n);
    };
    long long it = 0;
    for (long long row = g; row < rows; row += groups, ++it) {
        if constexpr (OVERLAP) {
            copy_wait_all_but<STAGES - 2>();  // row it has landed; the STAGES - 2 after it are in flight
            send(it);
            if (it > 0) finish(it - 1, row - groups);  // written while row it's sums cross the cluster
            // into row it - 1's stage, just read: each thread reuses only its own vectors (no barrier)
            slice.issue(x, dy, row + (STAGES - 1) * groups, rows, n, (int)((it + STAGES - 1) % STAGES));
        } else {
            slice.issue(x, dy, row + (STAGES - 1) * groups, rows, n, (int)((it + STAGES - 1) % STAGES));
            copy_wait_all_but<STAGES - 1>();  // this row's copies have landed; later rows' are in flight
            send(it);
            finish(it, row);
        }
    }
    if (OVERLAP && it > 0) finish(it - 1, g + (it - 1) * groups);
    slice.store(partial + g * n);
#endif
}

// Whether the cluster backward takes these rows: sm_90+, 16-byte vectors, and a block's slice within its
// THREADS * MAXV staged vectors.
template <typename T, int THREADS, int MAXV, int CLUSTER>
__device__ __forceinline__ bool cluster_fits(const T* x, const T* dy, const T* w, const T* dx, long long n) {
#ifdef RMSNORM_CLUSTERS
    constexpr int VEC = 16 / sizeof(T);
    return aligned16(x, dy, w, n) && aligned16(x, dx, w, n) && (n / VEC + CLUSTER - 1) / CLUSTER <= THREADS * MAXV;
#else
    return false;
#endif
}

// Rows streamed twice (they fit neither registers nor shared memory): rows first, first + stride, ... into the
// partial row pr, which this block owns and zeroes.
template <typename T, typename A, int THREADS>
__device__ __forceinline__ void bwd_two_pass(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ w,
                                             double eps, A* __restrict__ pr, long long n, long long rows,
                                             long long first, long long stride, T* __restrict__ dx, A* red) {
    constexpr int VEC = 16 / sizeof(T);
    if (aligned16(x, dy, w, n) && aligned16(x, dx, w, n)) {  // 16-byte vectors
        const long long nv = n / VEC;
        for (long long j = threadIdx.x; j < nv; j += THREADS)  // zeroed by the thread that accumulates it
#pragma unroll
            for (int k = 0; k < VEC; ++k) pr[j * VEC + k] = A(0);
        for (long long row = first; row < rows; row += stride) {
            const T* xr = x + row * n;
            const T* gr = dy + row * n;
            T* dr = dx + row * n;
            A ss = 0, sg = 0;
            for (long long j = threadIdx.x; j < nv; j += THREADS) {
                const Vec<T> xv = load16(xr, j), gv = load16(gr, j), wv = load16(w, j);
#pragma unroll
                for (int k = 0; k < VEC; ++k) {
                    const A a = Cvt<T>::in(xv.v[k]);
                    ss += a * a;
                    sg += Cvt<T>::in(gv.v[k]) * Cvt<T>::in(wv.v[k]) * a;
                }
            }
            block_sum2<A, THREADS>(ss, sg, red);
            const A rstd = rsqrt_(ss / A(n) + A(eps));
            const A c = sg / A(n) * rstd * rstd * rstd;
            for (long long j = threadIdx.x; j < nv; j += THREADS) {
                const Vec<T> xv = load16(xr, j), gv = load16(gr, j), wv = load16(w, j);
                Vec<T> o;
#pragma unroll
                for (int k = 0; k < VEC; ++k) {
                    const A a = Cvt<T>::in(xv.v[k]), g = Cvt<T>::in(gv.v[k]);
                    o.v[k] = Cvt<T>::out(rstd * g * Cvt<T>::in(wv.v[k]) - a * c);
                    pr[j * VEC + k] += g * a * rstd;  // this thread owns these elements of the partial row
                }
                store16(dr, j, o);
            }
        }
    } else {
        for (long long j = threadIdx.x; j < n; j += THREADS) pr[j] = A(0);
        for (long long row = first; row < rows; row += stride) {
            const T* xr = x + row * n;
            const T* gr = dy + row * n;
            T* dr = dx + row * n;
            A ss = 0, sg = 0;
            for (long long j = threadIdx.x; j < n; j += THREADS) {
                const A a = Cvt<T>::in(xr[j]);
                ss += a * a;
                sg += Cvt<T>::in(gr[j]) * Cvt<T>::in(w[j]) * a;
            }
            block_sum2<A, THREADS>(ss, sg, red);
            const A rstd = rsqrt_(ss / A(n) + A(eps));
            const A c = sg / A(n) * rstd * rstd * rstd;
            for (long long j = threadIdx.x; j < n; j += THREADS) {
                const A a = Cvt<T>::in(xr[j]), g = Cvt<T>::in(gr[j]);
                dr[j] = Cvt<T>::out(rstd * g * Cvt<T>::in(w[j]) - a * c);
                pr[j] += g * a * rstd;  // this thread owns element j of its block's partial row
            }
        }
    }
}

// The kernel's blocks when each takes whole rows (CLUSTER = 1): persistent block b takes rows b, b + gridDim.x,
// ... into partial row b, and zeroes the partial rows b + gridDim.x, ... that no block takes.
template <typename T, typename A, int THREADS, int MAXV, int LATE, int STAGED>
__device__ __forceinline__ void bwd_blocks(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ w,
                                           double eps, A* __restrict__ partial, long long n, long long rows,
                                           long long prows, T* __restrict__ dx, A* red) {
    for (long long r = blockIdx.x + (long long)gridDim.x; r < prows; r += gridDim.x)
        for (long long j = threadIdx.x; j < n; j += THREADS) partial[r * n + j] = A(0);
    constexpr int VEC = 16 / sizeof(T);
    A* pr = partial + (long long)blockIdx.x * n;
    if (STAGED && aligned16(x, dy, w, n) && aligned16(x, dx, w, n) && n <= (long long)THREADS * VEC * MAXV) {
        bwd_staged<T, A, THREADS, MAXV>(dy, x, w, eps, pr, n, rows, dx);
        return;
    }
    const bool vec = vector_ok(x, dy, w, n, THREADS, MAXV) && vector_ok(x, dx, w, n, THREADS, MAXV);
    if (vec) {
        const long long nv = n / VEC;
        A dw[MAXV][VEC];
        Vec<T> ws[MAXV];
#pragma unroll
        for (int i = 0; i < MAXV; ++i) {
            const long long j = threadIdx.x + (long long)i * THREADS;
            if (j < nv) ws[i] = load16(w, j);
#pragma unroll
            for (int k = 0; k < VEC; ++k) dw[i][k] = 0;
        }
        // A two-row software pipeline: the next row's x and dy are loaded before this row's math, so each
        // block keeps two rows in flight (with ~2-3 blocks per SM, one row leaves HBM idle half the time).
        Vec<T> xn[MAXV], gn[MAXV];
        long long row = blockIdx.x;
        load_row<T, THREADS, MAXV>(xn, gn, x, dy, row, rows, n, nv);
        int parity = 0;
        for (; row < rows; row += gridDim.x) {
            Vec<T> xs[MAXV], gs[MAXV];
            const long long nxt = row + gridDim.x;
#pragma unroll
            for (int i = 0; i < MAXV; ++i) {
                xs[i] = xn[i];
                gs[i] = gn[i];
            }
            if (!LATE) load_row<T, THREADS, MAXV>(xn, gn, x, dy, nxt, rows, n, nv);
            A ss = 0, sg = 0;
#pragma unroll
            for (int i = 0; i < MAXV; ++i) {
                const long long j = threadIdx.x + (long long)i * THREADS;
                if (j < nv) {
#pragma unroll
                    for (int k = 0; k < VEC; ++k) {
                        const A a = Cvt<T>::in(xs[i].v[k]);
                        ss += a * a;
                        sg += Cvt<T>::in(gs[i].v[k]) * Cvt<T>::in(ws[i].v[k]) * a;
                    }
                }
            }
            if (LATE) {
                block_sum2_1bar<A, THREADS>(ss, sg, red, parity);
                parity ^= 1;
                load_row<T, THREADS, MAXV>(xn, gn, x, dy, nxt, rows, n, nv);
            } else {
                block_sum2<A, THREADS>(ss, sg, red);
            }
            const A rstd = rsqrt_(ss / A(n) + A(eps));
            const A c = sg / A(n) * rstd * rstd * rstd;
#pragma unroll
            for (int i = 0; i < MAXV; ++i) {
                const long long j = threadIdx.x + (long long)i * THREADS;
                if (j < nv) {
                    Vec<T> o;
#pragma unroll
                    for (int k = 0; k < VEC; ++k) {
                        const A a = Cvt<T>::in(xs[i].v[k]), g = Cvt<T>::in(gs[i].v[k]);
                        o.v[k] = Cvt<T>::out(rstd * g * Cvt<T>::in(ws[i].v[k]) - a * c);
                        dw[i][k] += g * a * rstd;
                    }
                    store16(dx + row * n, j, o);
                }
            }
        }
#pragma unroll
        for (int i = 0; i < MAXV; ++i) {
            const long long j = threadIdx.x + (long long)i * THREADS;
            if (j < nv) {
#pragma unroll
                for (int k = 0; k < VEC; ++k) pr[j * VEC + k] = dw[i][k];
            }
        }
    } else {  // long rows: two passes each
        bwd_two_pass<T, A, THREADS>(dy, x, w, eps, pr, n, rows, blockIdx.x, gridDim.x, dx, red);
    }
}

// Persistent blocks: block b takes rows b, b + gridDim.x, ... and writes its partial dweight sums to
// partial[b, :] (no atomics; the host sums all prows partial rows). The grid may be smaller than prows
// (it is sized per config to what stays resident); block b zeroes the rows b + gridDim.x, ... it leaves.
// Parameters: dy, x, weight, eps, partial (inputs; partial is written), n, numel, prows (extras), dx (output).
// MINB blocks resident per SM (the launch bound caps registers to fit them; the grid is MINB blocks per SM,
// since a persistent block that does not fit would wait for a whole first wave). Few threads with two rows
// of 16 elements each in flight beat many threads with one vector: (256 threads, MAXV 2, 2 blocks) keeps
// 100 registers a thread, where 1,024 threads per SM capped them at 64 and reached 2.8 TB/s (ncu, H200).
// LATE=1: the next row's loads are issued after this row's reduction barrier (a barrier orders memory
// accesses, so loads issued before it may be waited for there) and the reduction takes one barrier.
// STAGED=1: rows that fit THREADS * MAXV 16-byte vectors take bwd_staged (the launch gives its shared memory).
// CLUSTER > 1: clusters of that many blocks split each row (bwd_cluster, STAGED >= 2 rows staged, OVERLAP = 1 its
// exchange pipelined with the previous row's writes: STAGED >= 3); the grid
// is whole clusters, cluster g owning partial row g. Where the cluster kernel cannot run (before sm_90, a
// misaligned row, a slice past THREADS * MAXV vectors), each cluster's first block streams its rows alone.
template <typename TG, typename T, typename TW, typename TP, int THREADS, int MAXV, int MINB, int LATE, int STAGED,
          int CLUSTER, int OVERLAP = 0>
__global__ void __launch_bounds__(THREADS, MINB) RMSNORM_CLUSTER_DIMS(CLUSTER)
rmsnorm_bwd(const TG* __restrict__ dy_, const T* __restrict__ x, const TW* __restrict__ w, double eps,
            TP* __restrict__ partial, long long n, long long numel, long long prows, T* __restrict__ dx) {
    typedef typename Acc<T>::type A;
    static_assert(Same<T, TW>::value, "rmsnorm: weight must have the dtype of x; pass weight.to(x.dtype)");
    static_assert(Same<TP, A>::value, "rmsnorm: partial must be float32 (float64 for float64 inputs)");
    static_assert(Same<TG, T>::value, "rmsnorm: grad_y must have the dtype of x");
    const long long rows = numel / n;
    const T* __restrict__ dy = dy_;
    const T* __restrict__ wt = reinterpret_cast<const T*>(w);
    __shared__ A red[128];
    if constexpr (CLUSTER > 1) {
        const long long g = blockIdx.x / CLUSTER, groups = gridDim.x / CLUSTER;
        if (cluster_fits<T, THREADS, MAXV, CLUSTER>(x, dy, wt, dx, n)) {
            bwd_cluster<T, A, THREADS, MAXV, (STAGED > 2 ? STAGED : 2), CLUSTER, OVERLAP>(dy, x, wt, eps, partial, n,
                                                                                        rows, prows, dx);
        } else if (blockIdx.x % CLUSTER == 0) {
            for (long long r = g + groups; r < prows; r += groups)
                for (long long j = threadIdx.x; j < n; j += THREADS) partial[r * n + j] = TP(0);
            bwd_two_pass<T, A, THREADS>(dy, x, wt, eps, partial + g * n, n, rows, g, groups, dx, red);
        }
    } else {
        bwd_blocks<T, A, THREADS, MAXV, LATE, STAGED>(dy, x, wt, eps, partial, n, rows, prows, dx, red);
    }
}

// The dweight pass: column sums of the partial rows in a fixed order (deterministic), cast to the weight's
// dtype in the same kernel. One launch instead of torch's sum(0) and .to(): 8-11 us of the backward at
// (8, 4096, 4096) bf16 on an H200 was the two launches and the gap between them. A block takes 32 columns
// (a warp reads 128 contiguous bytes of a row) and its THREADS / 32 warps split the rows; the warps' sums are
// added in warp order. Parameters: partial, dw (inputs; dw is written, allocated by the caller with the
// weight's dtype), prows, n (extras).
template <typename TP, typename TW, int THREADS>
__global__ void __launch_bounds__(THREADS)
rmsnorm_dw(const TP* __restrict__ partial, TW* __restrict__ dw, long long prows, long long n) {
    static_assert(Same<TP, typename Acc<TW>::type>::value, "rmsnorm_dw: partial must be float32 (float64 for float64)");
    constexpr int WARPS = THREADS / 32;
    __shared__ TP red[WARPS][32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const long long c = (long long)blockIdx.x * 32 + lane;
    TP s = 0;
    if (c < n) {
#pragma unroll 4
        for (long long r = warp; r < prows; r += WARPS) s += partial[r * n + c];
    }
    red[warp][lane] = s;
    __syncthreads();
    if (warp == 0 && c < n) {
        TP t = 0;
#pragma unroll
        for (int k = 0; k < WARPS; ++k) t += red[k][lane];
        dw[c] = Cvt<TW>::out(t);
    }
}
