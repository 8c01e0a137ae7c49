"""How an operator acquires its derivative in the PyTorch harness.

Modes (request attr "autograd", else the harness's --autograd flag):
  builtin          torch's own derivative formulas (derivatives.yaml)
  custom_function  a hand-written torch.autograd.Function (tanh, sigmoid, exp:
                   derivative from the saved output, as kernels do)
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
Double backward: hvp() = d<VJP(x, gy)_0, v>/dx through create_graph=True.
"""

import torch


class HarnessError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


MODES = ("builtin", "custom_function", "aot", "inplace_view", "inplace_saved")


class _FromOutput(torch.autograd.Function):
    """y = f(x) with dy/dx written by hand from the saved output y."""

    @staticmethod
    def forward(ctx, x, name):
        y = {"tanh": torch.tanh, "sigmoid": torch.sigmoid, "exp": torch.exp}[name](x)
        ctx.save_for_backward(y)
        ctx.name = name
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        if ctx.name == "tanh":
            return g * (1 - y * y), None
        if ctx.name == "sigmoid":
            return g * y * (1 - y), None
        return g * y, None


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
    if how == "custom_function":
        if op not in ("tanh", "sigmoid", "exp"):
            raise HarnessError("unsupported", f"autograd 'custom_function' covers tanh, sigmoid "
                                              f"and exp, not '{op}'")
        return lambda x: _FromOutput.apply(x, op)
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


def hvp(how, op, attrs, xs, grad_out, v, forward_op):
    """Second order: d<g_0, v>/dx_i for each floating-point input, where
    g_0 = VJP(x, grad_out) for input 0, differentiated through create_graph=True."""
    fn = make_fn(how, op, attrs, forward_op)
    leaves = _leaves(xs)
    diff = [x for x in leaves if x.requires_grad]
    try:
        y = fn(*leaves)
        (g0,) = torch.autograd.grad(y, diff[0], grad_out, create_graph=True)
        if not g0.requires_grad:  # the derivative of input 0 does not depend on x
            return [torch.zeros_like(x) for x in diff]
        grads = torch.autograd.grad(g0, diff, v, allow_unused=True)
    except RuntimeError as e:
        raise (_classify(e) or e) from e
    return [g if g is not None else torch.zeros_like(x) for g, x in zip(grads, diff)]
