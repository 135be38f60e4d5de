"""Risky check rows run in a child process, so a crash is a FAIL row and not the end of ``opsmith check``.

Triton's interpreter runs a kernel's loads and stores as numpy reads and writes of the tensors' host memory: a
store without a mask past a row's end writes over the allocator's bookkeeping, and glibc aborts the whole
process ("malloc(): corrupted top size", signal 6) with no report at all. On CPU, where only the interpreter
runs kernels, each row runs in a forked child that sends its result back through a pipe; a child that dies
becomes a FAIL row naming the likely cause. (CUDA cannot be forked after initialization; there an
out-of-bounds access is a CUDA error the row reports, and ``opsmith check --sanitize`` locates it.)

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
import time
from collections.abc import Callable

from .. import env

__all__ = ["can_fork", "in_child"]


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
        why = (f"timed out: the row ran past {limit:g} s ({env.CHECK_ROW_TIMEOUT.name}) and was stopped. A kernel "
               "that loops forever under Triton's interpreter, or a case far too large for it, does this; run the op "
               "once by hand on a small input to see which.")  # fmt: skip
        return "FAIL", why, 0
    _, status = os.waitpid(pid, 0)
    if data:
        result, detail, hidden = json.loads(data)
        if _AUTOGRAD_REFUSES_FORK in detail:
            global _AUTOGRAD_FORK_BROKEN
            _AUTOGRAD_FORK_BROKEN = True
            return run()
        return result, detail, hidden
    return "FAIL", _death(status), 0


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


def _death(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        how = f"was killed by signal {sig} ({name})"
    else:
        how = f"exited with status {os.WEXITSTATUS(status)} and no report"
    return (f"the process running this check {how} while the kernel ran: most likely the kernel reads or writes "
            "past a tensor (a tl.load or tl.store without a mask, an index past the declared shape), which "
            "corrupts memory under Triton's interpreter. Check the masks of the kernel's loads and stores, and run "
            "`opsmith check --sanitize` on a GPU to locate the access.")  # fmt: skip
