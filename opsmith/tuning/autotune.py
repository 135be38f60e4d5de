"""Autotuning: pick the fastest config per tuning key, remember it in memory and on disk.

The generated eager code computes the key (dtypes of the tensor inputs plus the declared ``TuneDim``
buckets) and looks it up in ``Tuner.decisions``, a plain dict: a known key costs one dict lookup. Only a
miss reaches ``Tuner.decide``, which reads the disk cache, or runs every config on the real inputs
(restoring in-place inputs between runs), keeps the fastest by median device time and writes the decision
as JSON, content-addressed by the kernel, its configs, the device and the library versions.

Tuning never happens while a CUDA graph is captured or torch.compile traces: there the cached decision or
the declared default is used.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import statistics
import threading
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .. import env
from ..cache import DiskCache, make_key
from ..distributed.tuning import in_job, job_decision
from ..errors import CompileError, InputError, LaunchError, OpsmithError
from ..progress import progress_bar

__all__ = ["Timer", "Tuner", "cuda_event_timer", "pow2"]

log = logging.getLogger("opsmith.autotune")

#: ``timer(run, restore) -> per-run device times in ms``. ``run`` launches one config once; ``restore``
#: puts in-place inputs back, and must not be timed.
Timer = Callable[[Callable[[], None], Callable[[], None]], list[float]]


def pow2(n: int) -> int:
    """The next power of two >= n (1 for n <= 1): the default tuning bucket of a dimension."""
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def cuda_event_timer(run: Callable[[], None], restore: Callable[[], None], budget_ms: float = 20.0,
                     warmup_ms: float = 0.0) -> list[float]:  # fmt: skip
    """Device time of ``run`` per repetition, from CUDA events on the current stream.

    Before each repetition ``restore`` runs, then a 256 MB buffer is zeroed, outside the timed events. The
    zeroing evicts L2 (50 MB on an H100/H200), so every config starts cold as in a real model, and it keeps
    the GPU busy while the host enqueues the run: without it, a kernel shorter than the ~10 us host launch
    path is timed together with the GPU's wait for it (measured: 25 vs 29 us for the same softmax).
    One repetition sizes the count to about ``budget_ms`` of kernel time (5 to 100 runs; ``rep`` of
    ``@triton.autotune``), after about ``warmup_ms`` of untimed runs (its ``warmup``).
    """
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    restore()
    flush.zero_()
    start.record()
    run()
    end.record()
    end.synchronize()
    est = max(start.elapsed_time(end), 1e-3)
    for _ in range(min(1000, int(warmup_ms / est))):
        restore()
        run()
    reps = max(5, min(100, int(budget_ms / est)))
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for s, e in events:
        restore()
        flush.zero_()
        s.record()
        run()
        e.record()
    torch.cuda.synchronize()
    del flush
    return [s.elapsed_time(e) for s, e in events]


_RUNOFF = 1.03


class Tuner:
    """The decisions of one op. ``identity``: what makes a decision valid (kernel, configs, versions)."""

    def __init__(self, op_name: str, identity: dict[str, Any], configs: Sequence[dict], default: int,
                 timer: Timer | None = None, prune: Callable[[dict, dict], list[int]] | None = None,
                 warmup: float | None = None, rep: float | None = None) -> None:  # fmt: skip
        self.op_name, self.identity, self.configs, self.default = op_name, identity, list(configs), default
        if timer is None and (warmup is not None or rep is not None):
            timer = functools.partial(cuda_event_timer, budget_ms=20.0 if rep is None else rep,
                                      warmup_ms=warmup or 0.0)  # fmt: skip
        self.timer: Timer = timer or cuda_event_timer
        #: ``prune_configs_by``: (named args, kwargs) -> the configs worth timing for this call.
        self.prune = prune
        self.decisions: dict[tuple, int] = {}  # read directly by the generated eager code
        self.trial_runs = 0  # timed and untimed config runs made by tuning (tests and benchmarks read it)
        self.tuned_keys = 0  # keys this process tuned itself (not read from disk or from another rank)
        self.last_times: dict[int, float] = {}
        self._forced: set[tuple] = set()
        self._lock = threading.RLock()

    # -- the disk side -------------------------------------------------------------------------------
    def _disk(self) -> DiskCache | None:
        return None if env.DISABLE_DISK_CACHE.get() else DiskCache(env.cache_dir(), "tuning")

    def disk_key(self, key: tuple, device: int | None) -> str:
        dev = {"name": "cpu", "cc": None}
        if device is not None and device >= 0 and torch.cuda.is_available():
            dev = {"name": torch.cuda.get_device_name(device), "cc": list(torch.cuda.get_device_capability(device))}
        return make_key({"kind": "tuning", **self.identity, "device": dev, "torch": torch.__version__,
                         "key": [str(v) for v in key]})  # fmt: skip

    def cached(self, key: tuple, device: int | None) -> int | None:
        """The decision on disk for ``key``, or None (a miss, also for a stale or corrupt entry)."""
        cache = self._disk()
        hit = cache.get(self.disk_key(key, device)) if cache else None
        if hit is None:
            return None
        try:
            winner = self.winner_of(json.loads(hit[1]))
        except ValueError:
            winner = None
        if winner is None:
            log.warning("%s: ignoring a tuning cache entry that does not match the configs", self.op_name)
        return winner

    def winner_of(self, entry: object) -> int | None:
        """The config a stored decision names, or None unless it names one of these configs by index and
        content (a decision made for other configs is never used)."""
        if not isinstance(entry, dict):
            return None
        winner = entry.get("winner")
        if not isinstance(winner, int) or isinstance(winner, bool) or not 0 <= winner < len(self.configs):
            return None
        return winner if entry.get("config") == self.configs[winner] else None

    def record(self, key: tuple, device: int | None, winner: int, times: dict[int, float] | None = None) -> None:
        """Keep a decision made elsewhere (another rank of the job, or a timing of its own such as
        ``inductor/choice.py``'s, whose ``times`` are kept beside it) on disk, as this process's own."""
        self._write(key, device, winner, times or {}, {})

    def _write(self, key: tuple, device: int | None, winner: int, times: dict[int, float],
               skipped: dict[int, str]) -> None:  # fmt: skip
        cache = self._disk()
        if cache is None:
            return
        entry = {"op": self.op_name, "key": [str(v) for v in key], "winner": winner, "config": self.configs[winner],
                 "times_ms": {str(c): t for c, t in times.items()}, "skipped": {str(c): r for c, r in skipped.items()}}  # fmt: skip
        cache.put(self.disk_key(key, device), {"op": self.op_name, "kind": "tuning"}, json.dumps(entry).encode())

    # -- deciding ------------------------------------------------------------------------------------
    def decide(self, key: tuple, device: int | None, run: Callable[[int], None],
               mutated: Sequence[torch.Tensor] = (), outputs: Sequence[torch.Tensor] = (),
               named: Callable[[], tuple[dict, dict]] | None = None) -> int:  # fmt: skip
        """The config for ``key``: remembered, read from disk, or tuned now on the caller's tensors. In a job of
        several ranks the decision is the job's (``distributed/tuning.py``): one rank makes it (from its disk
        or by tuning) and every rank launches it, whatever the others' node-local caches hold."""
        with self._lock:  # eight threads missing the same key tune once
            force = env.AUTOTUNE_FORCE.get() and key not in self._forced
            if key in self.decisions and not force:
                return self.decisions[key]
            if in_job():
                winner = job_decision(
                    self, key, device, lambda: self._local(key, device, run, mutated, outputs, force, named)
                )
                self._forced.add(key)
                self.decisions[key] = winner
                return winner
            if _cannot_tune():
                hit = self.cached(key, device)
                if hit is None:
                    return self.default  # not remembered: a later eager call may tune
                self.decisions[key] = hit  # the disk's decision is final, as _local takes it
                return hit
            winner = self._local(key, device, run, mutated, outputs, force, named)
            self._forced.add(key)
            self.decisions[key] = winner
            return winner

    def untuned(self, key: tuple, device: int | None) -> int:
        """The config where nothing may be tuned (torch.compile tracing a Triton op): remembered, on disk, or
        the default; in a job, the job's decision (so every rank traces the same kernel)."""
        with self._lock:
            if key in self.decisions:
                return self.decisions[key]
            if in_job():
                winner = job_decision(self, key, device, lambda: self._stored(key, device))
                self.decisions[key] = winner
                return winner
            return self._stored(key, device)

    def _stored(self, key: tuple, device: int | None) -> int:
        hit = self.cached(key, device)
        return self.default if hit is None else hit

    def _local(self, key: tuple, device: int | None, run: Callable[[int], None], mutated: Sequence[torch.Tensor],
               outputs: Sequence[torch.Tensor], force: bool, named: Callable | None = None) -> int:  # fmt: skip
        """What this process decides alone: the disk's decision, else a tuning (or the default where tuning
        cannot run or is turned off)."""
        if not force:
            hit = self.cached(key, device)
            if hit is not None:
                return hit
        if _cannot_tune() or not env.AUTOTUNE.get():
            return self.default
        return self._tune(key, device, run, mutated, outputs, named)

    def _candidates(self, named: Callable | None) -> list[int]:
        """The configs to time: all, or those ``prune_configs_by`` keeps for this call's arguments."""
        if self.prune is None or named is None:
            return list(range(len(self.configs)))
        try:
            return self.prune(*named())
        except Exception as e:  # the user's pruner failed: their error, with where it came from
            raise LaunchError(f"{self.op_name}: prune_configs_by raised {type(e).__name__}: {e}. Fix: correct the "
                              "pruning function (it receives triton.Config objects and the kernel's arguments by "
                              "name).") from e  # fmt: skip

    def _tune(self, key: tuple, device: int | None, run: Callable[[int], None], mutated: Sequence[torch.Tensor],
              outputs: Sequence[torch.Tensor], named: Callable | None = None) -> int:  # fmt: skip
        self.tuned_keys += 1
        candidates = self._candidates(named)
        if len(candidates) == 1:  # as Triton's autotuner: one config left, nothing to time
            self._write(key, device, candidates[0], {}, {})
            return candidates[0]
        saved = [m.clone() for m in mutated]

        def restore() -> None:
            for m, s in zip(mutated, saved, strict=True):
                m.copy_(s)

        check = env.AUTOTUNE_CHECK.get()
        reference: list[torch.Tensor] | None = None
        times: dict[int, float] = {}
        skipped: dict[int, str] = {}
        errors: dict[int, Exception] = {}
        bar = progress_bar(len(candidates), f"tuning {self.op_name} {key}")
        try:
            for c in candidates:
                try:
                    restore()
                    run(c)  # compiles and loads the config; a failure here skips it
                    self.trial_runs += 1
                    if check:
                        got = [t.clone() for t in (*outputs, *mutated)]
                        if reference is None:
                            reference = got
                        else:
                            self._compare(c, reference, got)
                    samples = self.timer(lambda c=c: run(c), restore)
                    self.trial_runs += len(samples)
                    times[c] = statistics.median(samples)
                except (CompileError, LaunchError, OpsmithError) as e:
                    errors.setdefault(c, e)
                    skipped[c] = str(e).splitlines()[0]
                    log.warning("%s: config %d %s skipped: %s", self.op_name, c, self.configs[c], skipped[c])
                if bar:
                    bar[0].advance(bar[1])
        finally:
            if bar:
                bar[0].stop()
            restore()
        if not times:
            first = errors.get(0) or next(iter(errors.values()), None)
            if isinstance(first, CompileError) and all(isinstance(e, CompileError) for e in errors.values()):
                raise first  # nothing compiled for this key (a dtype the kernel refuses): the compiler's own words
            if errors and all(isinstance(e, InputError) for e in errors.values()):
                # every config refused these inputs (a grid out of range): the default's refusal, which is what
                # a caller without tuning (a native library with no decision) gets for them
                raise errors.get(self.default, first)
            raise LaunchError(f"{self.op_name}: no tuning config could run for key {key}: {skipped}. Fix: check the "
                              "configs against the kernel (constexpr values, block sizes, shared memory).")  # fmt: skip
        winner = min(times, key=times.__getitem__)
        # A runoff between near-ties: configs within 3% of the winner are timed again, interleaved, three
        # rounds each (one pass's medians put a config 4.6% off the best in 1 of 10 shapes on an H200).
        close = [c for c in times if times[c] <= times[winner] * _RUNOFF]
        if len(close) > 1:
            pooled: dict[int, list[float]] = {c: [] for c in close}
            try:
                for _ in range(3):
                    for c in close:
                        pooled[c] += self.timer(lambda c=c: run(c), restore)
            finally:
                restore()
            self.trial_runs += sum(len(v) for v in pooled.values())
            times.update({c: statistics.median(v) for c, v in pooled.items()})
            winner = min(close, key=times.__getitem__)
        self.last_times = dict(times)
        d = times.get(self.default, math.nan)
        log.info("%s: key %s -> config %d %s: %.4f ms (default config %d: %.4f ms; %d configs timed, %d skipped)",
                 self.op_name, key, winner, self.configs[winner], times[winner], self.default, d, len(times),
                 len(skipped))  # fmt: skip
        self._write(key, device, winner, times, skipped)
        return winner

    def _compare(self, c: int, reference: list[torch.Tensor], got: list[torch.Tensor]) -> None:
        for k, (r, g) in enumerate(zip(reference, got, strict=True)):
            if r.is_floating_point():
                tol = {torch.float16: 1e-2, torch.bfloat16: 2e-2}.get(r.dtype, 1e-4)
                same = torch.allclose(r.float(), g.float(), rtol=tol, atol=tol, equal_nan=True)
            else:
                same = torch.equal(r, g)
            if not same:
                log.warning("%s: config %d %s disagrees with config 0 on result %d (max abs diff %s)", self.op_name,
                            c, self.configs[c], k, (r.double() - g.double()).abs().max().item())  # fmt: skip


def _cannot_tune() -> bool:
    if torch.compiler.is_compiling():
        return True
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()
