"""Native builds never fail silently (issue 49, item 3): every op of the examples catalog (basic, tuned, shapes,
optional, rows, published, attention) and every published-style op the tests declare (``catalog_check_cases``:
the styled kernels, Liger-Kernel's own, the Llama recipe's) that the native library can hold builds into one
dry-run library, together with the ops their backwards call. An op the library cannot hold is named with its
reason, and the reasons are the expected ones (a Python eager_fn, a Custom geometry), not a build error."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton", reason="the catalog's Triton ops (the test extra installs Triton)")
pytest.importorskip("liger_kernel", reason="the catalog's Liger-Kernel ops (the test extra installs liger-kernel)")

from catalog_check_cases import catalog_cases

from examples.catalog.basic import register_all
from examples.catalog.optional import register_optional
from examples.catalog.shapes import register_shapes
from examples.catalog.tuned import register_tuned
from opsmith import native
from opsmith.native.build import build_source, closure, refusal
from opsmith.torchlib.eager import make_dry_run

NS = "t_build_catalog"
#: Why an op of the catalog may stay on the Python path: its launch or allocation is Python by declaration.
EXPECTED = ("its implementation is a Python eager_fn.", "its Custom geometry is a Python function.",
            "its outputs are allocated by a Python meta_fn.")  # fmt: skip


def _called(cases: list) -> None:
    """Each case's op called once through its dry run on CPU tensors (its first shape and dtype): ops that compile
    sizes in hold the kernel a call needs, as a build after real calls would."""
    for c in cases:
        if refusal(c.op) is not None:  # launched by Python: nothing to build
            continue
        dry, _ = make_dry_run(c.op)
        dtype = (c.dtypes or (torch.float32,))[0]
        dry(*c.inputs(c.shapes[0], dtype, "cpu"))


def _call_others(ops: dict) -> None:
    """Ops no case calls: the optional example's cross-entropy rows (weight and z_loss given and absent) and
    DyT's backward, through their dry runs."""
    ce, _ = make_dry_run(ops[f"{NS}_ex::ce_rows"])
    x, y = torch.randn(6, 100), torch.randint(0, 100, (6,))
    ce(x, y, None, None, 6.0, -100)
    ce(x, y, torch.rand(100), torch.zeros(6), 6.0, -100)
    dyt, _ = make_dry_run(ops[f"{NS}_pub::dyt_backward"])
    dyt(torch.randn(4, 256), torch.randn(4, 256), torch.randn(256), 0.7)


def _ops() -> list:
    ex, pub = f"{NS}_ex", f"{NS}_pub"  # the examples and the tests name some ops alike
    cases = [*register_all(ex).values(), *register_tuned(ex).values(), *register_shapes(ex).values(),
             *catalog_cases(pub).values()]  # fmt: skip
    _called(cases)
    ops = [c.op for c in cases]
    ops += [op for op in register_optional(ex).values() if hasattr(op, "record")]
    by_name = {op.record.op_name: op for op in closure(ops)}
    _call_others(by_name)
    return list(by_name.values())


@pytest.fixture(scope="module")
def held() -> list:
    """The ops the library can hold; an op it cannot is refused for an expected reason."""
    held, refused = [], {}
    for op in _ops():
        why = refusal(op)
        if why is None:
            held.append(op)
        else:
            refused[op.record.op_name] = why[0]
    assert all(why in EXPECTED for why in refused.values()), refused
    assert len(held) >= 40, [op.record.op_name for op in held]
    return held


def test_every_held_op_generates_into_one_library_source(held):
    """The source of the library below, without its compile (the fast tier): every op in, nothing skipped."""
    text, _, natives, skipped = build_source(held, ["sm_90"], dtypes=native.DEFAULT_DTYPES)
    assert skipped == [], skipped
    assert {n.record.op_name for n in natives} == {op.record.op_name for op in held}
    assert all(f'"{op.record.op_name.split("::")[1]}' in text for op in held)


@pytest.mark.slow
def test_every_catalog_and_published_style_op_builds_into_one_native_library(held, tmp_path):
    report = native.build(held, tmp_path / "catalog.so", dry_run=True)
    assert sorted(report.ops) == sorted(op.record.op_name for op in held)
    assert report.skipped == [], report.skipped
