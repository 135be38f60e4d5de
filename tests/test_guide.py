"""docs/adding-a-kernel.md runs as written: its python blocks in order (the `gpu` ones only on a GPU), and
every error it quotes is an error the matrix test checks (docs/errors.md)."""

import os
import re
import runpy
import sys
from pathlib import Path

import pytest
from conftest import pythonpath
from doc_blocks import blocks as _blocks

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "adding-a-kernel.md"


def _run(tmp_path: Path, with_gpu: bool) -> dict:
    code = "\n".join(c for gpu, c in _blocks(GUIDE.read_text()) if with_gpu or not gpu)
    path = tmp_path / "guide_example.py"  # @triton.jit reads its kernel's source from a real file
    path.write_text(code)
    return runpy.run_path(str(path))


def test_the_guide_runs_without_a_gpu(tmp_path):
    pytest.importorskip("triton", reason="the guide's Triton example needs Triton (the test extra installs it)")
    blocks = _blocks(GUIDE.read_text())
    assert sum(not g for g, _ in blocks) == 9 and sum(g for g, _ in blocks) == 3
    scope = _run(tmp_path, with_gpu=False)
    assert scope["scale_rows"].record.optional == (1,)  # the optional weight
    assert [p.name for p in scope["reshape_and_cache"].record.params] == [
        "key", "value", "key_cache", "value_cache", "slot_mapping", "key_stride", "value_stride", "num_heads",
        "head_size"]  # fmt: skip
    assert scope["reshape_and_cache_tt"].record.tensor_inputs[4].dtype == "int64"
    assert scope["reshape_and_cache"].record.tensor_inputs[1].dtype_like == "key"
    assert scope["total"].record.tune_key == (["extra", 0, "exact"],)  # @triton.autotune(key=["n_elements"])


@pytest.mark.gpu
def test_the_guide_runs_on_a_gpu(tmp_path):
    """In a process of its own: the CPU run above registered the guide's ops from another file, whose kernels'
    line numbers (part of Triton's kernel hash) differ, and one name cannot hold two declarations."""
    import subprocess

    code = "\n".join(c for _, c in _blocks(GUIDE.read_text())) + "\nprint('guide ran', 'case' in dir())\n"
    path = tmp_path / "guide_example.py"
    path.write_text(code)
    p = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=900,
                       env={**os.environ, "PYTHONPATH": pythonpath(ROOT)})  # fmt: skip
    assert p.returncode == 0, p.stderr[-4000:]
    assert p.stdout.strip().splitlines()[-1] == "guide ran True"


def test_the_errors_the_guide_quotes_are_the_checked_ones():
    sys.path.insert(0, str(ROOT / "tests"))
    import error_matrix as em

    checked = {msg for _, msg in em.parse(em.DOC.read_text()).values()}
    quoted = re.findall(r"^\| [^|]+ \| `\w+`: (.*) \|$", GUIDE.read_text().split("## 9.")[1], re.M)
    assert len(quoted) >= 6
    for q in quoted:
        assert q in checked, f"the guide quotes an error docs/errors.md does not have: {q}"
