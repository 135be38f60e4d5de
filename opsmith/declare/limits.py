"""What a kernel parameter and a launch can hold: integer and float ranges per C type, grid and shared-memory
limits. Declarations are checked against them at registration (``validate``), calls by the plan (``plan/steps``)."""

__all__ = ["FLOAT_MAX", "GRID_MAX", "INT32_MAX", "INT_LIMITS", "SMEM_MAX"]

INT32_MAX = 2**31 - 1
INT_LIMITS = {"i32": (-(2**31), 2**31 - 1), "u32": (0, 2**32 - 1), "i64": (-(2**63), 2**63 - 1),
              "u64": (0, 2**64 - 1), "i16": (-(2**15), 2**15 - 1), "u16": (0, 2**16 - 1),
              "i8": (-128, 127), "u8": (0, 255)}  # fmt: skip
# Largest finite values: a Python float beyond them cannot be packed (float, __half) or becomes inf (bf16).
FLOAT_MAX = {"f32": 3.4028234663852886e38, "f16": 65504.0, "bf16": 3.3895313892515355e38}
#: Blocks one launch may have along x, y, z (cuLaunchKernel's limits; its parameters are unsigned int).
GRID_MAX = (2**31 - 1, 65535, 65535)
#: Dynamic shared memory one block may opt into on sm_90 (227 KiB); the driver refuses more at launch.
SMEM_MAX = 227 * 1024
