import os
from pathlib import Path

import pytest
import torch

import opsmith as ok

# The examples and benchmarks packages live at the repository root, outside the wheel: pytest finds them through
# pyproject's pythonpath, and the scripts the tests start in subprocesses through PYTHONPATH.
ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)

# The tests pin the path they test: the Python path unless they say otherwise (test_serving.py and
# test_gpu_serving.py serve natively by default, in their own processes; test_native*.py build libraries).
# A background native build would otherwise switch an op between two assertions of a test about the other.
os.environ.setdefault("OPSMITH_NATIVE", "off")

HAS_CUDA = torch.cuda.is_available()
DEVICE = torch.device("cuda" if HAS_CUDA else "cpu")


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    """Every test session compiles into its own cache directory, so runs never see each other's entries."""
    os.environ["OPSMITH_CACHE_DIR"] = str(tmp_path_factory.mktemp("opsmith-cache"))
    yield


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
