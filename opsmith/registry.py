"""The ops registered in this process, by op name (``"ns::name"``): what ``opsmith serving``, the compile-choice
table and re-registration read. The one registration path (``torchlib/registration.py``) fills it."""

from __future__ import annotations

from typing import Any

__all__ = ["registered_ops"]

_REGISTRY: dict[str, Any] = {}  # op name -> its ``Op``; written under registration's lock


def registered_ops() -> dict[str, Any]:
    """A copy of the registry: op name -> ``Op``."""
    return dict(_REGISTRY)
