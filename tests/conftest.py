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
    """``op`` on a side stream whose input is written there behind a long sleep: launched on that stream it
    reads the input, launched anywhere else it reads the NaN poison underneath (relu turns NaN into 0), so
    the result must equal torch.relu(x). A warm-up call first: loading a module synchronizes the device."""
    op(x)
    staged = torch.full_like(x, float("nan"))
    s = torch.cuda.Stream(device=x.device)
    torch.cuda.synchronize(x.device)
    with torch.cuda.stream(s):
        torch.cuda._sleep(50_000_000)
        staged.copy_(x)
        y = op(staged)
        ev = torch.cuda.Event()
        ev.record(s)
    assert not ev.query(), "the op's work should be queued behind the sleep on the side stream"
    s.synchronize()
    torch.testing.assert_close(y, torch.relu(x))
