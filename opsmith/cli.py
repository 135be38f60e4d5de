"""The ``opsmith`` command line.

    opsmith check MODULE:NAME [--sanitize]      NAME: a CheckCase, a list of them, or a function returning either
    opsmith build MODULE:NAME -o libops.so      NAME: an op, a list of ops (or CheckCases), or a function
                                                returning them (it may run the ops first: see opsmith.native)
    opsmith tuning export|import FILE [--op ns::name]   move tuning decisions between machines as JSON
    opsmith serving SCRIPT [ARGS...]            run a Python script, then print which path served each op's
                                                calls (native or Python, and why) and the libraries built

Exit status: 0 on success (every check passed, the library built), 1 when a check failed or a build was
refused or a decision rejected, 2 for a mistake in the command (a bad target, file, option or value), with a
message that says the fix.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .checking.targets import TargetError, as_list, load

__all__ = ["load_cases", "load_ops", "main", "parser"]


class UsageError(Exception):
    """An option's value is wrong; the message says the fix (exit status 2)."""


def load_cases(target: str) -> list:
    """The CheckCases named by ``MODULE:NAME`` (``checking.case.load_cases``; imported when used: torch is)."""
    from .checking.case import load_cases as cases

    return cases(target)


def _check(args: argparse.Namespace) -> int:
    from .checking.harness import CHECKS

    only = [c for c in args.only.split(",") if c] if args.only else None
    unknown = sorted(set(only or ()) - set(CHECKS))
    if unknown:
        raise UsageError(f"--only: unknown checks {unknown}. Fix: choose from {', '.join(CHECKS)}.")
    device = _device(args.device)
    cases = load_cases(args.target)
    if args.sanitize:
        from .checking.sanitize import sanitize

        report = sanitize(args.target, tools=args.tools.split(","), examples=min(args.examples, 3))
        print(report.table())
        return 0 if report.ok else 1
    from .checking.harness import check

    failed = False
    for k, case in enumerate(cases):  # the rows that run the kernel go to spawned children, which find it by k
        report = check(case, device=device, examples=args.examples, compile_backend=args.backend, only=only,
                       origin=(args.target, k))  # fmt: skip
        print(report.table(), end="\n\n", flush=True)
        failed |= not report.ok
    return 1 if failed else 0


def _device(text: str | None) -> str | None:
    """``--device``: cpu, cuda or cuda:N, and a CUDA device only where there is one."""
    if text is None:
        return None
    import torch

    try:
        dev = torch.device(text)
    except RuntimeError:
        raise UsageError(f"--device: {text!r} is not a device. Fix: pass cuda, cuda:1 or cpu.") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise UsageError(f"--device {text}: this machine has no CUDA device (torch.cuda.is_available() is "
                             "False). Fix: run on a GPU machine, or pass --device cpu.")  # fmt: skip
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise UsageError(f"--device {text}: this machine has {torch.cuda.device_count()} CUDA devices. Fix: "
                             "pass one of them.")  # fmt: skip
    elif dev.type != "cpu":
        raise UsageError(f"--device: {text!r} is neither a CUDA device nor cpu. Fix: pass cuda, cuda:1 or cpu.")
    return text


def load_ops(target: str) -> list:
    """The ops named by ``MODULE:NAME`` (an op, CheckCases, a list of either, or a function returning them)."""
    from .checking.harness import CheckCase
    from .torchlib.registration import Op

    items = as_list(load(target, "an op", "mypkg.ops:OPS", Op))
    ops = [i.op if isinstance(i, CheckCase) else i for i in items]
    if not ops or not all(isinstance(o, Op) for o in ops):
        raise TargetError(f"'{target}' is not an opsmith op, a list of them or a function returning them. Fix: "
                          "point at the ops opsmith.cuda_kernel_op / ptx_op / triton_op / cute_op returned.")  # fmt: skip
    return ops


def _build(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .errors import SpecError, ToolchainError
    from .flavors.cuda_cpp import arch_problem
    from .native import NativeBuildError, build

    out = Path(args.output)
    if not out.parent.is_dir():
        raise UsageError(f"-o {args.output}: the directory {str(out.parent)!r} does not exist. Fix: create it first "
                         f"(mkdir -p {out.parent}).")  # fmt: skip
    for a in args.arch or ():
        why = arch_problem(a)
        if why:
            raise UsageError(f"--arch: {why}. Fix: pass an architecture like sm_90 (repeat --arch for several).")
    dtypes = _dtypes(args.dtypes)
    ops = load_ops(args.target)
    try:
        report = build(ops, out, archs=args.arch or None, dtypes=dtypes, object_only=args.object_only)
    except NativeBuildError as e:
        print(e, file=sys.stderr)
        return 1
    except (SpecError, ToolchainError) as e:
        print(e, file=sys.stderr)
        return 2 if isinstance(e, SpecError) else 1
    print(report.summary())
    for op, n in report.kernels.items():
        print(f"  {op}: {n} kernel{'s' * (n != 1)}")
    for line in report.skipped:
        print(f"  skipped (did not compile): {line}")
    return 0


def _dtypes(text: str) -> list:
    import torch

    out = []
    for name in (d.strip() for d in text.split(",") if d.strip()):
        dt = getattr(torch, name.removeprefix("torch."), None)
        if not isinstance(dt, torch.dtype):
            raise UsageError(
                f"--dtypes: {name!r} is not a torch dtype. Fix: name dtypes like float32,float16,bfloat16."
            )
        out.append(dt)
    return out


def parser() -> argparse.ArgumentParser:
    """The command line's parser (docs/cli.md documents every command and option it has)."""
    from ._version import __version__

    p = argparse.ArgumentParser(prog="opsmith", description="opsmith: kernels as first-class PyTorch ops.")
    p.add_argument("--version", action="version", version=f"opsmith {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="prove an op correct, safe and compile-ready",
                       description="Run opsmith's conformance checks on MODULE:NAME (a CheckCase or a list).")  # fmt: skip
    c.add_argument("target", help="MODULE:NAME of a CheckCase, a list of them, or a function returning them")
    c.add_argument("--device", default=None, help="cuda (default when available), cuda:1, cpu")
    c.add_argument("--examples", type=int, default=25, help="hypothesis draws for the numerics check")
    c.add_argument("--backend", default="inductor", help="torch.compile backend for the compile checks")
    c.add_argument("--only", default="", help="comma-separated checks to run (default: all)")
    c.add_argument(
        "--sanitize",
        action="store_true",
        help="run the eager GPU checks under compute-sanitizer memcheck, racecheck, initcheck, synccheck",
    )
    c.add_argument("--tools", default="memcheck,racecheck,initcheck,synccheck", help="sanitizer tools (--sanitize)")
    b = sub.add_parser("build", help="compile ops into a native library (no Python needed to use it)",
                       description="Generate and compile a C++ op library serving MODULE:NAME's ops.")  # fmt: skip
    b.add_argument("target", help="MODULE:NAME of an op, a list of ops or CheckCases, or a function returning them")
    b.add_argument("-o", "--output", required=True, help="the library to write, e.g. libmyops.so")
    b.add_argument("--arch", action="append", help="GPU architecture to embed (repeatable; default: this GPU's)")
    b.add_argument("--dtypes", default="float32,float16,bfloat16", help="dtypes embedded for dtype-generic ops")
    b.add_argument("--object-only", action="store_true", help="compile to an object file, do not link")
    t = sub.add_parser("tuning", help="export or import tuning decisions (tune once, ship the JSON)",
                       description="Move tuning decisions between machines as one JSON file.")  # fmt: skip
    t.add_argument("action", choices=("export", "import"))
    t.add_argument("file", help="the decisions file to write (export) or read (import)")
    t.add_argument("--op", action="append", help="export only this op (ns::name; repeatable)")
    sv = sub.add_parser("serving", help="run a script, then show what served each op's calls",
                        description="Run SCRIPT (with ARGS) as __main__, then print every op's serving table: calls "
                        "the native library ran, calls the Python path ran and why, the libraries built.")  # fmt: skip
    sv.add_argument("script", help="the Python script to run")
    sv.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return {"check": _check, "build": _build, "tuning": _tuning, "serving": _serving}[args.command](args)
    except (TargetError, UsageError) as e:
        print(f"opsmith {args.command}: {e}", file=sys.stderr)
        return 2


def _serving(args: argparse.Namespace) -> int:
    import runpy
    from pathlib import Path

    if not Path(args.script).is_file():
        raise UsageError(f"{args.script!r} is not a file. Fix: pass the path of the Python script to run.")
    sys.argv = [args.script, *args.args]
    sys.path.insert(0, str(Path(args.script).resolve().parent))
    code = 0
    try:
        runpy.run_path(args.script, run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        from .inductor.choice import choices_table
        from .native.serving import table

        print(f"\nopsmith serving: {args.script}\n{table()}", file=sys.stderr)
        compiled = choices_table()
        if compiled:
            print(f"\nunder torch.compile (compile='auto' and 'reference' ops):\n{compiled}", file=sys.stderr)
    return code


def _tuning(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .tuning.decisions import export_decisions, import_decisions, known_ops

    if args.action == "export":
        if not Path(args.file).resolve().parent.is_dir():
            raise UsageError(f"{args.file}: the directory {str(Path(args.file).parent)!r} does not exist. Fix: "
                             "create it first, or export elsewhere.")  # fmt: skip
        if args.op:
            have = known_ops()
            missing = [o for o in args.op if o not in have]
            if missing:
                raise UsageError(f"--op: no tuning decisions for {missing} in this machine's cache (it holds "
                                 f"decisions for {sorted(have) or 'no op'}). Fix: run the op here first (a call "
                                 "tunes it), or name one of those.")  # fmt: skip
        n = export_decisions(args.file, args.op)
        print(f"exported {n} tuning decisions to {args.file}")
        return 0
    try:
        report = import_decisions(args.file)
    except ValueError as e:
        raise UsageError(str(e)) from None
    print(report.summary())
    return 1 if report.rejected else 0


if __name__ == "__main__":
    sys.exit(main())
