"""One tuning decision per job: when ``torch.distributed`` is initialized, one rank tunes a key and every
rank launches its choice.

Ranks tuning on their own may pick different configs (medians within a few percent reorder), and a rank
that tunes while its peers wait inside an NCCL collective can trip the collective's timeout. So decisions
travel over the process group's key-value store (``TCPStore``), never as a collective: a rank that misses
a key (in memory and on disk) claims it with ``compare_set``; the claimer tunes on its own tensors and
publishes the winner; the others wait on the store (host side, outside any collective, so the order of
collectives is untouched) and launch what it published. Rank 0 claims at once; other ranks first give it
``OPSMITH_TUNE_CLAIM_WAIT`` seconds, so in SPMD code rank 0 tunes, and a key only other ranks meet (uneven
shards) is still tuned by one of them instead of waiting forever.

A cluster of thousands of GPUs should not tune at all: tune once on one node, ``python -m opsmith tuning
export decisions.json``, and ``python -m opsmith tuning import decisions.json`` on every node before the
job (decisions are keyed by kernel, configs, GPU model and library versions; a stale one is a miss).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from .. import env
from ..errors import LaunchError

__all__ = ["in_job", "job_decision"]

_PREFIX = "opsmith/tuning/"


def _store() -> tuple[Any, int] | None:
    """The default process group's store and this rank, when a job of more than one rank is running."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return None
    from torch.distributed.distributed_c10d import _get_default_store

    return _get_default_store(), dist.get_rank()


def in_job() -> bool:
    """Whether this process is one rank of a job of several (decisions are then the job's)."""
    return _store() is not None


def job_decision(tuner: Any, key: tuple, device: int | None, tune: Callable[[], int]) -> int:
    """The winner for ``key``: tuned here (``tune()``) when this rank owns the key or no job is running,
    otherwise the owner's published choice."""
    job = _store()
    if job is None:
        return tune()
    store, rank = job
    name = _PREFIX + tuner.disk_key(key, device)
    if rank != 0:
        # Rank 0 reaches the same key at about the same time in SPMD code: let it claim. A timeout means rank 0
        # has not met this key (or had it cached), and this rank may claim it.
        with contextlib.suppress(Exception):
            store.wait([name + "/owner"], timedelta(seconds=env.TUNE_CLAIM_WAIT.get()))
    owner = store.compare_set(name + "/owner", "", str(rank))
    if isinstance(owner, bytes):
        owner = owner.decode()
    if owner == str(rank):
        try:
            winner = tune()
        except Exception as e:
            store.set(name + "/decision", json.dumps({"error": f"{type(e).__name__}: {e}"}))
            raise
        store.set(name + "/decision", json.dumps({"winner": winner, "config": tuner.configs[winner]}))
        return winner
    return _wait_for(tuner, store, name, owner, key, device)


def _wait_for(tuner: Any, store: Any, name: str, owner: str, key: tuple, device: int | None) -> int:
    timeout = env.TUNE_TIMEOUT.get()
    try:
        store.wait([name + "/decision"], timedelta(seconds=timeout))
    except Exception as e:
        raise LaunchError(f"{tuner.op_name}: rank {owner} claimed tuning key {key} and published no decision within "
                          f"{timeout:.0f} s ({e}). Fix: raise {env.TUNE_TIMEOUT.name}, or ship the decisions "
                          "beforehand (python -m opsmith tuning export/import).") from None  # fmt: skip
    entry = json.loads(store.get(name + "/decision"))
    if "error" in entry:
        raise LaunchError(f"{tuner.op_name}: rank {owner} failed to tune key {key}: {entry['error']}")
    winner = tuner.winner_of(entry)
    if winner is None:
        raise LaunchError(f"{tuner.op_name}: rank {owner} published a decision for key {key} that does not match this "
                          "rank's configs. Fix: run the same opsmith and op declarations on every rank.")  # fmt: skip
    tuner.record(key, device, winner)
    return winner
