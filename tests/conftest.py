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
