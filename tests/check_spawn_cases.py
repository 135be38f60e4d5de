"""Cases for ``opsmith check MODULE:NAME``'s spawned rows (test_check_cpu.py): ops whose large calls abort the
process, never return, or say which process ran them (``sys.argv[0]``: a spawned child is
``opsmith/checking/child.py``, a forked one keeps its parent's). The first shape is small: check's own first call,
in the parent, must survive."""

import os
import sys
import time

import torch

import opsmith as ok

lib = torch.library.Library("t_spawn_cases", "DEF")
for name in ("boom", "hang", "where"):
    lib.define(f"{name}(Tensor x) -> Tensor")


def _large(x: torch.Tensor) -> bool:
    return x.shape[-1] > 50


def _where(x: torch.Tensor) -> torch.Tensor:
    if _large(x):
        raise RuntimeError(f"ran in {sys.argv[0]}")
    return 2 * x


lib.impl("boom", lambda x: os.abort() if _large(x) else 2 * x, "CPU")  # a stray write's abort
lib.impl("hang", lambda x: time.sleep(3600) if _large(x) else 2 * x, "CPU")  # a kernel that never returns
lib.impl("where", _where, "CPU")


def _case(name: str) -> ok.CheckCase:
    return ok.CheckCase(getattr(torch.ops.t_spawn_cases, name).default,
                        lambda s, dt, dev: (torch.randn(s, dtype=dt, device=dev),), lambda x: 2 * x,
                        shapes=[(4, 10), (4, 100)])  # fmt: skip


BOOM, HANG, WHERE = _case("boom"), _case("hang"), _case("where")
