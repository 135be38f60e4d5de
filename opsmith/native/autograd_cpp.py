"""The Autograd kernels of the native library: ``autograd.py``'s behaviour in C++.

An op without a backward: a call outside a graph goes below autograd to the op's kernel; a call whose
inputs require grad goes through a ``torch::autograd::Function`` whose backward refuses (an in-place op is
refused at once). An op whose backward is another opsmith op or a program of them: a Function that keeps
what ``Backward.args`` names and, in its backward, calls that op (or runs the steps the needed gradients
depend on) through the dispatcher, so the backward kernels are this library's too.
"""

from __future__ import annotations

from typing import Any

from ..declare.record import KernelRecord, TensorArg
from ..plan.backward_program import _Alloc, check_backward, program_of
from .codegen import cpp_signature
from .cpp import AT_DTYPE, comment, cpp_str, op_scope, sym_expr

__all__ = ["autograd_source", "caller_source"]

_NO_BACKWARD_FIX = ("declare backward=Backward(...) for the op, or detach its inputs (x.detach()) where no gradient "
                    "should flow.")  # fmt: skip


def _scoped(record: KernelRecord, lines: list[str]) -> str:
    ns, scope = op_scope(record.op_name)
    return "\n".join([f"namespace {ns} {{", f"namespace {scope} {{", *lines, f"}}  // namespace {scope}",
                      f"}}  // namespace {ns}"]) + "\n"  # fmt: skip


def _fn(record: KernelRecord, name: str) -> str:
    """The qualified name of one of an op's functions: ``ns_myns::op_relu::call``."""
    return "::".join((*op_scope(record.op_name), name))


def caller_source(record: KernelRecord) -> str:
    """``call``: the op through the dispatcher, with the C++ types its kernels were registered with."""
    ret, types, names = cpp_signature(record)
    params = ", ".join(f"{t} {a}" for t, a in zip(types, names, strict=True))
    return _scoped(record, [
        f"{ret} call({params}) {{",
        f"  static const auto handle = c10::Dispatcher::singleton().findSchemaOrThrow({cpp_str(record.op_name)}, \"\")",
        f"      .typed<{ret}({', '.join(types)})>();",
        f"  return handle.call({', '.join(names)});",
        "}",
    ])  # fmt: skip


def _as_list(record: KernelRecord, expr: str) -> str:
    """The outputs of a call as a variable_list."""
    n = len(record.outputs)
    # An optional output left out is an undefined tensor in the list (autograd gives it no edge).
    items = ", ".join(f"std::get<{k}>(r)" if o.when is None else f"std::get<{k}>(r).value_or(at::Tensor())"
                      for k, o in enumerate(record.outputs))  # fmt: skip
    if n == 1:
        return f"torch::autograd::variable_list{{({expr}).value_or(at::Tensor())}}" if record.outputs[0].when is not \
            None else f"torch::autograd::variable_list{{{expr}}}"  # fmt: skip
    return f"[&] {{ auto r = {expr}; return torch::autograd::variable_list{{{items}}}; }}()"


def _from_list(record: KernelRecord, var: str, names: list[str]) -> str:
    """The outputs returned from a variable_list; an optional output by its flag (``names``: the C++ locals of
    the op's arguments), since the list holds a placeholder where it was left out (``_placeholders``)."""
    items = [f"{var}[{k}]" if o.when is None else f"{names[o.when]} ? std::optional<at::Tensor>({var}[{k}]) : std::nullopt"
             for k, o in enumerate(record.outputs)]  # fmt: skip
    return f"return {items[0]};" if len(items) == 1 else f"return std::make_tuple({', '.join(items)});"


def _placeholders(record: KernelRecord, names: list[str]) -> list[str]:
    """A custom Function's outputs must all be tensors (autograd reads each one's metadata): an optional output
    left out stands as an empty tensor until ``_from_list`` returns None in its place."""
    if not record.optional_outputs:
        return []
    first = names[next(k for k, a in enumerate(record.inputs) if isinstance(a, TensorArg))]
    return [f"    for (at::Tensor& o : outs) if (!o.defined()) o = at::empty({{0}}, {first}.options());"]


def autograd_source(op: Any) -> str:
    """The Autograd-key kernel of ``op`` (and its Function), refusing or differentiating."""
    record: KernelRecord = op.record
    if getattr(op, "backward", None) is None:
        return _no_backward(record)
    return _backward(record, op.backward)


def _no_backward(r: KernelRecord) -> str:
    ret, types, names = cpp_signature(r)
    params = ", ".join(f"{t} {a}" for t, a in zip(types, names, strict=True))
    args = ", ".join(names)
    local = dict(zip((a.name for a in r.inputs), names, strict=True))  # declared name -> C++ local
    grad = " || ".join(f"({local[a.name]}.has_value() && {local[a.name]}->requires_grad())" if a.optional
                       else f"{local[a.name]}.requires_grad()" for a in r.tensor_inputs)  # fmt: skip
    L = []
    if not r.mutated:
        L += [
            "struct NoBackward : public torch::autograd::Function<NoBackward> {",
            f"  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, {params}) {{",
            "    at::AutoDispatchBelowADInplaceOrView below;",
            f"    torch::autograd::variable_list outs = {_as_list(r, f'call({args})')};",
            *_placeholders(r, names),
            "    for (const at::Tensor& o : outs)",
            "      if (o.defined() && !o.is_floating_point() && !o.is_complex()) ctx->mark_non_differentiable({o});",
            "    return outs;",
            "  }",
            "  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*, "
            "torch::autograd::variable_list) {",
            f"    opsmith::differentiation_error({cpp_str(r.op_name)}, \"a gradient reached it, but it declares no "
            f"backward.\", {cpp_str(_NO_BACKWARD_FIX)});",
            "  }",
            "};",
            "",
        ]  # fmt: skip
    L += [f"{ret} autograd_impl({params}) {{"]
    # None for a required tensor (an undefined tensor here) is refused first, as the kernel's first step refuses
    # it: requires_grad() of an undefined tensor throws torch's own error, and a Function given one aborts
    L += _refuse_missing(r, names)
    if r.mutated:
        L += [f"  if (at::GradMode::is_enabled() && ({grad}))",
              f"    opsmith::differentiation_error({cpp_str(r.op_name)}, \"it writes an input in place and declares no "
              "backward, and an input requires grad: gradients through it would be silently wrong.\", \"call it under "
              "torch.no_grad() (as optimizer steps do), or declare backward=.\");"]  # fmt: skip
        # The dispatcher's ADInplaceOrView step does this for built-in in-place ops: autograd then refuses a
        # backward that reads a tensor this op overwrote.
        L += [f"  if ({local[a.name]}.has_value()) torch::autograd::impl::bump_version(*{local[a.name]});" if a.optional
              else f"  torch::autograd::impl::bump_version({local[a.name]});" for a in r.mutated]  # fmt: skip
    else:
        L += [f"  if (at::GradMode::is_enabled() && ({grad})) {{",
              f"    auto outs = NoBackward::apply({args});",
              f"    {_from_list(r, 'outs', names)}",
              "  }"]  # fmt: skip
    L += ["  at::AutoDispatchBelowADInplaceOrView below;", f"  return call({args});", "}"]
    return _scoped(r, L)


def _backward(r: KernelRecord, backward: Any) -> str:
    ret, types, names = cpp_signature(r)
    sources, grad_of = check_backward(r.op_name, r, backward)
    program = program_of(r, backward)
    kept_in = sorted({k for kind, k in sources if kind == "in"})
    kept_out = sorted({k for kind, k in sources if kind == "out"})
    graded = {k for kind, k in sources if kind == "grad"}
    ctype = dict(zip(names, types, strict=True))
    params = ", ".join(f"{t} {a}" for t, a in zip(types, names, strict=True))
    tpos = {k: j for j, k in enumerate(k for k, a in enumerate(r.inputs) if isinstance(a, TensorArg))}
    optional = [k for k, a in enumerate(r.inputs) if isinstance(a, TensorArg) and a.optional]
    # An optional input passed as None is saved as an undefined tensor, and read back as std::nullopt.
    save_t = [f"{names[k]}.value_or(at::Tensor())" if k in optional else names[k]
              for k in kept_in if isinstance(r.inputs[k], TensorArg)] + [f"outs[{k}]" for k in kept_out]  # fmt: skip
    call = f"call({', '.join(names)})"
    fwd = [
        "    at::AutoDispatchBelowADInplaceOrView below;",
        f"    torch::autograd::variable_list outs = {_as_list(r, call)};",
        *_placeholders(r, names),
        f"    ctx->save_for_backward({{{', '.join(save_t)}}});",
    ]
    fwd += [
        f"    ctx->saved_data[{cpp_str(names[k])}] = {names[k]};"
        for k in kept_in
        if not isinstance(r.inputs[k], TensorArg)
    ]
    # Whether each optional input was given: an absent one has no autograd edge (torch's ExtractVariables), so
    # the edges of the inputs after it move down by one.
    fwd += [f"    ctx->saved_data[{cpp_str('given ' + names[k])}] = {names[k]}.has_value() && {names[k]}->defined();"
            for k in optional]  # fmt: skip
    nondiff = [f"outs[{k}]" for k, o in enumerate(r.outputs) if k not in graded and o.when is None]
    left = [f"outs[{k}]" for k, o in enumerate(r.outputs) if o.when is not None]  # optional: undefined when left out
    if left:  # one call: each call replaces the set
        fwd.append(f"    torch::autograd::variable_list nondiff{{{', '.join(nondiff)}}};")
        fwd += [f"    if ({o}.defined()) nondiff.push_back({o});" for o in left]
        fwd.append("    ctx->mark_non_differentiable(nondiff);")
    elif nondiff:  # outputs no gradient flows back through (a saved rstd, an index)
        fwd.append(f"    ctx->mark_non_differentiable({{{', '.join(nondiff)}}});")
    fwd.append("    return outs;")
    # Backward: what Backward.args names, in order (gradients are materialized zeros where unused).
    bwd = ["    const auto saved = ctx->get_saved_variables();"]
    slot = {("in", k): j for j, k in enumerate(k for k in kept_in if isinstance(r.inputs[k], TensorArg))}
    slot.update({("out", k): len(slot) + j for j, k in enumerate(kept_out)})
    values = []
    for kind, k in sources:
        if kind == "grad":
            values.append((f"grads[{k}].contiguous()", "at::Tensor"))
        elif kind == "in" and not isinstance(r.inputs[k], TensorArg):
            t = ctype[names[k]]
            get = {"double": "toDouble()", "bool": "toBool()", "int64_t": "toInt()", "c10::SymInt": "toSymInt()"}[t]
            values.append((f"ctx->saved_data[{cpp_str(names[k])}].{get}", t))
        elif kind == "in" and k in optional:
            s = f"saved[{slot[(kind, k)]}]"
            values.append(
                (f"{s}.defined() ? std::optional<at::Tensor>({s}) : std::nullopt", "std::optional<at::Tensor>")
            )
        else:
            values.append((f"saved[{slot[(kind, k)]}]", "at::Tensor"))
    if optional:
        bwd += _edges(r, names, tpos, optional)
        needs = ", ".join(f"edge[{tpos[k]}] >= 0 && ctx->needs_input_grad(edge[{tpos[k]}])" for k in grad_of)
    else:
        needs = ", ".join(f"ctx->needs_input_grad({tpos[k]})" for k in grad_of)
    bwd.append(f"    const std::array<bool, {len(grad_of)}> needs = {{{needs}}};")
    n_in = len(r.inputs)
    bwd.append(f"    torch::autograd::variable_list result({n_in});")
    bwd.append("    if (std::none_of(needs.begin(), needs.end(), [](bool b) { return b; })) return result;")
    if not backward.double_backward:
        bwd.append(f"    if (at::GradMode::is_enabled()) opsmith::differentiation_error({cpp_str(r.op_name)}, \"double "
                   "backward (create_graph=True) reached its backward, which is not declared differentiable.\", "
                   "\"declare Backward(..., double_backward=True) if fn is differentiable, or call backward without "
                   "create_graph.\");")  # fmt: skip
    env = {}
    for j, (name, (expr, t)) in enumerate(zip(backward.args, values, strict=True)):
        var = f"v{j}"
        bwd.append(f"    {'const ' if t != 'at::Tensor' else ''}{t} {var} = {expr};  {comment(name)}")
        env[name] = (var, t)
    if program is None:
        got = _call(backward.fn.record, [env[a] for a in backward.args])
        bwd.append(f"    auto got = {_as_list(backward.fn.record, got)};")
        for j, k in enumerate(grad_of):
            bwd.append(f"    if (needs[{j}]) result[{k}] = got[{j}];")
    else:
        bwd += _program_lines(program, env, backward.args)
        for j, (k, name) in enumerate(zip(grad_of, program.returns, strict=True)):
            bwd.append(f"    if (needs[{j}]) result[{k}] = {env[name][0]};")
    bwd.append("    return result;")
    L = [
        "struct Function : public torch::autograd::Function<Function> {",
        f"  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, {params}) {{",
        *fwd,
        "  }",
        "  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, "
        "torch::autograd::variable_list grads) {",
        *bwd,
        "  }",
        "};",
        "",
        f"{ret} autograd_impl({params}) {{",
        *_refuse_missing(r, names),
        f"  auto outs = Function::apply({', '.join(names)});",
        f"  {_from_list(r, 'outs', names)}",
        "}",
    ]  # fmt: skip
    return _scoped(r, L)


def _refuse_missing(r: KernelRecord, names: list[str]) -> list[str]:
    """None for a required tensor (an undefined tensor here) refused first, as the kernel's first step refuses it:
    requires_grad() of an undefined tensor throws torch's own error, and a Function given one fails reading its
    device ("tensor does not have a device")."""
    local = dict(zip((a.name for a in r.inputs), names, strict=True))
    return [f"  if (!{local[a.name]}.defined()) opsmith::missing_error({cpp_str(r.op_name)}, {cpp_str(a.name)});"
            for a in r.tensor_inputs if not a.optional]  # fmt: skip


def _edges(r: KernelRecord, names: list[str], tpos: dict[int, int], optional: list[int]) -> list[str]:
    """``edge[j]``: tensor input j's autograd edge, -1 for an optional input the call passed as None."""
    L = [f"    std::array<int64_t, {len(tpos)}> edge{{}};", "    int64_t next_edge = 0;"]
    for k, j in tpos.items():
        if k in optional:
            given = f"ctx->saved_data[{cpp_str('given ' + names[k])}].toBool()"
            L.append(f"    edge[{j}] = {given} ? next_edge++ : -1;  {comment(r.inputs[k].name)}")
        else:
            L.append(f"    edge[{j}] = next_edge++;")
    return L


def _convert(value: tuple[str, str], want: str) -> str:
    """A value of C++ type ``value[1]`` passed where ``want`` is taken."""
    expr, have = value
    if have == "std::optional<at::Tensor>":  # an optional input: as it is, or undefined where a tensor is taken
        return f"({expr})" if "optional" in want else f"({expr}).value_or(at::Tensor())"
    if have == want or want == "const at::Tensor&":
        return expr
    if have == "c10::SymInt" and want == "int64_t":
        return f"{expr}.expect_int()"
    if have == "int64_t" and want == "c10::SymInt":
        return f"c10::SymInt({expr})"
    return f"static_cast<{want}>({expr})"


def _call(record: KernelRecord, args: list[tuple[str, str]]) -> str:
    _, types, _ = cpp_signature(record)
    return f"{_fn(record, 'call')}({', '.join(_convert(a, t) for a, t in zip(args, types, strict=True))})"


def _program_lines(program: Any, env: dict[str, tuple[str, str]], args: Any) -> list[str]:
    """The steps the needed gradients depend on (``Program.plan`` for every combination, as a table)."""
    n = len(program.returns)
    masks = [tuple(bool(m >> j & 1) for j in range(n)) for m in range(1 << n)]
    table = [[k in program.plan(m) for k in range(len(program.items))] for m in masks]
    rows = ", ".join("{" + ", ".join("true" if v else "false" for v in row) + "}" for row in table)
    L = [f"    static constexpr bool plan[{1 << n}][{len(program.items)}] = {{{rows}}};",
         "    int mask = 0;",
         f"    for (int j = 0; j < {n}; ++j) mask |= int(needs[j]) << j;",
         "    const bool* run = plan[mask];"]  # fmt: skip
    first = next(var for name, (var, t) in env.items() if t == "at::Tensor")
    for k, it in enumerate(program.items):
        if isinstance(it, _Alloc):
            var = f"b{k}"
            env[it.name] = (var, "at::Tensor")
            L.append(f"    at::Tensor {var};  {comment(it.name)}")
            L.append(f"    if (run[{k}]) {var} = {_allocate(it, env, first)};")
            continue
        rec = it.op.record
        outs = [f"s{k}_{j}" for j in range(len(it.outputs))]
        for o, name in zip(outs, it.outputs, strict=True):
            L.append(f"    at::Tensor {o};  {comment(name)}")
        call = _call(rec, [env[a] for a in it.args])
        if not outs:
            L.append(f"    if (run[{k}]) {call};")
        elif len(outs) == 1:
            L.append(f"    if (run[{k}]) {outs[0]} = {call};")
        else:
            L.append(f"    if (run[{k}]) std::tie({', '.join(outs)}) = {call};")
        for o, name in zip(outs, it.outputs, strict=True):
            env[name] = (o, "at::Tensor")
    return L


def _allocate(a: _Alloc, env: dict[str, tuple[str, str]], first: str) -> str:
    """backward_program._allocate in C++: symbolic sizes stay symbolic (torch.compile traces backwards)."""
    if a.like is not None:
        return f"at::empty_like({env[a.like][0]}, at::MemoryFormat::Contiguous)"
    kind, _, ref = a.dtype.partition(":")
    if kind == "fixed":
        import torch

        dt = AT_DTYPE[getattr(torch, ref)]
    elif kind == "like":
        dt = f"{env[ref][0]}.scalar_type()"
    else:
        dt = f"opsmith::accumulate_dtype({env[ref][0]}.scalar_type())"
    refs = {name: var for name, (var, _) in env.items()}
    refs["sm_count"] = f"opsmith::sm_count({first}.is_cuda() ? {first}.get_device() : -1)"
    sizes = ", ".join(sym_expr(e, refs) for e in a.shape)
    return f"at::empty_symint({{{sizes}}}, {first}.options().dtype({dt}))"
