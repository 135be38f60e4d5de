"""The documentation runs and holds together: every page's python blocks run as written (registration on
CPU; the calls too where there is a GPU), every link resolves, every file under docs/ is reachable from the
README, and the tables that mirror code (environment variables, modules) hold every entry."""

import re
import runpy
from pathlib import Path

import pytest
import torch
from doc_blocks import PAGES, script

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
RUN = [p for p in PAGES if p not in ("docs/adding-a-kernel.md", "docs/jax.md")]  # test_guide.py, the JAX suite
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _run_blocks(page: str, tmp_path: Path, monkeypatch) -> dict:
    """A page's python blocks in order, as one file (@triton.jit reads its kernel's source from a real file);
    the ``gpu`` blocks only where there is a GPU."""
    monkeypatch.chdir(tmp_path)  # the native library example writes libmyops.so here, flavors.md scale.ptx
    path = tmp_path / (Path(page).stem + "_example.py")
    path.write_text(script(page, torch.cuda.is_available()))
    return runpy.run_path(str(path))


# docs/native.md's blocks build native libraries (~100 s on 2 cores): the whole suite runs them
@pytest.mark.parametrize(
    "page", [pytest.param(p, marks=pytest.mark.slow) if p.endswith("native.md") else p for p in RUN]
)
def test_python_blocks_run(page, tmp_path, monkeypatch):
    pytest.importorskip("triton", reason="the docs' Triton examples need Triton, which installs on Linux x86-64")
    if page in ("README.md", "docs/flavors.md"):
        pytest.importorskip("cutlass", reason="the CuTe DSL example needs nvidia-cutlass-dsl (the test extra)")
    if page == "docs/native.md":  # its serving example shows the default (the suite pins the Python path)
        monkeypatch.setenv("OPSMITH_NATIVE", "auto")
    scope = _run_blocks(page, tmp_path, monkeypatch)
    CHECKS[page](scope, tmp_path)


def _readme(scope, tmp_path):
    assert str(scope["relu"].overload._schema) == "myns::relu(Tensor x) -> Tensor"
    assert str(scope["scale"].overload._schema) == "myns::scale(Tensor x, float alpha) -> Tensor"
    assert len(scope["scale"].record.configs) == 4 and scope["scale_ptx"].record.flavor == "ptx"
    assert scope["twice_op"].record.flavor == "cute" and len(scope["twice_op"].record.configs) == 3
    assert scope["case"].label == "myns::relu"
    if torch.cuda.is_available():
        x = torch.randn(1000, device="cuda")
        torch.testing.assert_close(scope["relu"](x), torch.relu(x))
        torch.testing.assert_close(scope["scale_ptx"](x, 2.5), 2.5 * x)
        assert scope["report"].ok, scope["report"].table()
        for dt in (torch.float32, torch.float16):
            x = torch.randn(5000, device="cuda", dtype=dt)
            torch.testing.assert_close(scope["scale"](x, 3.0), x * 3.0)
            torch.testing.assert_close(scope["twice_op"](x), x * 2)


def _declaration(scope, tmp_path):
    assert "Tensor a, Tensor b" in str(scope["matmul"].overload._schema)
    if torch.cuda.is_available():
        a, b = (
            torch.randn(64, 32, device="cuda", dtype=torch.float16),
            torch.randn(32, 48, device="cuda", dtype=torch.float16),
        )
        torch.testing.assert_close(scope["matmul"](a, b), a @ b, atol=1e-2, rtol=1e-2)


def _flavors(scope, tmp_path):
    assert scope["axpy"].record.compile_options == ("-use_fast_math",)
    assert scope["scale_ptx"].record.flavor == "ptx" and scope["twice_op"].record.flavor == "cute"
    if torch.cuda.is_available():
        x, y = (
            torch.randn(3000, device="cuda", dtype=torch.bfloat16),
            torch.randn(3000, device="cuda", dtype=torch.bfloat16),
        )
        torch.testing.assert_close(scope["axpy"](x, y, 2.0), 2.0 * x + y, atol=5e-2, rtol=2e-2)


def _autograd(scope, tmp_path):
    from opsmith.native.build import refusal

    assert scope["rmsnorm"].record.op_name == "myns::rmsnorm" and scope["rmsnorm"].differentiable
    # the program keeps the op native-servable; the Python function does not, and says why
    assert refusal(scope["rmsnorm"]) is None and scope["rmsnorm_py"].differentiable
    assert refusal(scope["rmsnorm_py"])[0] == "its backward is a Python function."
    if torch.cuda.is_available():
        from opsmith.ops.rmsnorm import reference_rms_norm

        x, w = scope["x"], scope["w"]
        want = torch.autograd.grad(reference_rms_norm(x, w, 1e-6).sum(), (x, w))
        torch.testing.assert_close(x.grad, want[0], atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(w.grad, want[1], atol=1e-3, rtol=1e-4)


def _multi_gpu(scope, tmp_path):
    assert scope["copy_rows"].sharding_plan.user is scope["rows_only"]


def _native(scope, tmp_path):
    assert scope["report"].ops == ["mylib::relu"] and (tmp_path / "libmyops.so").is_file()
    relu = scope["relu"]
    if torch.cuda.is_available():
        assert relu.serving == "native" and relu.serving_why.startswith("served-"), relu.serving_why
        x = torch.randn(1000, device="cuda")
        torch.testing.assert_close(relu(x), torch.relu(x), rtol=0, atol=0)
    else:
        assert (relu.serving, relu.serving_why) == ("python", "no CUDA GPU in this process (the native library "
                                                   "serves CUDA tensors)")  # fmt: skip


def _checking(scope, tmp_path):
    assert scope["case"].label == "checking::relu"


def _rmsnorm(scope, tmp_path):
    assert scope["norm"].impl == "triton"
    if torch.cuda.is_available():
        assert scope["hf"].impl == "cuda"
        assert scope["y"].dtype == torch.bfloat16 and scope["z"].shape == (8, 4096)


def _without_a_gpu(scope, tmp_path):
    """The page's claims: the CPU call served by the reference, one graph, the op kept by export."""
    assert scope["scale_rows"].record.op_name == "nogpu::scale_rows" and len(scope["graphs"]) == 1
    assert any("nogpu.scale_rows" in str(n.target) for n in scope["graphs"][0].graph.nodes)
    assert any("scale_rows" in str(n.target) for n in scope["ep"].graph.nodes)


def _from_torch_library(scope, tmp_path):
    assert scope["scale_rows"].schema == "fromlib::scale_rows(Tensor x, Tensor w) -> Tensor"
    assert hasattr(torch.ops.byhand, "scale_rows") and hasattr(torch.ops.fromlib, "scale_rows")


CHECKS = {"README.md": _readme, "docs/declaration.md": _declaration, "docs/flavors.md": _flavors,
          "docs/autograd.md": _autograd, "docs/multi-gpu.md": _multi_gpu, "docs/native.md": _native,
          "docs/checking.md": _checking, "docs/rmsnorm.md": _rmsnorm,
          "docs/without-a-gpu.md": _without_a_gpu, "docs/from-torch-library.md": _from_torch_library}  # fmt: skip


def _prose(page: Path) -> str:
    """The page without code blocks and code spans, where brackets are code, not links."""
    return re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", page.read_text(), flags=re.S))


def _pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted(DOCS.rglob("*.md"))]


def test_every_link_resolves():
    bad = []
    for page in _pages():
        for target in LINK.findall(_prose(page)):
            if "://" in target:
                continue
            if not (page.parent / target).resolve().exists():
                bad.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not bad, "\n".join(bad)


def test_every_file_under_docs_is_reachable_from_the_readme():
    """The README links the pages, the pages link each other and the measurements index links every
    measurement: a file nothing reaches is either stale or missing from an index."""
    seen, todo = set(), [ROOT / "README.md"]
    while todo:
        page = todo.pop()
        for target in LINK.findall(_prose(page)):
            path = (page.parent / target).resolve()
            if "://" not in target and path.is_file() and path not in seen:
                seen.add(path)
                if path.suffix == ".md":
                    todo.append(path)
    orphans = [str(p.relative_to(ROOT)) for p in DOCS.rglob("*") if p.is_file() and p.resolve() not in seen]
    assert not orphans, f"unreferenced under docs/: {orphans}"


def test_readme_is_a_front_page():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250


def test_environment_page_lists_every_variable():
    from opsmith import env

    knobs = {v.name for v in vars(env).values() if isinstance(v, env.Knob)}
    listed = set(re.findall(r"^\| `(OPSMITH_\w+)`", (DOCS / "environment.md").read_text(), re.M))
    assert listed == knobs, f"missing: {sorted(knobs - listed)}; not variables: {sorted(listed - knobs)}"


def test_architecture_page_names_every_module():
    text = (DOCS / "architecture.md").read_text()
    missing = [str(p.relative_to(ROOT / "opsmith")) for p in (ROOT / "opsmith").rglob("*.py")
               if str(p.relative_to(ROOT / "opsmith")) not in text and f"`{p.name}`" not in text]  # fmt: skip
    assert not missing, f"modules docs/architecture.md does not place: {missing}"


# Paths the pages, the changelog and pyproject name in code spans: each must exist in the repository.
_PATH = re.compile(r"`((?:docs|tests|examples|benchmarks|scripts|opsmith)/[\w./-]+)`")


def test_every_path_the_pages_name_exists():
    texts = {str(p.relative_to(ROOT)): p.read_text() for p in [*_pages(), ROOT / "pyproject.toml"]}
    dead = [f"{page}: {path}" for page, text in texts.items() for path in _PATH.findall(text)
            if not (ROOT / path.rstrip(".")).exists() and not any(c in path for c in "*<>")]  # fmt: skip
    assert not dead, "\n".join(dead)


def test_the_cli_page_names_every_command_and_option():
    """docs/cli.md against the parser itself: a command or option added without its row fails here."""
    from opsmith.cli import parser

    page = (DOCS / "cli.md").read_text()
    sub = next(a for a in parser()._actions if a.dest == "command")
    missing = []
    for name, p in sub.choices.items():
        if f"## `opsmith {name}" not in page:
            missing.append(name)
        missing += [f"{name} {opt}" for a in p._actions for opt in a.option_strings
                    if opt not in ("-h", "--help") and f"`{opt}" not in page]  # fmt: skip
    assert not missing, missing
