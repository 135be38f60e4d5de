#!/usr/bin/env python3
"""Figures from measurements, never retyped: each figure a page quotes is computed from a file under
docs/measurements/ (``docs/measurements/figures.toml`` names the file, the expression and the format) and
written between ``<!--fig:NAME-->`` and ``<!--/fig-->`` in README.md, docs/ and CHANGELOG.md.

    python scripts/figures.py            # rewrite every marked figure from its file
    python scripts/figures.py --check    # exit 1, naming each, when a page's figure differs from its file
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MEASURED = ROOT / "docs" / "measurements"
MARK = re.compile(r"<!--fig:([\w.-]+)-->(.*?)<!--/fig-->", re.S)


def host_ratios(d: dict, row: str, path: str) -> list[float]:
    """bench_host.py's JSON: per fresh process, ``path``'s median host time over aten's for ``row``."""
    return [r["host"][row][path]["median_us"] / r["host"][row]["aten"]["median_us"] for r in d["runs"]]


def served_s(why: str) -> float:
    """bench_host.py's serving reason of an op: the seconds its library took ("... (from the cache in 0.5 s)")."""
    return float(why.rsplit(" in ", 1)[1].removesuffix(" s)"))


def host_us(d: dict, row: str, path: str) -> list[float]:
    """bench_host.py's JSON: per fresh process, ``path``'s median host time (us) for ``row``."""
    return [r["host"][row][path]["median_us"] for r in d["runs"]]


def host_calls(d: dict, row: str) -> list[int]:
    """bench_host.py's JSON: the default path's timed calls, [the fewest served natively in a process, the most
    that went to the Python path in one]."""
    counts = [r["host"][row]["default"]["serving"] for r in d["runs"]]
    return [min(c["native"] for c in counts), max(sum(v for k, v in c.items() if k != "native") for c in counts)]


def backward_us(d: dict, run: int, path: str) -> float:
    """bench_host.py's JSON: the RMSNorm forward+backward at (8, 4096, 4096), one path's median us a step."""
    return d["runs"][run]["backward_8x4096x4096"][path]["median_us"]


def sweep(d: dict, shape: list[int], impl: str, which: str) -> float:
    """bench_rmsnorm.py's JSON: one implementation's ``which`` ("fwd_frac_copy", "bwd_ms", ...) at ``shape`` (the
    sweep's rows, or the main shape)."""
    rows = [d["main"], *d["sweep"]]
    return next(r for r in rows if r["shape"] == shape)["impls"][impl][which]


def variant(d: dict, name: str) -> dict:
    """bench_llama.py's JSON: the result of one variant."""
    return next(r for r in d["results"] if r["variant"] == name)


def group(d: dict, name: str, kind: str) -> float:
    """bench_llama.py's JSON: one variant's step profile, ms a step in one kernel group (0 where it has none)."""
    return variant(d, name)["profile"]["groups"].get(kind, 0.0)


def fsdp(d: dict, run: int, name: str) -> dict:
    """bench_llama_fsdp.py's JSON (several runs): one variant's result in run ``run`` (0-based)."""
    return variant(d["runs"][run], name)


def among(parts: list[dict], name: str) -> dict:
    """One variant's result in a bench_llama.py run split over several calls (a list of its JSONs)."""
    return next(r for part in parts for r in part["results"] if r["variant"] == name)


def loss_deviation(parts: list[dict], name: str, base: str = "hf") -> float:
    """bench_llama.py's loss check: the largest relative difference of a step's loss from ``base``'s."""
    r, b = among(parts, name), among(parts, base)
    return max(abs(x - y) / abs(y) for x, y in zip(r["losses"], b["losses"], strict=True))


def explained(parts: list[dict], name: str) -> dict:
    """Dynamo's graphs and breaks of a variant's family (an eager row shares its compiled row's code)."""
    family = name.removesuffix("-compile")
    return among(parts, family + "-compile")["explain"]


def step_part(profile: dict, part: str) -> float:
    """A step profile's ms (llama_step_profile.py's groups and step time): a kernel group, "else" (every group but
    GEMMs, attention and the optimizer), "wait" (the step less every kernel) or "step"."""
    groups = profile["groups"]
    if part == "step":
        return profile["step_ms"]
    if part == "wait":
        return profile["step_ms"] - sum(groups.values())
    if part == "else":
        return sum(v for k, v in groups.items() if k not in ("gemm", "attention", "optimizer"))
    return groups.get(part, 0.0)


HELPERS = {"median": statistics.median, "lo": min, "hi": max, "host_ratios": host_ratios, "variant": variant,
           "group": group, "fsdp": fsdp, "among": among, "loss_deviation": loss_deviation, "explained": explained,
           "step_part": step_part, "host_us": host_us, "host_calls": host_calls, "served_s": served_s,
           "backward_us": backward_us, "sweep": sweep,
           "sum": sum, "max": max, "min": min, "abs": abs, "len": len, "next": next}  # fmt: skip


def pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]


def figures() -> dict[str, str]:
    """Every figure's text, computed from its file now. Raises naming the figure when its file is missing."""
    table = tomllib.loads((MEASURED / "figures.toml").read_text())
    out = {}
    for name, f in table.items():
        path = MEASURED / f["file"]
        if not path.is_file():
            raise FileNotFoundError(f"figure {name!r} cites docs/measurements/{f['file']}, which is not there")
        scope = {"__builtins__": {}, **HELPERS, "d": json.loads(path.read_text())}
        value = eval(f["expr"], scope)  # the expression is ours, in figures.toml
        if isinstance(value, list):
            out[name] = f["format"].format(*value, lo=min(value), hi=max(value))
        else:
            out[name] = f["format"].format(value)
    return out


# What looks like a measured figure: a number with a unit or a ratio's "x".
_FIGURE = re.compile(r"(?<![\w.])\d(?:[\d,]*\d)?(?:\.\d+)?\s?(?:x|%|ms|us|GB/s|TB/s|tokens/s|GiB|MiB|GB|MB)(?![\w/])")
_CODE = re.compile(r"^```.*?^```", re.S | re.M)
# A figure right after these words is a target or a threshold, not a measurement.
_BOUND = re.compile(r"(?:>=|<|target|tolerance is|more than|below|shorter than|short of the)\s*$")
# Typed on purpose, and why: tensor sizes that follow from a shape, a test's parameter, a library's default.
NOT_MEASURED = {
    ("docs/llama.md", "92 MB"): "SwiGLU's (4, 2048, 5632) bf16 input",
    ("docs/llama.md", "131 MB"): "the LM head's (32000, 2048) bf16 weight gradient",
    ("docs/rmsnorm.md", "256 MiB"): "an (8, 4096, 4096) bf16 output",
    ("docs/rmsnorm.md", "0.805 GB"): "x, dy and dx of (2048, 65536) bf16",
    ("docs/rmsnorm.md", "537 MB"): "a (2048, 65536) float32 partial dweight",
    ("docs/rmsnorm.md", "69 MB"): "264 float32 rows of 65,536",
    ("docs/measurements/README.md", "92 MB"): "the example of a size this index gives",
    ("docs/checking.md", "50 ms"): "the stream probe's sleep, a parameter",
    ("docs/jax.md", "75%"): "JAX's default memory fraction",
}


def unmarked() -> list[str]:
    """Each figure a page types outside a marker and a code block that is no quote ("..."), no target or
    threshold and not in NOT_MEASURED, as 'page: figure: line'."""
    found = []
    for page in pages():
        name = str(page.relative_to(ROOT))
        text = _CODE.sub("", MARK.sub("", page.read_text()))
        for m in _FIGURE.finditer(text):
            line_start = text.rfind("\n", 0, m.start()) + 1
            start = max(text.rfind("\n\n", 0, m.start()), text.rfind("\n- ", 0, m.start()), 0)
            paragraph = text[start : m.start()]
            after = text[m.end() : m.end() + 8]
            if m.group().endswith("x") and re.match(r"\s?(?:\d|NVIDIA|H[12]00)", after):
                continue  # a shape (8 x 4,096) or a count of devices (2 x H200)
            if re.match(r"\s?HBM3", after) or _BOUND.search(paragraph) or paragraph.count('"') % 2:
                continue  # a device's name, a target or threshold, a quote of a corrected figure
            if (name, m.group()) not in NOT_MEASURED:
                found.append(f"{name}: {m.group()}: {text[line_start : text.find(chr(10), m.end())].strip()}")
    return found


def differences(values: dict[str, str]) -> list[str]:
    """Each marked figure that differs from its file, or names no figure, as 'page: name: has X, file gives Y'."""
    bad = []
    for page in pages():
        for name, text in MARK.findall(page.read_text()):
            want = values.get(name)
            if want is None:
                bad.append(f"{page.relative_to(ROOT)}: {name}: no such figure in docs/measurements/figures.toml")
            elif text != want:
                bad.append(f"{page.relative_to(ROOT)}: {name}: the page has {text!r}, its file gives {want!r}")
    return bad


def write(values: dict[str, str]) -> int:
    changed = 0
    for page in pages():
        text = page.read_text()
        new = MARK.sub(lambda m: f"<!--fig:{m[1]}-->{values.get(m[1], m[2])}<!--/fig-->", text)
        if new != text:
            page.write_text(new)
            changed += 1
    return changed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="report differing figures instead of writing them")
    args = ap.parse_args()
    values = figures()
    if args.check:
        bad = differences(values) + [f"not marked: {u}" for u in unmarked()]
        print("\n".join(bad) or f"{len(values)} figures, every marked one as its file gives it, none unmarked")
        return 1 if bad else 0
    print(f"rewrote figures in {write(values)} page(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
