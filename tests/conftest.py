import os
from pathlib import Path

import pytest
import torch
from hypothesis import settings
from tiers import DEEP

import opsmith as ok

# The examples and benchmarks packages live at the repository root, outside the wheel: pytest finds them through
# pyproject's pythonpath, and the scripts the tests start in subprocesses through PYTHONPATH.
ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)


def pythonpath(*first: object) -> str:
    """PYTHONPATH for a test's subprocess: ``first``, then this one's (the repository, and whatever the user
    put there: a GPU image's carried packages, e.g. NumPy < 2.4 for Triton 3.6's interpreter)."""
    return os.pathsep.join([*(str(p) for p in first), os.environ["PYTHONPATH"]])


# The tests pin the path they test: the Python path unless they say otherwise (test_serving.py and
# test_gpu_serving.py serve natively by default, in their own processes; test_native*.py build libraries).
# A background native build would otherwise switch an op between two assertions of a test about the other.
os.environ.setdefault("OPSMITH_NATIVE", "off")

HAS_CUDA = torch.cuda.is_available()
DEVICE = torch.device("cuda" if HAS_CUDA else "cpu")


# The fast profile by default; scripts/test --all sets OPSMITH_TEST_DEEP=1 for the deep one (tiers.py).
settings.register_profile("fast", max_examples=25, deadline=None)
settings.register_profile("deep", max_examples=200, deadline=None)
settings.load_profile("deep" if DEEP else "fast")


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    """Every test run compiles into its own cache directory, so runs never see each other's entries. The
    workers of one run (pytest-xdist) share it: what one compiled the other reads, as processes sharing a
    user's cache do (entries are content-addressed and published atomically)."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    cache = root / "opsmith-cache"
    cache.mkdir(mode=0o700, exist_ok=True)
    os.environ["OPSMITH_CACHE_DIR"] = str(cache)
    yield


@pytest.fixture(autouse=True)
def _jax_config_kept():
    """A test that switches JAX's process-wide x64 flag and leaves it so changes every later JAX test on its
    worker (float arrays become float64, which the ops refuse): CI once failed six tests far from the one that
    leaked. Such a test fails here, by name, and the flag is put back."""
    import sys

    jax = sys.modules.get("jax")
    before = jax.config.jax_enable_x64 if jax is not None else None
    yield
    jax = sys.modules.get("jax")
    after = jax.config.jax_enable_x64 if jax is not None else None
    if jax is not None and after != bool(before):
        jax.config.update("jax_enable_x64", bool(before))
        pytest.fail(f"the test left jax_enable_x64={after}: use tests/jax_x64.py's x64() to switch it for a block")


_SESSION_PCH: list[Path] = []


def seeded_cache(cache: Path) -> Path:
    """``cache``, made for a test's own processes, holding the run's precompiled torch headers (hard links to
    the run cache's entry, made there once): a fresh cache's builds would otherwise parse torch's headers again
    (~14 s each on 2 cores) and serving never makes one itself (opsmith/native/pch.py)."""
    cache.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not _SESSION_PCH:
        _SESSION_PCH.append(_make_session_pch())
    entry = _SESSION_PCH[0]
    if entry is not None and entry.is_dir():
        into = cache / "native-pch" / entry.name
        into.mkdir(mode=0o700, parents=True, exist_ok=True)
        for f in entry.iterdir():
            if not (into / f.name).exists():
                os.link(f, into / f.name)
    return cache


def _make_session_pch() -> Path | None:
    import importlib

    from opsmith.native.library import library_source

    build = importlib.import_module("opsmith.native.build")
    old = os.environ.get("OPSMITH_NATIVE_PCH")
    os.environ["OPSMITH_NATIVE_PCH"] = "on"
    try:
        made = build._precompiled(library_source([], [], torch.__version__), build.compiler(), "aten", True)
    except ok.ToolchainError:
        return None
    finally:
        os.environ.pop("OPSMITH_NATIVE_PCH") if old is None else os.environ.__setitem__("OPSMITH_NATIVE_PCH", old)
    return None if made is None else made[1]


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="needs a CUDA GPU: torch.cuda.is_available() is False here")
    for item in items:
        if "gpu" in item.keywords and not HAS_CUDA:
            item.add_marker(skip)


def assert_launches_on_current_stream(op, x: torch.Tensor) -> None:
    """opsmith check's stream check on ``op`` with input ``x`` (reference torch.relu): the input is written on
    a side stream behind a long sleep, so an op launched anywhere else reads the NaN poison underneath."""
    case = ok.CheckCase(op, lambda shape, dtype, device: (x,), torch.relu, shapes=[tuple(x.shape)], dtypes=[x.dtype])
    (row,) = ok.check(case, device=x.device, only=["stream"]).rows
    assert row[1] == "pass", row
