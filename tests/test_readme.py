"""The README's example runs as written (registration on CPU; the call too where there is a GPU)."""

import re
import runpy
from pathlib import Path

import pytest
import torch

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_examples(tmp_path, monkeypatch):
    """Every python block, in order, as one file (later blocks use the first one's import; @triton.jit
    reads its kernel's source from a real file). Without a GPU, lines that touch one are left out and
    everything else (registration included) runs."""
    pytest.importorskip("triton", reason="the README's Triton examples need Triton, which installs on Linux x86-64")
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) == 9
    monkeypatch.chdir(tmp_path)  # the native library example writes libmyops.so here
    code = "\n".join(blocks)
    if not torch.cuda.is_available():
        code = "\n".join(
            line for line in code.splitlines() if not any(t in line.split("#")[0] for t in ('"cuda"', "backward()"))
        )
    path = tmp_path / "readme_example.py"
    path.write_text(code)
    scope = runpy.run_path(str(path))
    assert str(scope["relu"].overload._schema) == "myns::relu(Tensor x) -> Tensor"
    assert str(scope["scale"].overload._schema) == "myns::scale(Tensor x, float alpha) -> Tensor"
    assert len(scope["scale"].record.configs) == 4
    assert scope["rmsnorm"].record.op_name == "myns::rmsnorm" and scope["norm"].impl == "triton"
    assert scope["case"].label == "myns::relu"
    assert scope["copy_rows"].sharding_plan.user is scope["rows_only"]
    assert scope["twice_op"].record.flavor == "cute" and len(scope["twice_op"].record.configs) == 3
    assert scope["report"].ops == ["myns::relu"] and (tmp_path / "libmyops.so").is_file()
    if torch.cuda.is_available():
        from opsmith.rmsnorm import reference_rms_norm

        x, w = scope["x"], scope["w"]
        want = torch.autograd.grad(reference_rms_norm(x, w, 1e-6).sum(), (x, w))
        torch.testing.assert_close(x.grad, want[0], atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(w.grad, want[1], atol=1e-3, rtol=1e-4)
        assert scope["y"].dtype == torch.bfloat16 and scope["z"].shape == (8, 4096)
        x = torch.randn(1000, device="cuda")
        torch.testing.assert_close(scope["relu"](x), torch.relu(x))
        for dt in (torch.float32, torch.float16):
            x = torch.randn(5000, device="cuda", dtype=dt)
            torch.testing.assert_close(scope["scale"](x, 3.0), x * 3.0)
            torch.testing.assert_close(scope["twice_op"](x), x * 2)
