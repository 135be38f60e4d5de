"""The two tiers of the suite. ``scripts/test`` runs the fast one: every module, without the tests marked
``slow`` (native builds and subprocesses that other tests already cover in a smaller form), hypothesis at its
fast profile. ``scripts/test --all`` runs everything, with ``OPSMITH_TEST_DEEP=1``: the deep hypothesis profile
and the longer runs a test asks ``examples`` for."""

from __future__ import annotations

import os

DEEP = os.environ.get("OPSMITH_TEST_DEEP", "") == "1"


def examples(fast: int, deep: int) -> int:
    """How many examples a hypothesis test with its own budget draws: ``fast`` by default, ``deep`` with --all."""
    return deep if DEEP else fast
