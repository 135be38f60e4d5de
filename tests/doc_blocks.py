"""The python blocks of a documentation page, as the tests run them: in order, as one script (later blocks use
earlier imports), the blocks fenced ```python gpu only where there is a GPU. test_docs.py runs them from the
clone, test_wheel_docs.py with only the built wheel installed."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Every page whose python blocks run (the guide has its own checks besides, in test_guide.py; errors.md is
# generated and walked by test_error_matrix.py; jax.md's one block needs JAX on a GPU).
PAGES = ["README.md", "docs/declaration.md", "docs/flavors.md", "docs/autograd.md", "docs/multi-gpu.md",
         "docs/native.md", "docs/checking.md", "docs/rmsnorm.md", "docs/adding-a-kernel.md", "docs/jax.md",
         "docs/without-a-gpu.md", "docs/from-torch-library.md"]  # fmt: skip


def blocks(text: str) -> list[tuple[bool, str]]:
    """(needs a GPU, code) per python block: ```python gpu blocks need one."""
    return [(tag.strip() == "gpu", code) for tag, code in re.findall(r"```python([^\n]*)\n(.*?)```", text, re.S)]


def script(page: str, with_gpu: bool) -> str:
    found = blocks((ROOT / page).read_text())
    assert found, f"{page} has no python block"
    return "\n".join(code for gpu, code in found if with_gpu or not gpu)
