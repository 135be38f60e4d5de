"""Saved activations an opsmith op overwrites in a backward graph, overwritten in place under torch.compile.

Eagerly, a backward kernel that writes its gradients over the activations it was given (Liger's SwiGLU backward
writes over the saved gate and up projections) costs no memory and no copy. Traced, AOTAutograd functionalizes
the write, and Inductor's reinplacing (``torch/_inductor/fx_passes/reinplace.py``) keeps a mutated *graph input*
in place only when the graph copies the result back into it: a saved activation is a backward graph's input
whose mutation nobody observes, so Inductor clones it first. Measured on an H100 in the Llama step of
docs/llama.md: 32 clones of 63 us, 2.0 ms of a 100 ms step.

AOTAutograd already knows which saved activations nothing else uses: its *donated buffers*
(``bw_donated_idxs``: saved for the backward only, aliasing no input or output, and the backward refused with
``retain_graph=True``). This pass, run on each backward graph before Inductor reinplaces, declares the write of an
op into a donated buffer as an input mutation (a ``copy_`` of the op's result back into it) where no later node
reads the buffer. Inductor's own reinplacing then runs the op in place and drops the copy; where it cannot,
nothing was added. The writes it takes are declared ones: a custom op's schema (``Tensor(a!)``: opsmith's
``mutates=True``, or ``torch.library.custom_op(mutates_args=...)``), and for a Triton kernel an opsmith op hands
to Inductor, its declaration's (not Inductor's analysis, which may over-report). AOTAutograd's partitioner moves
a forward write only the backward reads into the backward graph (the Llama recipe's last chunk), so the pass
serves forward-side writes too.

Installed once, when the first such op registers (``install``): the pass goes into
``torch._inductor.config.post_grad_custom_post_pass``, after a pass the user set there (both run).
``OPSMITH_REINPLACE_SAVED=0`` switches it off (read at each compile; set before the first registration, Inductor's
config is left alone).
"""

from __future__ import annotations

import logging
import operator
from typing import Any

import torch

log = logging.getLogger("opsmith.compile")

__all__ = ["DonatedSavedTensors", "install", "note_kernel", "reinplaced"]

#: For the Triton kernels ops that write an input hand to Inductor (keyed by the ``@triton.jit`` function under
#: any autotune or heuristics wrapper), the parameters the declaration says they write. Registration adds to it;
#: the pass reads it. (A custom op's writes are in its schema.)
_KERNELS: dict[int, frozenset[str]] = {}

#: What the pass did, per backward graph it changed: the names of the buffers now overwritten in place (tests and
#: ``opsmith serving`` read it; it grows by one entry per compiled backward graph, not per call).
reinplaced: list[list[str]] = []


def _jit_function(kernel: Any) -> Any:
    from triton.runtime.jit import JITFunction

    while not isinstance(kernel, JITFunction) and hasattr(kernel, "fn"):  # @triton.autotune / heuristics wrappers
        kernel = kernel.fn
    return kernel


def note_kernel(kernel: Any, written: list[str]) -> None:
    """Record a Triton kernel an op hands to Inductor (``wrap_triton``) and the parameters its declaration says it
    writes (Inductor's own analysis of the kernel may say more, or everything where it fails)."""
    key = id(_jit_function(kernel))
    _KERNELS[key] = _KERNELS.get(key, frozenset()) | frozenset(written)


def _is_tangent(node: torch.fx.Node) -> bool:
    # AOTAutograd's partitioner names the backward graph's incoming gradients so (partitioners.py's _is_tangent).
    return node.op == "placeholder" and str(node.target).startswith("tangents")


def _donated(graph: torch.fx.Graph) -> list[torch.fx.Node]:
    """The placeholders of ``graph`` AOTAutograd donated, or [] when ``graph`` is not a backward graph."""
    from torch._inductor.utils import get_donated_idxs

    placeholders = graph.find_nodes(op="placeholder")
    if not any(_is_tangent(p) for p in placeholders):  # a forward or inference graph: donation is the backward's
        return []
    idxs = get_donated_idxs() or []
    return [placeholders[i] for i in idxs if i < len(placeholders) and not _is_tangent(placeholders[i])]


def _writes(node: torch.fx.Node) -> list[tuple[torch.fx.Node, Any]]:
    """(mutated input, how to read its new value from ``node``) for an opsmith op's functionalized call."""
    from torch._higher_order_ops.auto_functionalize import auto_functionalized_v2
    from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table, triton_kernel_wrapper_functional

    if node.target is auto_functionalized_v2:
        # Any op whose schema declares the write (opsmith's, or a torch.library custom op beside them, such as the
        # Llama recipe's chunked accumulation): the declaration is its author's, the donation AOTAutograd's proof.
        op = node.args[0]
        if getattr(op, "_schema", None) is None:
            return []
        bases = list(node.kwargs.get("_all_bases") or [])
        first = len(node.meta["val"]) - len(bases)  # the op's own outputs come first, then each base's new value
        return [(b, first + k) for k, b in enumerate(bases)]
    if node.target is triton_kernel_wrapper_functional:
        written = _KERNELS.get(id(_jit_function(kernel_side_table.get_kernel(node.kwargs["kernel_idx"]))))
        if not written:
            return []
        args = node.kwargs["kwargs"]
        return [(args[name], name) for name in node.kwargs["tensors_to_clone"] if name in written and name in args]
    return []


def _read_later(node: torch.fx.Node, buffer: torch.fx.Node, order: dict) -> bool:
    """Whether any node after ``node`` reads ``buffer`` (or a view of it): then the write must stay a copy."""
    seen, stack = set(), [buffer]
    while stack:
        n = stack.pop()
        for user in n.users:
            if user is node or user in seen:
                continue
            seen.add(user)
            if order[user] > order[node]:
                return True
            if isinstance(user.target, torch._ops.OpOverload) and user.target.is_view:  # a view reads it later
                stack.append(user)
    return False


def rewrite(graph: torch.fx.Graph) -> list[str]:
    """Add the ``copy_`` of each opsmith op's write into a donated buffer that nothing reads later; the names of
    those buffers."""
    donated = set(_donated(graph))
    if not donated:
        return []
    order = {n: k for k, n in enumerate(graph.nodes)}
    output = graph.find_nodes(op="output")[0]
    done: list[str] = []
    for node in list(graph.nodes):
        for buffer, key in _writes(node):
            if buffer not in donated or buffer.name in done or _read_later(node, buffer, order):
                continue
            with graph.inserting_before(output):
                new = graph.call_function(operator.getitem, (node, key))
                graph.call_function(torch.ops.aten.copy_.default, (buffer, new))
            done.append(buffer.name)
    return done


def _make_pass() -> Any:
    from torch._inductor.custom_graph_pass import CustomGraphPass, get_hash_for_files

    class DonatedSavedTensors(CustomGraphPass):
        """The pass (module docstring), after the user's own pass if one was set."""

        def __init__(self, before: Any = None) -> None:
            self.before = before

        def __call__(self, graph: torch.fx.Graph) -> None:
            if self.before is not None:
                self.before(graph)
            from .. import env

            done = rewrite(graph) if env.REINPLACE_SAVED.get() else []
            if done:
                reinplaced.append(done)
                log.info("backward graph: %s overwritten in place (donated saved tensors an opsmith op writes)",
                         ", ".join(done))  # fmt: skip

        def uuid(self) -> Any:
            # Inductor's caches key on it: this file's contents, and the user's pass's own key (None: their pass
            # has none, and Inductor then does not cache, as without opsmith).
            from .. import env

            mine = f"{get_hash_for_files((__file__,)).hex()}-{int(env.REINPLACE_SAVED.get())}"
            if self.before is None:
                return mine
            theirs = self.before.uuid() if hasattr(self.before, "uuid") else None
            return None if theirs is None else f"{mine}-{theirs}"

    return DonatedSavedTensors


_CLASS: list[Any] = []


def DonatedSavedTensors(before: Any = None) -> Any:  # a class built on first use: torch._inductor imports slowly
    """The pass as an Inductor ``CustomGraphPass``, running ``before`` first."""
    if not _CLASS:
        _CLASS.append(_make_pass())
    return _CLASS[0](before)


def install() -> bool:
    """Put the pass into Inductor's post-grad passes (once; after a pass the user set). Whether it is there."""
    from .. import env

    if not env.REINPLACE_SAVED.get():
        return False
    from torch._inductor import config  # ~0.1 s, once: only a process registering an op that writes an input

    current = config.post_grad_custom_post_pass
    if _CLASS and isinstance(current, _CLASS[0]):
        return True
    config.post_grad_custom_post_pass = DonatedSavedTensors(current)
    return True
