"""Reading a cubin (an ELF64 file) without a driver: its kernel symbols and each kernel's parameter layout.

The layout comes from the ``.nv.info.<kernel>`` section, where the compiler records every parameter's
ordinal, offset and size (``EIATTR_KPARAM_INFO``, what ``cuobjdump -elf`` prints as "Ordinal / Offset /
Size"). It is what the driver copies into the kernel's parameter space at launch, so opsmith checks its
own view of the parameters against it.
"""

from __future__ import annotations

import struct

__all__ = ["cubin_param_layout", "cubin_symbols"]

_SHT_SYMTAB = 2
_STT_FUNC = 2
_EIFMT_SVAL = 4  # a sized value; the other formats (none, byte, half-word) are 4-byte entries
_EIATTR_KPARAM_INFO = 0x17


def _sections(cubin: bytes) -> list[tuple] | None:
    if cubin[:4] != b"\x7fELF" or len(cubin) < 64 or cubin[4] != 2:
        return None
    (shoff,) = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", cubin, 0x3A)
    try:
        return [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    except struct.error:
        return None


def _cstr(data: bytes, off: int) -> str:
    end = data.index(b"\0", off)
    return data[off:end].decode("utf-8", "replace")


def cubin_symbols(cubin: bytes) -> set[str]:
    """Names of the function symbols in an ELF64 cubin (read from its symbol table)."""
    sections = _sections(cubin)
    if sections is None:
        return set()
    names: set[str] = set()
    for _sh_name, sh_type, _f, _a, off, size, link, _i, _al, entsize in sections:
        if sh_type != _SHT_SYMTAB or not entsize:
            continue
        stroff = sections[link][4]
        for k in range(size // entsize):
            st_name, st_info = struct.unpack_from("<IB", cubin, off + k * entsize)
            if st_info & 0xF == _STT_FUNC:
                names.add(_cstr(cubin, stroff + st_name))
    return names


def cubin_param_layout(cubin: bytes, symbol: str) -> list[tuple[int, int]] | None:
    """[(offset, size in bytes)] of ``symbol``'s parameters in order, or None when the cubin does not
    describe them (not an ELF cubin, no such kernel, an info section this reader does not understand)."""
    sections = _sections(cubin)
    if sections is None:
        return None
    shstrndx = struct.unpack_from("<H", cubin, 0x3E)[0]
    if shstrndx >= len(sections):
        return None
    names_at = sections[shstrndx][4]
    wanted = ".nv.info." + symbol
    for sh_name, _t, _f, _a, off, size, *_ in sections:
        if _cstr(cubin, names_at + sh_name) != wanted:
            continue
        params: dict[int, tuple[int, int]] = {}
        p, end = off, off + size
        while p + 4 <= end:
            fmt, attr = cubin[p], cubin[p + 1]
            if fmt == _EIFMT_SVAL:
                (length,) = struct.unpack_from("<H", cubin, p + 2)
                payload = cubin[p + 4 : p + 4 + length]
                p += 4 + length
            elif 1 <= fmt <= 3:
                payload = b""
                p += 4
            else:
                return None
            if attr == _EIATTR_KPARAM_INFO and len(payload) >= 12:
                _index, ordinal, offset, flags = struct.unpack_from("<IHHI", payload)
                params[ordinal] = (offset, (flags >> 18) & 0x3FFF)
        if sorted(params) != list(range(len(params))):
            return None
        return [params[k] for k in range(len(params))]
    return None
