"""``opsmith check --sanitize``: the op's eager GPU checks under NVIDIA compute-sanitizer, one tool at a time.

Each tool runs a child ``python -m opsmith check TARGET --only numerics`` (every fixed sample, zero-size and
non-contiguous ones included, and a few hypothesis draws, all small; the stream and graph checks are left
out because the tools serialize launches) with PyTorch's caching allocator off (``PYTORCH_NO_CUDA_MEMORY_CACHING=1``),
so every tensor is its own allocation and an out-of-bounds access lands outside it where memcheck sees it.
The count is the tool's ``ERROR SUMMARY``; the detail its first reported error.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import env

__all__ = ["TOOLS", "SanitizeReport", "find_compute_sanitizer", "sanitize"]

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
# memcheck, initcheck and synccheck end with "ERROR SUMMARY: N errors"; racecheck with "RACECHECK SUMMARY: H
# hazards displayed (N errors, W warnings)".
_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) error|RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) error")


def find_compute_sanitizer() -> str | None:
    """$OPSMITH_COMPUTE_SANITIZER, then PATH, then $CUDA_HOME/bin and /usr/local/cuda/bin."""
    explicit = env.COMPUTE_SANITIZER.get()
    if explicit:
        return explicit
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and (Path(root) / "bin" / "compute-sanitizer").exists():
            return str(Path(root) / "bin" / "compute-sanitizer")
    return None


@dataclass
class SanitizeReport:
    target: str
    rows: list[tuple[str, int | None, str]] = field(default_factory=list)  # (tool, errors or None, detail)

    @property
    def ok(self) -> bool:
        return bool(self.rows) and all(n == 0 for _, n, _ in self.rows)

    def counts(self) -> dict[str, int | None]:
        return {tool: n for tool, n, _ in self.rows}

    def table(self) -> str:
        lines = [f"opsmith check --sanitize: {self.target}", "tool       errors  detail"]
        lines += [f"{t.ljust(9)}  {('?' if n is None else str(n)).ljust(6)}  {d}" for t, n, d in self.rows]
        return "\n".join(lines)


def _first_error(out: str) -> str:
    for line in out.splitlines():
        s = line.removeprefix("========= ").strip()
        if s.startswith(("Invalid", "Error", "Uninitialized", "Race", "Barrier", "Warning", "Program hit")):
            return s[:160]
    return "see the tool's output"


def sanitize(target: str, tools: list[str] | tuple[str, ...] = TOOLS, examples: int = 3,
             timeout: float = 900.0) -> SanitizeReport:  # fmt: skip
    """Run ``target``'s eager GPU checks under each tool; a child that fails its checks or the tool itself is
    reported with errors=None and the reason."""
    report = SanitizeReport(target)
    unknown = [t for t in tools if t not in TOOLS]
    if unknown:
        raise ValueError(f"sanitize: unknown tools {unknown}. Fix: choose from {list(TOOLS)}.")
    exe = find_compute_sanitizer()
    if exe is None:
        report.rows = [(t, None, "compute-sanitizer not found: install the CUDA toolkit or set "
                        "OPSMITH_COMPUTE_SANITIZER") for t in tools]  # fmt: skip
        return report
    child_env = dict(os.environ, PYTORCH_NO_CUDA_MEMORY_CACHING="1")
    child_env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), child_env.get("PYTHONPATH")]))
    for tool in tools:
        # API errors off: PyTorch and the CUDA bindings probe for optional driver entry points, and each
        # failed probe would count as an error of the op.
        cmd = [exe, "--tool", tool, "--print-limit", "20", "--report-api-errors", "no", sys.executable, "-m", "opsmith", "check", target,
               "--device", "cuda", "--only", "numerics", "--examples", str(examples)]  # fmt: skip
        t0 = time.perf_counter()
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, env=child_env, timeout=timeout)
        except subprocess.TimeoutExpired:
            report.rows.append((tool, None, f"timed out after {timeout:.0f} s"))
            continue
        out = r.stdout + r.stderr
        m = _SUMMARY.findall(out)
        secs = time.perf_counter() - t0
        if not m:
            report.rows.append((tool, None, f"no ERROR SUMMARY (exit {r.returncode}): {out.strip()[-300:]}"))
            continue
        n = int(next(g for g in m[-1] if g))
        checks_failed = re.search(r"\d+ passed, [1-9]\d* failed", out)
        ran = out.count("opsmith check: ")  # one table per case the child checked
        detail = _first_error(out) if n else f"clean ({ran} cases, {secs:.0f} s)"
        if checks_failed:
            rows = "; ".join(line.strip()[:200] for line in out.splitlines() if "  FAIL  " in line)
            detail = f"the checks failed under {tool}: {rows}; {detail}"
            n = n or None  # type: ignore[assignment]
        report.rows.append((tool, n, detail))
    return report
