import os

import pytest
import torch

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
    """``op(x)`` on a side stream kept busy by a long sleep: its work must queue behind the sleep (a launch
    on the default stream would finish first), and the result must equal torch.relu(x) once it ran."""
    s = torch.cuda.Stream(device=x.device)
    torch.cuda.synchronize(x.device)
    with torch.cuda.stream(s):
        torch.cuda._sleep(50_000_000)
        y = op(x)
        ev = torch.cuda.Event()
        ev.record(s)
    assert not ev.query(), "the op's work should be queued behind the sleep on the side stream"
    s.synchronize()
    torch.testing.assert_close(y, torch.relu(x))
