"""The PTX / cubin flavor: a kernel someone else compiled. No NVRTC; the driver loads it per device.

PTX is compiled by the driver for whatever GPU loads it (its ``.version`` must not be newer than the
driver supports; we never rewrite it). A cubin runs only on the architecture it was built for. PTX
parameters give sizes but not what pointers point at, so tensor inputs must declare their dtype.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from ..cache import make_key
from ..declare.cubin import cubin_param_layout, cubin_symbols
from ..declare.signature import KernelParam, parse_ptx_entry
from ..declare.spec import Config
from ..errors import SpecError
from .base import Binary
from .options import parse_options

__all__ = ["PrecompiledSource"]


class PrecompiledSource:
    typed = "sizes"

    def __init__(self, op_name: str, image: bytes | str, kernel_name: str, options: Sequence[str] = ()) -> None:
        if isinstance(image, str):
            image = image.encode()
        if not isinstance(image, bytes | bytearray) or not image.strip():
            raise SpecError(op_name, "ptx", "no PTX or cubin was given.", "pass the PTX text or cubin bytes.")
        self.op_name, self.kernel_name, self.image = op_name, kernel_name, bytes(image).rstrip(b"\0")
        self.fmt = "cubin" if self.image[:4] == b"\x7fELF" else "ptx"
        self.flavor = self.fmt
        self.options = parse_options(op_name, options, self.fmt)  # the driver JIT's (PTX); a cubin takes none
        self.compile_options = self.options.canonical  # the record's
        if self.fmt == "cubin":
            names = cubin_symbols(self.image)
        else:
            if b".entry" not in self.image:
                raise SpecError(op_name, "ptx", "the bytes are neither a cubin (ELF) nor PTX with an .entry.",
                                "pass PTX text (as produced by nvcc -ptx or Triton) or a cubin.")  # fmt: skip
            names = set(re.findall(r"\.entry\s+([\w$]+)", self.image.decode("utf-8", "replace")))
        if kernel_name not in names:
            raise SpecError(op_name, "kernel_name", f"'{kernel_name}' is not an entry of the {self.fmt} (it has: "
                            f"{', '.join(sorted(names)) or 'none'}).", "pass the entry's exact (mangled) name.")  # fmt: skip

    def params(self, binary: Binary | None, arch: str) -> tuple[list[KernelParam] | None, str]:
        """Parameter sizes from the PTX entry or the cubin's parameter info; neither keeps source names."""
        why = f"a {self.fmt} does not keep the source's parameter names"
        if self.fmt == "ptx":
            return parse_ptx_entry(self.image.decode("utf-8", "replace"), self.kernel_name), why
        layout = cubin_param_layout(self.image, self.kernel_name)
        if layout is None:
            return None, why
        return [KernelParam("", False, "?", f"{size}-byte parameter", size) for _, size in layout], why

    def static_names(self) -> frozenset[str]:
        return frozenset()

    def fingerprint(self) -> str:
        return make_key(
            {"flavor": self.fmt, "image": hashlib.sha256(self.image).hexdigest(), "kernel": self.kernel_name,
             "options": list(self.options.canonical)}
        )  # fmt: skip

    def for_config(self, config: Config) -> PrecompiledSource:
        if config.params:
            raise SpecError(self.op_name, "autotune.configs", "a pre-compiled kernel has no compile-time "
                            f"parameters to set, got {config.params}.",
                            "tune only the geometry's block sizes (params named by the geometry), or compile "
                            "one PTX per config and register them as separate ops.")  # fmt: skip
        return self

    def build(self, arch: str, spec: tuple = ()) -> Binary:
        return Binary(self.image, self.fmt, "any", self.kernel_name, jit=self.options.jit)  # type: ignore[arg-type]
