"""The size-expression half of the C++ runtime: ``expr.py``'s arithmetic in C++, and the refusals of values
that leave their range.

Concrete sizes compute over ``__int128`` (``i128``): Python's integers are exact, and every intermediate of an
expression the plan did not mark wide fits 128 bits, so both paths get the same value; a wide expression
checks each step and refuses past 2^127, as ``expr._ck`` does. Division floors (C++ ``/`` truncates), and a
division by zero is a refusal naming the expression, not a SIGFPE. Symbolic sizes (Meta kernels, backward
buffers under torch.compile) compute over ``c10::SymInt``, whose symbolic ``/`` is a floor division too.
"""

from ..plan.steps import SMEM_MAX

EXPR_CPP = r"""
namespace opsmith {

using i128 = __int128;

inline std::string str(i128 v) {
  if (v == 0) return "0";
  const bool neg = v < 0;
  unsigned __int128 u = neg ? -static_cast<unsigned __int128>(v) : static_cast<unsigned __int128>(v);
  std::string s;
  while (u) s.insert(s.begin(), char('0' + int(u % 10))), u /= 10;
  return neg ? "-" + s : s;
}

inline i128 i128_of(const char* digits) {  // a literal beyond int64
  const bool neg = *digits == '-';
  i128 v = 0;
  for (const char* p = digits + neg; *p; ++p) v = v * 10 + (*p - '0');
  return neg ? -v : v;
}

// What a failing size computation names: the op, the argument, the expression in the declaration's words.
struct Where {
  const char* op;
  const char* arg;
  const char* what;
};

[[noreturn]] inline void division_error(const Where& w, i128 divisor) {
  input_error(w.op, w.arg, std::string(w.what) + " to divide by a non-zero value", "a division by " + str(divisor),
              "Fix: pass tensors for which the expression's divisors are not zero, or correct the expression.");
}

[[noreturn]] inline void overflow_error(const Where& w) {
  input_error(w.op, w.arg, std::string(w.what) + " to stay within 128 bits at every step",
              "an intermediate value beyond 2^127",
              "Fix: pass smaller tensors, or rewrite the expression so no intermediate product is this large.");
}

// expr._ck refuses |v| >= 2^127; an i128 that did not overflow is below 2^127 and at least -2^127.
inline i128 checked(i128 v, const Where& w) {
  const i128 lowest = -(static_cast<i128>(1) << 126) - (static_cast<i128>(1) << 126);
  if (v == lowest) overflow_error(w);
  return v;
}

inline i128 add(i128 a, i128 b) { return a + b; }
inline i128 sub(i128 a, i128 b) { return a - b; }
inline i128 mul(i128 a, i128 b) { return a * b; }
inline i128 add(i128 a, i128 b, const Where& w) {
  i128 r;
  if (__builtin_add_overflow(a, b, &r)) overflow_error(w);
  return checked(r, w);
}
inline i128 sub(i128 a, i128 b, const Where& w) {
  i128 r;
  if (__builtin_sub_overflow(a, b, &r)) overflow_error(w);
  return checked(r, w);
}
inline i128 mul(i128 a, i128 b, const Where& w) {
  i128 r;
  if (__builtin_mul_overflow(a, b, &r)) overflow_error(w);
  return checked(r, w);
}

inline i128 floordiv(i128 a, i128 b) {
  i128 q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
inline i128 cdiv(i128 a, i128 b) { return -floordiv(-a, b); }
inline i128 floormod(i128 a, i128 b) { return a - floordiv(a, b) * b; }  // Python's %: the sign of b
inline i128 floormod(i128 a, i128 b, const Where& w) {
  if (b == 0) division_error(w, b);
  return floormod(a, b);
}
inline i128 floordiv(i128 a, i128 b, const Where& w) {
  if (b == 0) division_error(w, b);
  return floordiv(a, b);
}
inline i128 cdiv(i128 a, i128 b, const Where& w) {
  if (b == 0) division_error(w, b);
  return cdiv(a, b);
}
inline i128 min(i128 a, i128 b) { return a < b ? a : b; }
inline i128 max(i128 a, i128 b) { return a > b ? a : b; }
inline i128 pow2(i128 n) {
  i128 p = 1;
  while (p < n) p <<= 1;
  return p;
}
inline i128 pow2(i128 n, const Where& w) {
  i128 p = 1;
  while (p < n) p = mul(p, 2, w);
  return p;
}
inline i128 lead(const Tensor& t, int64_t k) {  // product of all dimensions but the last k
  i128 p = 1;
  for (int64_t a = 0; a + k < t.dim(); ++a) p *= t.size(a);
  return p;
}
inline i128 prod(const Tensor& t, std::initializer_list<int64_t> axes) {
  i128 p = 1;
  for (int64_t a : axes) p *= t.size(a);
  return p;
}

#ifndef OPSMITH_NO_ATEN  // the stable API has no SymInt
// -- over c10::SymInt: concrete values as above, symbolic ones stay symbolic --------------------------------
inline c10::SymInt of(i128 v) { return c10::SymInt(static_cast<int64_t>(v)); }
#define OPSMITH_SYM(name, expr, symbolic)                                             \
  inline c10::SymInt name(const c10::SymInt& a, const c10::SymInt& b) {               \
    auto x = a.maybe_as_int(), y = b.maybe_as_int();                                  \
    if (x && y) return of(expr(static_cast<i128>(*x), static_cast<i128>(*y)));        \
    return symbolic;                                                                  \
  }
OPSMITH_SYM(sym_add, add, a + b)
OPSMITH_SYM(sym_sub, sub, a - b)
OPSMITH_SYM(sym_mul, mul, a * b)
OPSMITH_SYM(sym_floordiv, floordiv, a / b)
OPSMITH_SYM(sym_cdiv, cdiv, (a + b - 1) / b)
OPSMITH_SYM(sym_min, min, a.min(b))
OPSMITH_SYM(sym_max, max, a.max(b))
#undef OPSMITH_SYM
inline c10::SymInt sym_pow2(const c10::SymInt& n) {
  return of(pow2(static_cast<i128>(n.guard_int(__FILE__, __LINE__))));
}
#endif

// -- values that leave their range --------------------------------------------------------------------------

inline void check_int_range(const char* op, const char* name, i128 v, i128 lo, i128 hi, const char* ctype,
                            const char* hint = "") {
  if (v < lo || v > hi)
    input_error(op, name, "a value in [" + str(lo) + ", " + str(hi) + "] for the kernel's " + ctype + " parameter",
                str(v), hint);
}

[[noreturn]] inline void extent_error(const char* op, const char* name, const char* what, i128 value, int64_t limit) {
  input_error(op, name, std::string(what) + " at most " + std::to_string(limit) +
              ": the launch covers it with more than 2^31 threads along one axis, and with 32-bit indexing "
              "(index_dtype='int32') the top thread index wraps", str(value), kFix64);
}

// The grid of a launch along one axis: 1 to 2^31 - 1 blocks along x, 1 to 65535 along y and z. ``least`` 0:
// every output holds its init, and an empty grid launches nothing (Launch.empty_ok).
inline int64_t check_grid(const char* op, const char* name, const char* what, int axis, i128 v, int least = 1) {
  const int64_t most = axis == 0 ? 2147483647 : 65535;
  if (v < least || v > most)
    input_error(op, name, "a launch of " + std::to_string(least) + " to " + std::to_string(most) + " blocks along " +
                "xyz"[axis] +
                " (" + what + ")", str(v), v > most ?
                "Fix: launch fewer blocks per axis (a larger block, or a persistent grid such as min(..., sm_count * 8)), "
                "or pass inputs the grid expression covers." :
                "Fix: pass inputs for which the grid expression is positive, or correct it.");
  return static_cast<int64_t>(v);
}

// The dynamic shared memory a size expression gives one block: 0 to the 227 KiB sm_90 lets a block opt into.
inline int64_t check_smem(const char* op, const char* name, const char* what, i128 v) {
  if (v < 0 || v > SMEM_MAX_VALUE)
    input_error(op, name, std::string("dynamic shared memory of 0 to SMEM_MAX_VALUE bytes per block (") + what + ")",
                str(v), "Fix: pass inputs the kernel's shared memory can hold (a smaller size along the axes the "
                "expression reads), or a config that needs less.");
  return static_cast<int64_t>(v);
}

}  // namespace opsmith
""".replace("SMEM_MAX_VALUE", str(SMEM_MAX))
