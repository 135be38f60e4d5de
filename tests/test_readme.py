"""The README's example runs as written (registration on CPU; the call too where there is a GPU)."""

import re
import runpy
from pathlib import Path

import torch

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_examples(tmp_path):
    """Both python blocks, in order, as one file (the Triton one uses the first one's import; @triton.jit
    reads its kernel's source from a real file)."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) == 2
    code = "\n".join(blocks)
    if not torch.cuda.is_available():
        code = "\n".join(line for line in code.splitlines() if 'device="cuda"' not in line)
    path = tmp_path / "readme_example.py"
    path.write_text(code)
    scope = runpy.run_path(str(path))
    assert str(scope["relu"].overload._schema) == "myns::relu(Tensor x) -> Tensor"
    assert str(scope["scale"].overload._schema) == "myns::scale(Tensor x, float alpha) -> Tensor"
    assert len(scope["scale"].record.configs) == 4
    if torch.cuda.is_available():
        x = torch.randn(1000, device="cuda")
        torch.testing.assert_close(scope["relu"](x), torch.relu(x))
        for dt in (torch.float32, torch.float16):
            x = torch.randn(5000, device="cuda", dtype=dt)
            torch.testing.assert_close(scope["scale"](x, 3.0), x * 3.0)
