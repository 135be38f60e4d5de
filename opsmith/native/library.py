"""One C++ source for a set of ops: headers, the runtime, each op's kernels, implementations and Autograd
kernel, and the registrations (``TORCH_LIBRARY_FRAGMENT`` / ``TORCH_LIBRARY_IMPL``, the pattern of a
hand-written PyTorch extension).

Kernel images are not pasted into the source as byte arrays: the assembler embeds each file (``.incbin``),
found through the assembler's ``-I <dir>``, so the source stays readable and its text names every image by content.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from .._version import __version__
from .autograd_cpp import autograd_source, caller_source
from .codegen import NativeOp, op_source
from .cpp import cpp_str
from .cute_cpp import CUTE_CPP, cute_declarations
from .dims_cpp import DIMS_CPP
from .expr_cpp import EXPR_CPP
from .guards_cpp import GUARDS_CPP
from .launch_cpp import LAUNCH_CPP
from .learned_cpp import LEARNED_CPP, learned_entries
from .target_cpp import STABLE_TARGET_VERSION, glue
from .xla_cpp import XLA_RUNTIME

__all__ = ["Image", "image_label", "library_source"]


@dataclass(frozen=True)
class Image:
    """A kernel binary to embed (a cubin or PTX: the file name the assembler reads it from), or an object file
    to link (``link``: a CuTe DSL kernel's export, its host launch code and cubin inside)."""

    data: bytes
    link: bool = False

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def file(self) -> str:
        return f"{self.digest[:32]}.{'o' if self.link else 'bin'}"


def image_label(image: Image) -> str:
    return f"opsmith_image_{image.digest[:32]}"


def _embed(images: Sequence[Image]) -> list[str]:
    """Each image once, NUL-terminated (PTX must be), 16-byte aligned, with start and end labels."""
    L = []
    for im in (im for im in images if not im.link):
        sym = image_label(im)
        L += [f'asm(".section .rodata\\n.balign 16\\n.globl {sym}\\n.hidden {sym}\\n{sym}:\\n'
              f'.incbin \\"{im.file}\\"\\n.byte 0\\n.globl {sym}_end\\n.hidden {sym}_end\\n{sym}_end:\\n.previous");',
              f'extern "C" const unsigned char {sym}[];', f'extern "C" const unsigned char {sym}_end[];']  # fmt: skip
    return L


def _by_namespace(ops: Sequence[NativeOp]) -> dict[str, list[NativeOp]]:
    by_ns: dict[str, list[NativeOp]] = {}
    for n in ops:
        by_ns.setdefault(n.record.op_name.split("::")[0], []).append(n)
    return by_ns


_QUIET = """struct Quiet final : c10::WarningHandler {
  void process(const c10::Warning&) override {}
};
"""


def _served_registrations(ops: Sequence[NativeOp], backend: str, only: set[str] | None) -> list[str]:
    """The kernels of a library serving ops this process registered (``serving.py``): ``backend`` (CUDA; CPU
    for a dry run) and its Autograd key, over the Python path's kernels, which stay registered beneath (a
    call the library lacks a kernel for reaches them through ``python_path``). Meta and the other backends
    keep the Python path's kernels. ``only``: the ops to register (the others are here for their callers)."""
    ops = [n for n in ops if only is None or n.record.op_name in only]
    L = ["// These kernels take over from the Python path's, which stay registered beneath them. The dispatcher",
         "// says so once per process (\"Overriding a previously registered kernel\"); here that is the intent,",
         "// so the registrations run with a handler that drops warnings.", _QUIET,
         "void register_served() {", "  Quiet quiet;", "  c10::WarningUtils::WarningHandlerGuard guard(&quiet);"]  # fmt: skip
    for ns, group in _by_namespace(ops).items():
        for key, fn in ((backend, "cuda_impl"), (f"Autograd{backend}", "autograd_impl")):
            lib = f"{ns}_{key.lower()}"
            L.append(f"  static torch::Library {lib}(torch::Library::IMPL, {cpp_str(ns)}, c10::DispatchKey::{key}, "
                     "__FILE__, __LINE__);")  # fmt: skip
            for n in group:
                L.append(f"  {lib}.impl({cpp_str(n.record.op_name.split('::')[1])}, TORCH_FN({n.scope}::{fn}));")
    L += ["#ifdef OPSMITH_DRY_RUN  // the launches this library recorded, for the tests",
          "  static torch::Library dry_def(torch::Library::FRAGMENT, \"opsmith_dry_run\", std::nullopt, __FILE__, __LINE__);",
          '  opsmith::define(dry_def, "opsmith_dry_run::take", "take() -> str");',
          "  static torch::Library dry(torch::Library::IMPL, \"opsmith_dry_run\", "
          "c10::DispatchKey::CompositeExplicitAutograd, __FILE__, __LINE__);",
          '  dry.impl("take", TORCH_FN(opsmith::dry_run_take));',
          "#endif"]  # fmt: skip
    L += ["}", "const int served_registered = (register_served(), 0);", "}  // namespace", "",
          "// Every served op's counters, in the order serving.py built the library: kServedCounts numbers each.",
          'extern "C" __attribute__((visibility("default"))) void opsmith_served_counters(int64_t* out, int64_t n) {',
          "  int64_t k = 0;"]  # fmt: skip
    for op in ops:
        L += [
            f"  for (const auto& c : {op.scope}::served)",
            "    if (k < n) out[k++] = c.load(std::memory_order_relaxed);",
        ]
    return [*L, "}", "", *learned_entries(ops), "namespace {"]


def _registrations(ops: Sequence[NativeOp], stable: bool = False) -> list[str]:
    """Schemas (those not defined yet: in a process where opsmith registered them, only the kernels are
    added) and the kernels for CUDA, CPU (whose guards refuse CPU tensors with the Python text), Meta and
    Autograd. ``stable``: the stable ABI's macros and boxed kernels (``TORCH_BOX``), no Autograd kernel
    (``target_cpp.py`` says why), and schemas defined unconditionally: the stable API cannot ask the dispatcher
    whether an op exists, so such a library is for processes that do not register the ops themselves."""
    lib, kernel = ("STABLE_TORCH_LIBRARY", "TORCH_BOX(&{})") if stable else ("TORCH_LIBRARY", "TORCH_FN({})")
    # CompositeExplicitAutograd: what runs where no device's kernel does, a call with no tensor at all included
    # (the guards refuse its None first, as the Python path's ``fake.no_backend`` does)
    keys = [("CUDA", "cuda_impl"), ("CPU", "cuda_impl"), ("Meta", "meta_impl"),
            ("CompositeExplicitAutograd", "cuda_impl")] + ([] if stable else [("Autograd", "autograd_impl")])  # fmt: skip

    def define(qualified: str, schema: str) -> str:
        return (
            f"m.def({cpp_str(schema)});" if stable else f"opsmith::define(m, {cpp_str(qualified)}, {cpp_str(schema)});"
        )

    L = []
    for ns, group in _by_namespace(ops).items():
        L.append(f"{lib}_FRAGMENT({ns}, m) {{")
        L += [f"  {define(n.record.op_name, n.record.op_name.split('::')[1] + n.record.schema)}" for n in group]
        L.append("}")
        for key, fn in keys:
            L.append(f"{lib}_IMPL({ns}, {key}, m) {{")
            for n in group:
                impl = kernel.format(f"{n.scope}::{fn}")
                L.append(f"  m.impl({cpp_str(n.record.op_name.split('::')[1])}, {impl});")
            L.append("}")
    # A dry-run library's launches, for the differential tests: the last library loaded answers (it serves
    # every op it holds, a library loaded later replacing an earlier one's kernels).
    L += ["#ifdef OPSMITH_DRY_RUN",
          f"{lib}_FRAGMENT(opsmith_dry_run, m) {{",
          f'  {define("opsmith_dry_run::take", "take() -> str")}',
          "}",
          f"{lib}_IMPL(opsmith_dry_run, CompositeExplicitAutograd, m) {{",
          f'  m.impl("take", {kernel.format("opsmith::dry_run_take")});',
          "}",
          "#endif"]  # fmt: skip
    return L


_DEFINE = """
namespace opsmith {
// Defines an op's schema unless it exists: a process where opsmith registered the op (opsmith.native.use)
// gets only the kernels; one that loads the library alone gets the whole op.
inline void define(torch::Library& m, const char* qualified, const char* schema) {
  const std::string name(qualified);
  if (!c10::Dispatcher::singleton().findSchema({name, ""}).has_value()) m.def(schema);
}

inline at::ScalarType accumulate_dtype(at::ScalarType t) {  // Buffer(dtype="acc:<name>")
  return t == at::kHalf || t == at::kBFloat16 ? at::kFloat : t;
}
}  // namespace opsmith
"""

_TABLES = """
namespace opsmith {
// A served op's counters (serving.py): the calls the library took, then those handed to the Python path, by why.
enum ServedCount { kCalls, kDtype, kSize, kKey, kCapture, kServedCounts };

// The tuning decision for a key: one made before the build, else the declared default config.
template <size_t N>
int lookup(const std::array<int64_t, N>& key, const std::vector<std::pair<std::array<int64_t, N>, int>>& decisions,
           int otherwise) {
  for (const auto& d : decisions)
    if (d.first == key) return d.second;
  return otherwise;
}

template <size_t N>
[[noreturn]] void missing_variant(const char* op, int config, const std::array<int64_t, N>& spec, const char* held) {
  OPSMITH_CHECK(false, op, ": this library holds no kernel for config ", config, " and specialization ",
                list_str(spec, false), " (dtypes as ScalarType numbers, alignment and sizes compiled in); it holds ",
                held, ". Fix: call the op with these dtypes and sizes before `opsmith build` (the build takes every "
                "kernel the process compiled), or pass dtypes= to the build.");
}
}  // namespace opsmith
"""


def library_source(ops: Sequence[NativeOp], images: Sequence[Image], torch_version: str,
                   served: str | None = None, served_ops: set[str] | None = None, target: str = "aten") -> str:  # fmt: skip
    """The library's C++ source. ``ops`` come callee first: an op's backward ops precede it. ``served``: the
    backend ("CUDA", or "CPU" for a dry run) of a library serving ops registered in this process
    (``served_ops``; default: all). ``target`` (``target_cpp.py``): "aten"; "stable", PyTorch's stable ABI
    (CUDA, CPU and concrete-size Meta kernels, for every torch from 2.10 on); "xla", XLA FFI handlers."""
    names = ", ".join(n.record.op_name for n in ops)
    built = {"aten": f"torch {torch_version}",
             "stable": f"the stable ABI of torch >= 2.10 (TORCH_TARGET_VERSION {STABLE_TARGET_VERSION}; headers of "
                       f"torch {torch_version})",
             "xla": "XLA's FFI (opsmith.jax; header-only torch and XLA headers)"}[target]  # fmt: skip
    how = ("opsmith.jax builds it when an op is first called (opsmith/jax/build.py)" if target == "xla" else
           "python -m opsmith build MODULE:OPS -o lib.so (opsmith/native/build.py)")  # fmt: skip
    cute = [v for n in ops for v in n.variants if v.cute is not None]
    head = [f"// Generated by opsmith {__version__} for {built}: {names}.", f"// Build: {how}.", "",
            *([f"#define OPSMITH_BUILT_FOR_TORCH {cpp_str(torch_version.split('+')[0])}"] if target == "aten" else []),
            glue(target), LAUNCH_CPP, *([CUTE_CPP] if cute else []), GUARDS_CPP, EXPR_CPP, DIMS_CPP,
            *([_DEFINE] if target == "aten" else []), *([XLA_RUNTIME] if target == "xla" else []), _TABLES,
            *([LEARNED_CPP] if served else []),
            *cute_declarations(cute), "namespace {", "", *_embed(images), ""]  # fmt: skip
    exports: list[str] = []
    if target == "aten":  # with each op's caller, and the Autograd kernels: ATen's dispatcher and autograd
        body = [x for n in ops for x in (op_source(n)[0], caller_source(n.record))]
        body += [autograd_source(n.op) for n in ops]
    else:
        body = []
        for n in ops:
            text, export = op_source(n)
            body.append(text)
            exports += export
    if served:
        tail = [*_served_registrations(ops, served, served_ops), "}  // namespace", ""]
    elif target == "xla":
        tail = ["}  // namespace", "", "// The handlers jax.ffi.register_ffi_target registers.", *exports, ""]
    else:
        tail = ["}  // namespace", "", *_registrations(ops, target == "stable"), ""]
    return "\n".join(head) + "\n".join(body) + "\n" + "\n".join(tail)
