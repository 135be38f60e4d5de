"""Error classes. Every message is a full sentence that names the op or field and says the fix.

Registration-time mistakes subclass ``ValueError`` (the seed API promises ``ValueError`` there); call-time
input mistakes also subclass ``ValueError`` / ``TypeError`` so generic handlers keep working.
"""

from __future__ import annotations

__all__ = [
    "CompileError",
    "DeclarationWarning",
    "DifferentiationError",
    "InputError",
    "LaunchError",
    "OpsmithError",
    "RegistrationError",
    "ShardingError",
    "ShardingWarning",
    "SpecError",
    "ToolchainError",
]


class OpsmithError(Exception):
    """Base class of every error opsmith raises on purpose."""


class SpecError(OpsmithError, ValueError):
    """A ``KernelSpec`` or registration argument is wrong. Raised at registration, before any launch."""

    def __init__(self, op_name: str, field: str, problem: str, fix: str) -> None:
        self.op_name, self.field, self.problem, self.fix = op_name, field, problem, fix
        super().__init__(f"{op_name}: {field}: {problem} Fix: {fix}")


class RegistrationError(SpecError):
    """The op name is already registered with a different declaration."""


class CompileError(OpsmithError, ValueError):
    """The kernel did not compile. Carries the compiler's log and the offending source lines."""

    def __init__(self, op_name: str, kernel_name: str, log: str, excerpt: str, fix: str = "") -> None:
        self.op_name, self.kernel_name, self.log, self.excerpt = op_name, kernel_name, log, excerpt
        msg = f"{op_name}: kernel '{kernel_name}' failed to compile.\n--- compiler log ---\n{log.rstrip()}"
        if excerpt:
            msg += f"\n--- source ---\n{excerpt.rstrip()}"
        msg += f"\n{fix or 'Fix the source at the lines shown, then register again.'}"
        super().__init__(msg)


class InputError(OpsmithError, ValueError):
    """A call got a tensor or scalar the op's declaration does not allow. Raised before any launch."""

    def __init__(self, op_name: str, arg: str, expected: str, got: str, fix: str = "") -> None:
        self.op_name, self.arg, self.expected, self.got = op_name, arg, expected, got
        msg = f"{op_name}: argument '{arg}': expected {expected}, got {got}."
        if fix:
            msg += f" {fix}"
        super().__init__(msg)


class ToolchainError(OpsmithError, RuntimeError):
    """A tool opsmith needs is missing or unusable here (the CUDA driver, a C++ compiler, torch's headers),
    as opposed to a mistake in the kernel or the declaration."""


class LaunchError(OpsmithError, RuntimeError):
    """The CUDA driver refused to load or launch a kernel."""


class DifferentiationError(OpsmithError, RuntimeError):
    """Autograd reached an op (or its backward) that declares no way to differentiate it."""

    def __init__(self, op_name: str, problem: str, fix: str) -> None:
        self.op_name = op_name
        super().__init__(f"{op_name}: {problem} Fix: {fix}")


class ShardingError(OpsmithError, NotImplementedError):
    """DTensor inputs reached an op whose sharding is neither derived from its declaration nor given with
    ``sharding=``. A ``NotImplementedError``, as DTensor's own error for an op without a rule is."""

    def __init__(self, op_name: str, problem: str, fix: str) -> None:
        self.op_name = op_name
        super().__init__(f"{op_name}: {problem} Fix: {fix}")


class ShardingWarning(UserWarning):
    """DTensor inputs reached an op whose derived rule could shard an axis the declaration cannot justify (an
    input tied to nothing beside a size taken from a sharded axis): it runs replicated there; the message says
    how to settle it (``opsmith check``'s sharding row, then ``sharding="derive"``)."""


class DeclarationWarning(UserWarning):
    """At registration, the declaration disagrees with what the kernel's body does (``opsmith/analysis``): a
    declared stride the kernel never reads, a dimension named once that nothing can tell the kernel, one
    tensor's stride addressing another. The message says what opsmith does about it and the declaration to
    write instead; ``silence=`` on the declaration names what the user has judged."""
