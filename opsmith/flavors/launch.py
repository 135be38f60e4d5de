"""Loading kernels per device and launching them on the current stream, through cuda.bindings.

Why not ``cuda.core.launch``: it rebuilds its launch config and parameter holder on every call, and a
``custom_op`` around it measured 27.5 us per call against 10.2 us for ``torch.relu`` (H200 host). Here the
parameter layout is fixed at registration: a call packs its values into a per-thread buffer with one
``struct.pack_into`` and calls ``cuLaunchKernel`` with that buffer's pointer array.

Modules are loaded once per device (``cuModuleLoadData`` in that device's primary context): a function
loaded for one GPU is never launched on another, and a device of another architecture gets its own build.
"""

from __future__ import annotations

import ctypes
import os
import struct
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import NoReturn

import torch

from ..errors import LaunchError
from .base import Binary

__all__ = ["SMEM_PER_CALL", "DeviceKernel", "pack_format"]

#: A kernel's ``shared_mem`` when a size expression gives it per call: loading opts the kernel into all the
#: dynamic shared memory the device allows, and each launch passes its own amount.
SMEM_PER_CALL = -1

# Each parameter sits at the start of its own 8-byte slot (all kernel parameters here are <= 8 bytes).
_SLOT_FMT = {
    "ptr": "Q", "u64": "Q", "i64": "q", "f64": "d", "i32": "i4x", "u32": "I4x", "f32": "f4x",
    "i16": "h6x", "u16": "H6x", "f16": "e6x", "bf16": "H6x", "i8": "b7x", "u8": "B7x", "bool": "?7x",
}  # fmt: skip


_STREAMS: dict[int, object] = {}  # raw stream pointer -> driver.CUstream (a handle; no ownership)


def _stream_handle(raw: int):
    from cuda.bindings import driver

    handle = _STREAMS[raw] = driver.CUstream(raw)
    return handle


_PRIMARY: dict[int, object] = {}  # device -> its retained primary context
_INVALID_CONTEXT = 201  # CUDA_ERROR_INVALID_CONTEXT


def make_current(device: int) -> bool:
    """Make ``device``'s primary context current on this thread (where PyTorch's runtime calls put it).
    A thread that has made no CUDA runtime call yet, such as autograd's device thread running a backward
    whose allocations all came from the cache, has no current context, and a driver launch there fails
    with CUDA_ERROR_INVALID_CONTEXT."""
    from cuda.bindings import driver

    ctx = _PRIMARY.get(device)
    if ctx is None:
        err, dev = driver.cuDeviceGet(device)
        if err:
            return False
        err, ctx = driver.cuDevicePrimaryCtxRetain(dev)
        if err:
            return False
        _PRIMARY[device] = ctx
    (err,) = driver.cuCtxSetCurrent(ctx)
    return not err


def retry_launch(err, device: int, launch: Callable[[], tuple]):
    """The error path of a launch: a thread without a current context gets it and launches again; any
    other error is returned as is. (Checking the context before every launch would cost the hot path.)"""
    if err == _INVALID_CONTEXT and make_current(device):
        return launch()[0]
    return err


# A process forked after CUDA was initialised cannot use CUDA (the driver's state is not fork-safe; PyTorch
# refuses too). The child forgets every loaded function, so its next launch takes the slow path below and
# raises a clear error instead of handing the driver a parent's handle (undefined: an error or a hang).
_LOADED: weakref.WeakSet = weakref.WeakSet()  # DeviceKernels holding CUfunctions
_FORK = {"child": False, "hooked": False}


def _forget_after_fork() -> None:
    _FORK["child"] = True
    _PRIMARY.clear()
    _STREAMS.clear()
    for k in list(_LOADED):
        k._functions.clear()
        k._handles.clear()
        k._modules.clear()
        k._lock = threading.Lock()  # another thread may have held it at the fork


def in_forked_child() -> bool:
    return _FORK["child"]


def forked_error(op_name: str) -> LaunchError:
    return LaunchError(f"{op_name}: called in a process forked after CUDA was initialised, where CUDA cannot be "
                      "used. Fix: start workers with the 'spawn' method (torch.multiprocessing.set_start_method("
                      "'spawn')), or initialise CUDA only in the children.")  # fmt: skip


# Bound directly (a Python wrapper costs ~0.1 us a call); absent from CPU-only builds, where nothing launches.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
_current_device = getattr(torch._C, "_cuda_getDevice", None)


#: ``Binary.jit`` names -> the driver's JIT options (cuModuleLoadDataEx), here and in native/launch_cpp.py.
_JIT_OPTIONS = {"max_registers": "CU_JIT_MAX_REGISTERS", "line_info": "CU_JIT_GENERATE_LINE_INFO",
                "debug": "CU_JIT_GENERATE_DEBUG_INFO"}  # fmt: skip


def pack_format(ctypes_: Sequence[str]) -> str:
    return "<" + "".join(_SLOT_FMT[c] for c in ctypes_)


def bf16_bits(value: float) -> int:
    """Round-to-nearest-even bf16 bit pattern of a float (struct has no bf16 code)."""
    (u,) = struct.unpack("<I", struct.pack("<f", value))
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def _check(result: tuple, what: str, op_name: str) -> tuple:
    err = result[0]
    if err:
        from cuda.bindings import driver

        _, name = driver.cuGetErrorName(err)
        raise LaunchError(f"{op_name}: {what} failed with {name.decode() if name else err}.")
    return result[1:]


class _Params(threading.local):
    """Per-thread parameter storage: ``cuLaunchKernel`` releases the GIL, so a shared buffer could be
    repacked by another thread while the driver copies it."""

    def __init__(self, nslots: int) -> None:
        self.buf = ctypes.create_string_buffer(8 * max(nslots, 1))
        base = ctypes.addressof(self.buf)
        self.ptrs = (ctypes.c_void_p * max(nslots, 1))(*(base + 8 * i for i in range(max(nslots, 1))))
        self.addr = ctypes.addressof(self.ptrs)
        self.v = (self.buf, self.addr)  # one thread-local lookup per call instead of two (~40 ns)


def _opt_in_max(fn: object, device: int, op_name: str) -> int:
    """The dynamic shared memory ``fn`` may opt into on ``device``: the block's opt-in limit (227 KiB on sm_90)
    less what the kernel declares statically."""
    from cuda.bindings import driver

    (most,) = _check(driver.cuDeviceGetAttribute(
        driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device),
        f"reading the shared memory limit of cuda:{device}", op_name)  # fmt: skip
    (static,) = _check(driver.cuFuncGetAttribute(
        driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn),
        f"reading the kernel's static shared memory on cuda:{device}", op_name)  # fmt: skip
    return int(most) - int(static)


class DeviceKernel:
    """One kernel, loadable on every device. ``build(arch)`` yields its binary for an architecture."""

    def __init__(self, op_name: str, build: Callable[[str], Binary], param_ctypes: Sequence[str],
                 first: Binary | None = None, *, block: tuple[int, int, int] | None = None,
                 shared_mem: int = 0) -> None:  # fmt: skip
        self.op_name = op_name
        self._build = build
        self._binaries: dict[str, Binary] = {first.arch: first} if first else {}
        self.param_ctypes = list(param_ctypes)
        #: Values compiled into the kernel (``Binary.dropped``) are left out of its argument buffer.
        self.dropped = first.dropped if first is not None else ()
        self._keep = [k for k in range(len(self.param_ctypes)) if k not in self.dropped]
        self.fmt = pack_format([self.param_ctypes[k] for k in self._keep])
        pack = struct.Struct(self.fmt).pack_into
        keep = self._keep
        self._pack = pack if not self.dropped else lambda buf, off, *v: pack(buf, off, *[v[k] for k in keep])
        from cuda.bindings.driver import cuLaunchKernel  # bound once; importing the bindings touches no GPU

        self._cu = cuLaunchKernel
        # A compiler that fixes the block (Triton) wins over the declaration's; trailing parameters (Triton's
        # scratch pointers) stay NULL: the buffer is zeroed and only the user's slots are ever packed.
        self.block = first.block if first is not None and first.block else block
        self.shared_mem = first.shared_mem if first is not None and first.block else shared_mem
        trailing = first.trailing_params if first is not None else 0
        self._params = _Params(len(self.param_ctypes) + trailing)
        self._functions: dict[int, object] = {}
        self._handles: dict[int, int] = {}  # the CUfunctions as ints, for a C launcher (Triton's)
        self._modules: dict[int, object] = {}
        self._lock = threading.Lock()

    def argument_bytes(self, values: Sequence) -> bytes:
        """The argument buffer a launch with ``values`` (every user parameter) passes, as the dry run records it."""
        return struct.pack(self.fmt, *[values[k] for k in self._keep])

    def binary_for(self, arch: str) -> Binary:
        b = self._binaries.get(arch) or next((b for b in self._binaries.values() if b.arch == "any"), None)
        if b is None:
            b = self._build(arch)
            self._binaries[arch] = b
        return b

    def function(self, device: int):
        """The CUfunction of this kernel in ``device``'s primary context (loaded on first use)."""
        fn = self._functions.get(device)
        if fn is None:
            if _FORK["child"]:
                raise forked_error(self.op_name)
            with self._lock:  # eight threads making the first call load the module once
                fn = self._functions.get(device)
                if fn is None:
                    fn = self._load(device)
        return fn

    def _load(self, device: int):
        from cuda.bindings import driver

        if torch.cuda.is_current_stream_capturing():
            raise LaunchError(f"{self.op_name}: first use on cuda:{device} happened during CUDA graph capture, "
                              "where modules cannot be loaded. Fix: run the op once before capturing "
                              "(the usual warm-up).")  # fmt: skip
        major, minor = torch.cuda.get_device_capability(device)
        binary = self.binary_for(f"sm_{major}{minor}")
        image = binary.data + (b"\0" if binary.fmt == "ptx" else b"")
        with torch.cuda.device(device):
            torch.cuda.init()
            make_current(device)  # this thread may not have made a runtime call yet
            if binary.fmt == "ptx" and binary.jit:  # the driver compiles PTX: the declared options are its
                names, values = zip(*((_JIT_OPTIONS[k], v) for k, v in binary.jit), strict=True)
                loaded = driver.cuModuleLoadDataEx(image, len(names), [getattr(driver.CUjit_option, n) for n in names],
                                                   list(values))  # fmt: skip
            else:
                loaded = driver.cuModuleLoadData(image)
            (module,) = _check(loaded, f"loading the {binary.fmt} on cuda:{device}", self.op_name)
            (fn,) = _check(driver.cuModuleGetFunction(module, binary.symbol.encode()),
                           f"finding '{binary.symbol}' on cuda:{device}", self.op_name)  # fmt: skip
            allow = _opt_in_max(fn, device, self.op_name) if self.shared_mem == SMEM_PER_CALL else self.shared_mem
            if allow > 48 * 1024:  # above 48 KiB dynamic shared memory must be opted into
                attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
                _check(driver.cuFuncSetAttribute(fn, attr, allow),
                       f"allowing {allow} bytes of shared memory on cuda:{device}", self.op_name)  # fmt: skip
        self._modules[device] = module
        self._handles[device] = int(fn)
        self._functions[device] = fn
        if not _FORK["hooked"]:
            os.register_at_fork(after_in_child=_forget_after_fork)
            _FORK["hooked"] = True
        _LOADED.add(self)
        return fn

    def handle(self, device: int) -> int:
        """``function(device)`` as an int (what a C launcher takes)."""
        self.function(device)
        return self._handles[device]

    def fail_c(self, exc: Exception, device: int, grid: tuple) -> NoReturn:
        """A C launcher's failure (Triton's raises RuntimeError with the driver's message), as opsmith's error."""
        raise LaunchError(f"{self.op_name}: launching grid={grid} block={self.block} shared_mem={self.shared_mem} "
                          f"on cuda:{device} failed: {exc}") from exc  # fmt: skip

    def fast_path_globals(self) -> dict:
        """What ``eager.py``'s generated code binds to inline a launch on the current device: the same steps
        as ``launch`` without its call and argument repacking (~0.7 us of a ~13 us call)."""
        return {"_fns": self._functions, "_kfn": self.function, "_P": self._params, "_pack": self._pack,
                "_raw": _raw_stream, "_streams": _STREAMS, "_mkstream": _stream_handle, "_curdev": _current_device,
                "_cu": self._cu, "_launch": self.launch, "_fail": self._fail, "_retry": retry_launch}  # fmt: skip

    def _fail(self, err, device: int, grid: tuple, block: tuple, shared_mem: int) -> None:
        _check((err,), f"launching grid={grid} block={block} shared_mem={shared_mem} on cuda:{device}", self.op_name)

    def launch(self, device: int, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, shared_mem: int,
               *values) -> None:  # fmt: skip
        """Launch on ``device``'s current stream; ``values`` in calling-convention order (pointers as ints).

        The hot path: flat positional arguments, a pre-bound packer and cached stream handles (measured on
        an H200 host: 7.8 us per call with tuples and per-call ``CUstream`` objects, the driver call alone
        ~5 us)."""
        fn = self._functions.get(device)
        if fn is None:
            fn = self.function(device)
        buf, addr = self._params.v
        self._pack(buf, 0, *values)
        raw = _raw_stream(device)
        stream = _STREAMS.get(raw)
        if stream is None:
            stream = _stream_handle(raw)
        args = (fn, gx, gy, gz, bx, by, bz, shared_mem, stream, addr, 0)
        if device == _current_device():
            (err,) = self._cu(*args)
            if err:  # the retry's closure is built on the error path only
                err = retry_launch(err, device, lambda: self._cu(*args))
        else:
            with torch.cuda.device(device):
                (err,) = self._cu(*args)
                if err:
                    err = retry_launch(err, device, lambda: self._cu(*args))
        if err:
            _check((err,), f"launching grid=({gx}, {gy}, {gz}) block=({bx}, {by}, {bz}) shared_mem={shared_mem} "
                   f"on cuda:{device}", self.op_name)  # fmt: skip

    def launch_args(self, grid: Sequence[int], block: Sequence[int], args: Sequence, shared_mem: int = 0,
                    device: int | None = None) -> None:  # fmt: skip
        """Launch with Python values for a hand-written ``eager_fn``: tensors become pointers, the rest is
        packed by the kernel's parameter types. Grid and block may have 1 to 3 entries."""
        if len(args) != len(self.param_ctypes):
            raise LaunchError(f"{self.op_name}: the kernel takes {len(self.param_ctypes)} arguments, "
                              f"{len(args)} were given. Fix: pass them in the kernel's parameter order.")  # fmt: skip
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if device is None:
            if not tensors:
                raise LaunchError(f"{self.op_name}: no tensor argument to take the device from. Fix: pass device=.")
            device = tensors[0].device.index
        values = []
        for a, c in zip(args, self.param_ctypes, strict=True):
            if isinstance(a, torch.Tensor):
                if a.device.type != "cuda" or a.device.index != device:
                    raise LaunchError(f"{self.op_name}: tensor argument on {a.device}, launch on cuda:{device}. "
                                      "Fix: move every tensor to one GPU.")  # fmt: skip
                a = a.data_ptr()
            elif c == "bf16":
                a = bf16_bits(float(a))
            values.append(a)
        g = (*grid, 1, 1)[:3]
        b = (*block, 1, 1)[:3]
        self.launch(device, *g, *b, shared_mem, *values)
