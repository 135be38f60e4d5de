"""Run under TRITON_INTERPRET=1 by tests/test_optional_outputs_cpu.py: llm.c's fused classifier in Triton with its
probabilities and gradient as optional outputs (issue 60, item 5), against PyTorch, in every form a call can ask
for them: positionally, by name, left at the default; eager, fake, torch.compile(fullgraph=True), torch.export
and autograd through the loss. Prints one line per form checked."""

import torch
from round_four_ops import optional_classifier
from torch._subclasses.fake_tensor import FakeTensorMode

NS = "t_optout_interp"
torch.manual_seed(0)
op = optional_classifier(NS)
op_bwd = optional_classifier(NS, backward=True)


def want(x, t, dloss):
    p = torch.softmax(x, -1)
    return (torch.nn.functional.cross_entropy(x, t, reduction="none"), p,
            (p - torch.nn.functional.one_hot(t, x.shape[-1])) * dloss)  # fmt: skip


def agree(got, asked, x, t, dloss, form):
    w = want(x, t, dloss)
    torch.testing.assert_close(got[0], w[0], atol=1e-5, rtol=1e-5)
    for k, (g, a) in enumerate(zip(got[1:], asked, strict=True)):
        assert (g is None) == (not a), f"{form}: output {k + 1} is {g!r}, asked: {a}"
        if a:
            torch.testing.assert_close(g, w[k + 1], atol=1e-5, rtol=1e-5)


x, t = torch.randn(5, 37), torch.randint(0, 37, (5,))
for rp in (False, True):
    for rd in (False, True):
        agree(op(x, t, 0.5, rp, rd), (rp, rd), x, t, 0.5, "positional")
        agree(op(x, t, 0.5, return_probs=rp, return_dlogits=rd), (rp, rd), x, t, 0.5, "by name")
agree(op(x, t, 0.5), (False, False), x, t, 0.5, "default")
agree(op(x, t, 2.0, return_dlogits=True), (False, True), x, t, 2.0, "one by name")
print("eager: every combination, positional, by name and default")

with FakeTensorMode():
    xf, tf = torch.empty(5, 37), torch.empty(5, dtype=torch.int64)
    shapes = [[None if o is None else tuple(o.shape) for o in op(xf, tf, 0.5, rp, rd)]
              for rp in (False, True) for rd in (False, True)]  # fmt: skip
assert shapes == [[(5,), None, None], [(5,), None, (5, 37)], [(5,), (5, 37), None], [(5,), (5, 37), (5, 37)]], shapes
print("fake: None where left out")

for rp, rd in ((False, True), (True, False)):
    f = torch.compile(lambda x, t, rp=rp, rd=rd: op(x, t, 0.5, return_probs=rp, return_dlogits=rd), fullgraph=True,
                      backend="aot_eager")  # fmt: skip
    agree(f(x, t), (rp, rd), x, t, 0.5, "compiled")
print("torch.compile(fullgraph=True): both forms")


class Loss(torch.nn.Module):
    def forward(self, x, t):
        return op(x, t, 0.5, False, True)


ep = torch.export.export(Loss(), (x, t))
assert "optional_classifier.default(x, t, 0.5, False, True)" in ep.graph_module.code, ep.graph_module.code
agree(ep.module()(x, t), (False, True), x, t, 0.5, "exported")
print("torch.export: the exported program returns None in its place")

xg = x.clone().requires_grad_()
loss, probs, dlogits = op_bwd(xg, t, 1.0, True, True)
assert not probs.requires_grad and not dlogits.requires_grad, "an optional output took a gradient"
loss.sum().backward()
xr = x.clone().requires_grad_()
torch.nn.functional.cross_entropy(xr, t, reduction="sum").backward()
torch.testing.assert_close(xg.grad, xr.grad, atol=1e-5, rtol=1e-5)
torch.testing.assert_close(dlogits, xr.grad, atol=1e-5, rtol=1e-5)  # the kernel's own gradient agrees
xg.grad = None
op_bwd(xg, t, 1.0)[0].sum().backward()
torch.testing.assert_close(xg.grad, xr.grad, atol=1e-5, rtol=1e-5)
print("autograd: the loss differentiates, asked or not; the optional outputs take no gradient")
