"""What a kernel parameter and a launch can hold: integer and float ranges per C type, grid and shared-memory
limits. Declarations are checked against them at registration (``validate``), calls by the plan (``plan/steps``)."""

__all__ = ["FLOAT_MAX", "GRID_MAX", "INT32_MAX", "INT_LIMITS", "SMEM_MAX", "init_fits"]

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

#: What an output of each dtype can start from (``OutputDecl(init=)``): integer ranges, and the largest finite
#: float (a finite value past it would overflow; inf and nan are kept as they are). An init passes to the native
#: library as a double, so integers past 2^53 are refused where they could not pass exactly.
_INIT_INT = {"bool": (0, 1), "uint8": INT_LIMITS["u8"], "int8": INT_LIMITS["i8"], "int16": INT_LIMITS["i16"],
             "int32": INT_LIMITS["i32"], "int64": (-(2**53), 2**53)}  # fmt: skip
_INIT_FLOAT = {"float16": FLOAT_MAX["f16"], "bfloat16": FLOAT_MAX["bf16"], "float32": FLOAT_MAX["f32"],
               "float64": 1.7976931348623157e308, "float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}  # fmt: skip


def init_fits(value: float, dtype: str) -> bool:
    """Whether every element of a ``dtype`` output can hold ``value`` exactly (a float dtype: any value in its
    range, rounded as a float is; an integer dtype: an integer in its range, so 2.5 or -inf is refused rather
    than truncated, and -1 for uint8 rather than wrapped)."""
    if dtype in _INIT_INT:
        lo, hi = _INIT_INT[dtype]
        return value == value and abs(value) != float("inf") and value == int(value) and lo <= value <= hi
    most = _INIT_FLOAT.get(dtype)
    return most is None or value != value or abs(value) == float("inf") or abs(value) <= most
