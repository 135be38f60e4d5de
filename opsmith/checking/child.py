"""Risky check rows run in a child process, so a crash is a FAIL row and not the end of ``opsmith check``.

Triton's interpreter runs a kernel's loads and stores as numpy reads and writes of the tensors' host memory: a
store without a mask past a row's end writes over the allocator's bookkeeping, and glibc aborts the whole
process ("malloc(): corrupted top size", signal 6) with no report at all. On CPU, where only the interpreter
runs kernels, each row runs in a forked child that sends its result back through a pipe; a child that dies
becomes a FAIL row naming the likely cause. (CUDA cannot be forked after initialization; there an
out-of-bounds access is a CUDA error the row reports, and ``opsmith check --sanitize`` locates it.)

Where the check knows how a fresh interpreter finds the case again (``opsmith check MODULE:NAME``), each such row
runs in a *spawned* child instead: a new Python that imports the module and runs that one row, sharing no thread
pool, CUDA context or allocator state with the parent (so it isolates rows on a machine with a GPU too). A case
built in ``__main__`` or a notebook cannot be found again; its rows fork.

A forked child never hangs the check: it runs torch's CPU ops on one thread (a child forked after the parent used
OpenMP's thread pool deadlocks in libgomp at its next parallel region: 12 minutes on a round-four kernel until it was
killed, and then blamed on the kernel), and a row still running after ``OPSMITH_CHECK_ROW_TIMEOUT`` seconds is
killed and reported as timed out, which is what it says.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from .. import env

__all__ = ["can_fork", "in_child", "spawned"]


def can_fork() -> bool:
    """Whether rows can run in a forked child here: a POSIX fork, and no CUDA: neither initialized in this
    process nor available (a child's torch.compile asks the GPU's properties, initializing CUDA, which a forked
    child cannot: "Cannot re-initialize CUDA in forked subprocess")."""
    import torch

    return (hasattr(os, "fork") and not torch.cuda.is_initialized() and not torch.cuda.is_available()
            and not _AUTOGRAD_FORK_BROKEN)  # fmt: skip


# Once autograd's engine has started its device threads in this process (a backward on a non-CPU device, meta
# included), autograd refuses to run in a forked child. torch says so only in the child: the first such row is
# run again here, and the rows after it run here too, unisolated.
_AUTOGRAD_REFUSES_FORK = "Unable to handle autograd's threading in combination with fork-based multiprocessing"
_AUTOGRAD_FORK_BROKEN = False


def in_child(run: Callable[[], tuple[str, str, int]]) -> tuple[str, str, int]:
    """``run()``'s (result, detail, warnings hidden), computed in a forked child; a child that dies gives a FAIL
    naming why."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run, send, and leave without running the parent's exit handlers
        os.close(read)
        import faulthandler

        faulthandler.disable()  # a crash is reported as the row, not as a traceback dump on the terminal
        import torch

        torch.set_num_threads(1)  # the parent's OpenMP pool does not survive a fork (see above)
        code = 0
        try:
            payload = json.dumps(list(run())).encode()
        except BaseException as e:  # run() reports failures as rows; anything else is still a row
            payload = json.dumps(["FAIL", f"{type(e).__name__}: {e}", 0]).encode()
            code = 1
        with os.fdopen(write, "wb") as f:
            f.write(payload)
        os._exit(code)
    os.close(write)
    limit = env.CHECK_ROW_TIMEOUT.get()
    data = _read_until(read, time.monotonic() + limit)
    if data is None:  # still running: killed, and the row says so
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return "FAIL", _timed_out(limit), 0
    _, status = os.waitpid(pid, 0)
    if data:
        result, detail, hidden = json.loads(data)
        if _AUTOGRAD_REFUSES_FORK in detail:
            global _AUTOGRAD_FORK_BROKEN
            _AUTOGRAD_FORK_BROKEN = True
            return run()
        return result, detail, hidden
    return "FAIL", _death(status), 0


def spawned(origin: tuple[str, int], row: str, device: Any, examples: int, backend: str) -> tuple[str, str, int]:
    """Row ``row`` of case ``origin`` (``("MODULE:NAME", k)``: the k-th case that target names) as (result, detail,
    warnings hidden), run by a spawned Python; one killed at the row timeout, or dying, is a FAIL saying so."""
    limit = env.CHECK_ROW_TIMEOUT.get()
    job = json.dumps({"target": origin[0], "index": origin[1], "row": row, "device": str(device),
                      "examples": examples, "backend": backend})  # fmt: skip
    # The child imports what this process can: its sys.path (a test or notebook may have extended it), then cwd's.
    path = os.pathsep.join([p for p in sys.path if p] + [os.environ.get("PYTHONPATH", "")])
    try:
        done = subprocess.run([sys.executable, "-m", "opsmith.checking.child", job], capture_output=True, text=True,
                              timeout=limit, env={**os.environ, "PYTHONPATH": path})  # fmt: skip
    except subprocess.TimeoutExpired:
        return "FAIL", _timed_out(limit), 0
    last = (done.stdout.strip().splitlines() or [""])[-1]
    if done.returncode == 0 and last.startswith("["):
        result, detail, hidden = json.loads(last)
        return result, detail, hidden
    if done.returncode > 0 and "Traceback" in done.stderr:  # it failed before the row ran: not the kernel's doing
        why = done.stderr.strip().splitlines()[-1]
        return "ERROR", f"the spawned process running this check could not run it: {why}", 0
    signalled = done.returncode < 0
    return "FAIL", _death(-done.returncode if signalled else done.returncode, signalled), 0


def _timed_out(limit: float) -> str:
    return (f"timed out: the row ran past {limit:g} s ({env.CHECK_ROW_TIMEOUT.name}) and was stopped. A kernel "
            "that loops forever under Triton's interpreter, or a case far too large for it, does this; run the op "
            "once by hand on a small input to see which.")  # fmt: skip


def _read_until(fd: int, deadline: float) -> bytes | None:
    """Everything the child writes to ``fd`` until it closes it, or None when ``deadline`` passes first."""
    chunks = []
    with os.fdopen(fd, "rb", buffering=0) as f:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([f], [], [], left)[0]:
                return None
            chunk = f.read(1 << 16)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)


def _death(status: int, signalled: bool | None = None) -> str:
    """Why a child died: from a forked child's wait status, or (``signalled`` given) a spawned child's signal
    number or exit status."""
    if signalled is None:
        signalled = os.WIFSIGNALED(status)
        status = os.WTERMSIG(status) if signalled else os.WEXITSTATUS(status)
    if signalled:
        name = signal.Signals(status).name if status in signal.Signals._value2member_map_ else str(status)
        how = f"was killed by signal {status} ({name})"
    else:
        how = f"exited with status {status} and no report"
    return (f"the process running this check {how} while the kernel ran: most likely the kernel reads or writes "
            "past a tensor (a tl.load or tl.store without a mask, an index past the declared shape), which "
            "corrupts memory under Triton's interpreter. Check the masks of the kernel's loads and stores, and run "
            "`opsmith check --sanitize` on a GPU to locate the access.")  # fmt: skip


def _main(job_text: str) -> None:
    """A spawned child: the case found again by its target, one row run in this process, printed as JSON."""
    job = json.loads(job_text)
    from .case import load_cases
    from .harness import check

    case = load_cases(job["target"])[job["index"]]
    report = check(case, device=job["device"], examples=job["examples"], compile_backend=job["backend"],
                   only=[job["row"]], isolate=False)  # fmt: skip
    ((_, result, detail),) = report.rows
    print(json.dumps([result, detail, report.hidden_warnings]), flush=True)


if __name__ == "__main__":
    if "" not in sys.path:  # the target's module is found where the parent found it: the working directory
        sys.path.insert(0, "")
    _main(sys.argv[1])
