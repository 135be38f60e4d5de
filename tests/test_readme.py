"""The README's example runs as written (registration on CPU; the call too where there is a GPU)."""

import re
from pathlib import Path

import torch

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_example():
    block = re.search(r"```python\n(.*?)```", README.read_text(), re.S).group(1)
    if not torch.cuda.is_available():
        block = "\n".join(line for line in block.splitlines() if 'device="cuda"' not in line)
    scope: dict = {}
    exec(compile(block, str(README), "exec"), scope)
    assert str(scope["relu"].overload._schema) == "myns::relu(Tensor x) -> Tensor"
    if torch.cuda.is_available():
        x = torch.randn(1000, device="cuda")
        torch.testing.assert_close(scope["relu"](x), torch.relu(x))
