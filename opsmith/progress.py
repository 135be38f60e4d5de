"""What long work says while it runs: one logging switch and a progress display.

``OPSMITH_LOG=info|debug`` sends the ``opsmith`` loggers to stderr (through rich's handler): compiles with
their times, each tuning decision with the times behind it, native build steps. Unset, only warnings show
(Python's default). ``step(...)`` wraps work that takes seconds (tuning a key over many configs: ~0.1-10 s;
a native build: 20-30 s of C++ compile): on a terminal a spinner names it while it runs
(``OPSMITH_PROGRESS=0`` turns that off), and at INFO a line reports its time when it ends. Nothing is
configured at import: the first ``step`` or ``configure_logging`` call reads the switches.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from . import env

__all__ = ["configure_logging", "progress_bar", "step"]

log = logging.getLogger("opsmith")
_STATE = {"configured": False}
_LEVELS = {"": None, "warning": logging.WARNING, "info": logging.INFO, "debug": logging.DEBUG}


def configure_logging() -> None:
    """Apply ``OPSMITH_LOG`` once per process (a handler of opsmith's own; the root logger is left alone)."""
    if _STATE["configured"]:
        return
    _STATE["configured"] = True
    raw = env.LOG.get().strip().lower()
    if raw not in _LEVELS:
        raise ValueError(f"OPSMITH_LOG={raw!r} is not a level. Fix: set it to warning, info or debug (or unset it).")
    level = _LEVELS[raw]
    if level is None:
        return
    from rich.console import Console
    from rich.logging import RichHandler

    handler = RichHandler(console=Console(stderr=True), show_path=False, log_time_format="%H:%M:%S")
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    log.addHandler(handler)
    log.setLevel(level)
    log.propagate = False  # one line per message, not a second one through the root logger


@contextmanager
def step(description: str) -> Iterator[None]:
    """Show ``description`` while the block runs (a spinner on a terminal) and log its time at INFO."""
    configure_logging()
    t0 = time.perf_counter()
    status = None
    if env.PROGRESS.get() and sys.stderr.isatty():
        from rich.console import Console

        status = Console(stderr=True).status(description)
        status.start()
    try:
        yield
    finally:
        if status is not None:
            status.stop()
        log.info("%s: %.2f s", description, time.perf_counter() - t0)


def progress_bar(total: int, label: str):
    """(a started rich Progress, its task) counting ``total`` items on a terminal; None elsewhere or with
    ``OPSMITH_PROGRESS=0`` (then the log line that ends the work is what shows)."""
    configure_logging()
    if not env.PROGRESS.get() or not sys.stderr.isatty():
        return None
    from rich.progress import Progress

    p = Progress(transient=True)
    p.start()
    return p, p.add_task(label, total=total)
