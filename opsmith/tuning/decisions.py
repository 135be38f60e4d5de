"""Tuning decisions as one JSON file: tune once, ship the file, import it on every node.

``export_decisions`` writes every decision of the tuning cache (``$OPSMITH_CACHE_DIR/tuning``, each entry
read through the cache's checks); ``import_decisions`` writes them into this machine's cache. An entry keeps
its cache key, the hash of what makes it valid (the kernel, its configs, the GPU model, the torch, compiler
and opsmith versions), so an imported decision is used exactly where it was made for and is a miss
elsewhere; on use it is checked again against the op's configs. A decision only chooses among configs that
all compute the op, so a wrong entry can cost speed, never correctness.

    python -m opsmith tuning export decisions.json          # on the node that tuned
    python -m opsmith tuning import decisions.json          # on every node, before the job
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .. import env
from .._version import __version__
from ..cache import DiskCache

__all__ = ["ImportReport", "entries", "export_decisions", "import_decisions", "known_ops", "stored_for"]

FORMAT = "opsmith-tuning-decisions"
_KEY = re.compile(r"^[0-9a-f]{64}$")


def _cache() -> DiskCache:
    return DiskCache(env.cache_dir(), "tuning")


def _entries() -> list[tuple[str, dict]]:
    """(key, entry) of every verified decision in the tuning cache."""
    cache = _cache()
    out = []
    for f in sorted(cache.dir.glob("*.bin")) if cache.dir.is_dir() else []:
        key = f.stem
        hit = cache.get(key) if _KEY.match(key) else None
        if hit is None:
            continue
        try:
            entry = json.loads(hit[1])
        except ValueError:
            continue
        if isinstance(entry, dict):
            out.append((key, entry))
    return out


def _key_of(texts: object) -> tuple | None:
    """A tuning key back from its stored texts (``str`` of each value: a dtype, an int, None), or None."""
    if not isinstance(texts, list):
        return None
    out: list = []
    for t in texts:
        if t == "None":
            out.append(None)
        elif isinstance(t, str) and t.startswith("torch.") and isinstance(getattr(torch, t[6:], None), torch.dtype):
            out.append(getattr(torch, t[6:]))
        elif isinstance(t, str) and t.lstrip("-").isdigit():
            out.append(int(t))
        else:
            return None
    return tuple(out)


def entries() -> list[tuple[str, dict]]:
    """(key, entry) of every verified decision in the tuning cache: read once, then ``stored_for`` per op."""
    return _entries()


def stored_for(tuner: Any, device: int | None, cached: list[tuple[str, dict]] | None = None) -> dict[tuple, int]:
    """Every decision the tuning cache holds for ``tuner``'s op on ``device``, by key: only entries whose key
    this tuner would file them under (the same kernel, configs, device and torch) and whose winner is one of its
    configs. A served library is handed them when it loads (``native/learned.py``). ``cached``: ``entries()``,
    read once for several ops."""
    out = {}
    for file_key, entry in _entries() if cached is None else cached:
        if entry.get("op") != tuner.op_name:
            continue
        key = _key_of(entry.get("key"))
        if key is None or tuner.disk_key(key, device) != file_key:
            continue
        winner = tuner.winner_of(entry)
        if winner is not None:
            out[key] = winner
    return out


def known_ops() -> set[str]:
    """The ops the tuning cache holds decisions for."""
    return {str(e.get("op")) for _, e in _entries()}


def export_decisions(path: str | os.PathLike, ops: list[str] | None = None) -> int:
    """Write the cached decisions (of ``ops``, qualified names, or all) to ``path``; the number written."""
    entries = [{"key": key, "entry": entry} for key, entry in _entries() if ops is None or entry.get("op") in ops]
    doc = {"format": FORMAT, "version": 1, "opsmith": __version__, "entries": entries}
    Path(path).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return len(entries)


@dataclass(frozen=True)
class ImportReport:
    imported: int
    rejected: list[str]

    def summary(self) -> str:
        s = f"imported {self.imported} tuning decisions into {_cache().dir}"
        return s + (f"; rejected {len(self.rejected)}: {'; '.join(self.rejected[:5])}" if self.rejected else "")


def import_decisions(path: str | os.PathLike) -> ImportReport:
    """Write the decisions in ``path`` (from ``export_decisions``) into this machine's tuning cache."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise ValueError(
            f"{path}: not a decisions file ({e}). Fix: pass a file written by `opsmith tuning export`."
        ) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("entries"), list):
        raise ValueError(f"{path}: not a decisions file (no '{FORMAT}' header). Fix: pass a file written by "
                         "`opsmith tuning export`.")  # fmt: skip
    cache, done, rejected = _cache(), 0, []
    for k, item in enumerate(doc["entries"]):
        why = _invalid(item)
        if why:
            rejected.append(f"entry {k}: {why}")
            continue
        entry = item["entry"]
        if cache.put(item["key"], {"op": entry["op"], "kind": "tuning"}, json.dumps(entry).encode()):
            done += 1
        else:
            rejected.append(f"entry {k}: the cache directory cannot be written")
    return ImportReport(done, rejected)


def _invalid(item: object) -> str:
    if not isinstance(item, dict) or not isinstance(item.get("entry"), dict):
        return "not an entry"
    key, entry = item.get("key"), item["entry"]
    if not isinstance(key, str) or not _KEY.match(key):
        return f"key {key!r} is not a cache key"
    if not isinstance(entry.get("op"), str) or not isinstance(entry.get("winner"), int) or \
            not isinstance(entry.get("config"), dict):  # fmt: skip
        return "missing op, winner or config"
    return ""
