"""How an operator acquires its derivative in the PyTorch harness.

Modes (request attr "autograd", else the harness's --autograd flag):
  builtin          torch's own derivative formulas (derivatives.yaml)
  custom_function  a hand-written torch.autograd.Function (tanh, sigmoid, exp:
                   derivative from the saved output, as kernels do)
  custom_detached  the same Function with the classic double-backward bug: its
                   backward uses the saved output detached, so the first
                   derivative is right and the second loses every term through y
  aot              AOTAutograd (functorch.compile.aot_function): the backward is
                   a traced FX graph generated from the forward
  inplace_view     legal in-place: the op's in-place variant (exp_, tanh_ ...) on a
                   view of a non-leaf copy of the input; autograd rebases the view
                   (CopySlices) and the gradient must be the op's own
  inplace_saved    after the forward, one element of the (non-leaf) input and of
                   the output is modified in place through a view. Autograd must
                   refuse the backward exactly for ops that saved one of them
                   (tanh saves its output, sin its input): error code
                   "inplace_modified". Ops that saved neither (neg, add) must
                   still give the right gradient.
Double backward: hvp() = d/dx sum_i <VJP(x, gy)_i, v_i> through create_graph=True
(the gradient of the inputs a double backward gives for cotangents v_i of the
first-order gradients; exec protocol 2, docs/EXEC_PROTOCOL.md).
"""

import torch


class HarnessError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


MODES = ("builtin", "custom_function", "custom_detached", "aot", "inplace_view",
         "inplace_saved")


class _FromOutput(torch.autograd.Function):
    """y = f(x) with dy/dx written by hand from the saved output y."""

    @staticmethod
    def forward(ctx, x, name, detached=False):
        y = {"tanh": torch.tanh, "sigmoid": torch.sigmoid, "exp": torch.exp}[name](x)
        ctx.save_for_backward(y)
        ctx.name = name
        ctx.detached = detached
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        if ctx.detached:  # autograd no longer sees that y depends on x
            y = y.detach()
        if ctx.name == "tanh":
            return g * (1 - y * y), None, None
        if ctx.name == "sigmoid":
            return g * y * (1 - y), None, None
        return g * y, None, None


# Ops with an in-place method of the same name + "_" on a tensor.
INPLACE = {"neg", "abs", "sqrt", "rsqrt", "reciprocal", "exp", "exp2", "expm1", "log",
           "log2", "log1p", "sin", "cos", "tanh", "sigmoid", "erf", "relu"}


def _touch(t):
    """Bump t's version counter through a view without changing its values."""
    t.view(-1)[:1].mul_(1.0)


def make_fn(how, op, attrs, forward_op):
    """The differentiable function of the op's inputs for mode how."""

    def plain(*xs):
        return forward_op(op, attrs, list(xs), None)

    if how == "builtin":
        return plain
    if how in ("custom_function", "custom_detached"):
        if op not in ("tanh", "sigmoid", "exp"):
            raise HarnessError("unsupported", f"autograd '{how}' covers tanh, sigmoid "
                                              f"and exp, not '{op}'")
        return lambda x: _FromOutput.apply(x, op, how == "custom_detached")
    if how == "aot":
        from functorch.compile import aot_function, make_boxed_func

        def nop(fx_module, _inputs):
            return make_boxed_func(fx_module.forward)

        return aot_function(plain, fw_compiler=nop, bw_compiler=nop)
    if how == "inplace_view":
        if op not in INPLACE:
            raise HarnessError("unsupported", f"autograd 'inplace_view' needs an in-place "
                                              f"variant; '{op}' has none here")

        def inplace(x):
            z = x.clone()
            view = z.view(z.shape)  # a view sharing z's storage and version counter
            getattr(view, op + "_")()
            return z
        return inplace
    if how == "inplace_saved":
        def modified(*xs):
            xs = [x.clone() if x.is_floating_point() else x for x in xs]
            y = plain(*xs)
            for x in xs:
                if x.is_floating_point():
                    _touch(x)
            _touch(y)
            return y
        return modified
    raise HarnessError("invalid", f"autograd mode '{how}' is not one of {', '.join(MODES)}")


def _leaves(xs):
    return [x.detach().clone().requires_grad_(x.is_floating_point()) for x in xs]


def _classify(e):
    text = str(e)
    if "modified by an inplace operation" in text:
        return HarnessError("inplace_modified", text.splitlines()[0])
    return None


def vjp(how, op, attrs, xs, grad_out, forward_op):
    """One gradient per floating-point input: (dy/dx_i)^T grad_out."""
    fn = make_fn(how, op, attrs, forward_op)
    leaves = _leaves(xs)
    try:
        y = fn(*leaves)
        diff = [x for x in leaves if x.requires_grad]
        grads = torch.autograd.grad(y, diff, grad_out, allow_unused=True)
    except RuntimeError as e:
        raise (_classify(e) or e) from e
    return [g if g is not None else torch.zeros_like(x) for g, x in zip(grads, diff)]


def hvp(how, op, attrs, xs, grad_out, vs, forward_op):
    """Second order: d/dx_k sum_i <g_i, v_i> for each floating-point input k, where
    g = VJP(x, grad_out) is differentiated through create_graph=True. vs holds one
    direction per floating-point input, in order (missing ones are zero)."""
    fn = make_fn(how, op, attrs, forward_op)
    leaves = _leaves(xs)
    diff = [x for x in leaves if x.requires_grad]
    try:
        y = fn(*leaves)
        gs = torch.autograd.grad(y, diff, grad_out, create_graph=True, allow_unused=True)
        terms = [(g * v.to(g.dtype)).sum() for g, v in zip(gs, vs)
                 if g is not None and g.requires_grad]
        if not terms:  # no first-order gradient depends on x: the second order is 0
            return [torch.zeros_like(x) for x in diff]
        grads = torch.autograd.grad(sum(terms), diff, allow_unused=True)
    except RuntimeError as e:
        raise (_classify(e) or e) from e
    return [g if g is not None else torch.zeros_like(x) for g, x in zip(grads, diff)]
