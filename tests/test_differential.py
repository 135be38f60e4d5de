"""The Python path and the native library agree on generated declarations and calls (``differential.py``):
a bounded, derandomized slice: one batch of 12 declarations in the fast tier, three with ``scripts/test --all``;
``python scripts/differential.py`` runs longer."""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

from differential import compare, run_batch, summary
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from tiers import examples

_BATCH = itertools.count()


# No shrinking: each example builds a library (~30 s); a failure prints every disagreeing call in full.
@settings(max_examples=examples(1, 3), deadline=None, derandomize=True, database=None, phases=[Phase.generate],
          suppress_health_check=list(HealthCheck))  # fmt: skip
@given(data=st.data())
def test_the_python_path_and_the_native_library_agree(data):
    ns = f"dfci{next(_BATCH)}"
    with tempfile.TemporaryDirectory() as tmp:
        gens, py, nat = run_batch(data, ns, 12, Path(tmp))
    bad = compare(gens, py, nat)
    assert not bad, f"{len(bad)} disagreements of {len(py)} calls:\n" + "\n\n".join(bad[:8])
    s = summary(gens, py)
    # A third of the declarations are refused at registration (on purpose: mixed-sign axes, ranks too small);
    # what registers must still be called and launched.
    # init= values an output's dtype cannot hold and shared-memory sizes past the limits are refused, by design:
    # a batch launches fewer kernels than before those draws, but never none
    assert s["ops"] >= 6 and s["accepted"] >= 6 and s["launches"] >= 3, s
