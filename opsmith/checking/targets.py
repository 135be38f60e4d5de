"""``MODULE:NAME``: how the command line (and a spawned ``opsmith check`` row) names objects of the user's code.

The module is imported with the working directory on the path; NAME is the object, or a function of no arguments
returning it. What the object must be is the caller's: ``checking.case.load_cases`` wants CheckCases,
``cli.load_ops`` ops.
"""

from __future__ import annotations

import importlib
import sys

__all__ = ["TargetError", "as_list", "load"]


class TargetError(Exception):
    """MODULE:NAME does not name what the command needs; the message says the fix (exit status 2)."""


def load(target: str, what: str, example: str, leaf: type | tuple[type, ...]) -> object:
    """The object ``MODULE:NAME`` names (the module is imported from the current directory too), called when it
    is a function of no arguments. ``leaf``: the type that is not such a function (an op is callable)."""
    module, sep, name = target.partition(":")
    if not sep or not module or not name:
        raise TargetError(f"'{target}' is not MODULE:NAME. Fix: name {what}, e.g. {example}.")
    if "" not in sys.path:
        sys.path.insert(0, "")
    from ..errors import OpsmithError

    try:
        obj = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise TargetError(
            f"cannot load '{target}': {e}. Fix: name an importable module (run from the directory "
            f"that holds it, or put it on PYTHONPATH) and a name it defines, e.g. {example}."
        ) from None
    except OpsmithError as e:  # a mistake in the declarations the module registers: opsmith's own message
        raise TargetError(f"importing '{module}' raised {type(e).__name__}: {e}") from None
    if callable(obj) and not isinstance(obj, leaf):
        try:
            obj = obj()
        except TypeError as e:
            raise TargetError(f"'{target}' is a function that needs arguments ({e}). Fix: point at {what}, a "
                              "list of them or a function of no arguments returning them.") from None  # fmt: skip
        except OpsmithError as e:
            raise TargetError(f"calling '{target}' raised {type(e).__name__}: {e}") from None
    return obj


def as_list(obj: object) -> list:
    return list(obj) if isinstance(obj, list | tuple) else [obj]
