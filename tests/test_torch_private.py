"""The private torch names opsmith reads (``opsmith.compat.torch_private``), on whichever torch runs the suite: CI runs it
on the newest and the oldest supported torch, so a release that moves a name fails here by name."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import torch
from torch.utils.cpp_extension import include_paths

from opsmith.compat import torch_private as tc

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("entry", [e for e in tc.PRIVATE if e.missing is None], ids=lambda e: f"{e.module}.{e.attr}")
def test_every_name_opsmith_needs_resolves_on_this_torch(entry):
    tc.resolve(entry.module, entry.attr)  # raises ImportError or AttributeError naming what is gone


def test_each_name_with_a_fallback_either_resolves_or_has_its_replacement():
    have = {}
    for e in tc.PRIVATE:
        try:
            tc.resolve(e.module, e.attr)
            have[e.attr] = True
        except (AttributeError, ImportError):
            have[e.attr] = False
    # the FX flag moved in 2.14: exactly one of its two homes exists
    assert have["_is_fx_tracing_flag"] != have["_set_is_fx_tracing"], have
    assert have["_write_ninja_file_to_build_library"], "cxx_flags would fall back: read torch's flags another way"


def test_the_fx_tracing_flag_is_cleared_inside_and_restored_after():
    import torch.fx._symbolic_trace as st

    def get() -> bool:
        return st._get_is_fx_tracing() if hasattr(st, "_get_is_fx_tracing") else st._is_fx_tracing_flag

    def put(v: bool) -> None:
        if hasattr(st, "_set_is_fx_tracing"):
            st._set_is_fx_tracing(v)
        else:
            st._is_fx_tracing_flag = v

    put(True)
    try:
        assert st.is_fx_symbolic_tracing() or get()
        with tc.fx_tracing_cleared():
            assert get() is False
        assert get() is True
        with pytest.raises(RuntimeError), tc.fx_tracing_cleared():
            raise RuntimeError("restored on the way out too")
        assert get() is True
    finally:
        put(False)


def test_native_builds_take_torchs_own_extension_flags():
    from opsmith.native.build import compile_flags

    flags, _ = compile_flags()
    std = [f for f in flags if f.startswith("-std=")]
    assert len(std) == 1 and std[0] in tc.cxx_flags(), std  # torch's standard, and no second one of ours
    assert any(f.endswith(include_paths()[0]) or f == include_paths()[0] for f in flags), flags
    assert [f for f in flags if f.startswith("-DTORCH_EXTENSION_NAME=")] == ["-DTORCH_EXTENSION_NAME=opsmith_native"]


def test_the_installed_torch_is_within_the_supported_range():
    """pyproject's bounds are the versions the suite runs on; a torch outside them is one nobody tested."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (spec,) = [d for d in deps if re.match(r"torch\b", d)]
    low, high = re.fullmatch(r"torch>=(\d+\.\d+),<(\d+\.\d+)", spec).groups()

    def version(text: str) -> tuple[int, ...]:
        return tuple(int(x) for x in text.split("+")[0].split(".")[:2])

    assert version(low) <= version(torch.__version__) < version(high), (spec, torch.__version__)
    newest = f"{version(high)[0]}.{version(high)[1] - 1}"
    assert tc.TESTED.startswith(low) and tc.TESTED.endswith(newest), (tc.TESTED, spec)
