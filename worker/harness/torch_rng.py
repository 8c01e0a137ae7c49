"""The device's generators for the "rng" request of the exec protocol
(docs/EXEC_PROTOCOL.md "Optional requests", docs/JOBS.md "RNG jobs").

The harness only draws; the worker judges (bit equality where PyTorch promises
reproducibility, no shared window where streams must be disjoint). Generator 0
is the device's default generator, the one dropout and torch.rand use
(torch.manual_seed, torch.get_rng_state); generators 1.. are torch.Generator
objects on the device. `streams` is protocol 1's fixed request (no "action")."""

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

# --rng-fault: a misuse for the worker's RNG checks to catch.
#   no_preserve    torch.utils.checkpoint(..., preserve_rng_state=False): the
#                  backward's recomputation draws new numbers
#   restore_reuse  set_state reseeds the generator with its seed instead of
#                  loading the state: the stream restarts, numbers are reused
FAULTS = ("none", "no_preserve", "restore_reuse")
FAULT = "none"
MAX_GENS = 64  # NV_RNG_MAX_GENS of include/numval/backend.h
_gens = {}   # index -> torch.Generator (index >= 1)
_seeds = {}  # index -> the seed it was last seeded with (for restore_reuse)


def _state_fns(device):
    dev = torch.device(device)
    if dev.type == "cpu":
        return torch.get_rng_state, torch.set_rng_state
    if dev.type == "cuda":
        return (lambda: torch.cuda.get_rng_state(dev)), (lambda s: torch.cuda.set_rng_state(s, dev))
    mod = getattr(torch, dev.type, None)  # a privateuseone backend module, if it has one
    if mod is not None and hasattr(mod, "get_rng_state"):
        return mod.get_rng_state, mod.set_rng_state
    raise RuntimeError(f"no RNG state functions for device type '{dev.type}'")


def streams(device, seed, n, p):
    """Named float32 tensors:
    first          torch.manual_seed(seed); rand(n)
    second         the next rand(n) after first (the stream advanced)
    reseeded       torch.manual_seed(seed); rand(n)             == first
    restored       state saved after first, second drawn, state restored,
                   rand(n)                                          == second
    dropout_a/b    manual_seed(seed); dropout(ones(n), p) twice    a == b
    dropout_state  state saved before dropout_a, restored, dropout  == dropout_a
    """
    get_state, set_state = _state_fns(device)
    out = {}
    torch.manual_seed(seed)
    out["first"] = torch.rand(n, device=device)
    saved = get_state()
    out["second"] = torch.rand(n, device=device)
    torch.manual_seed(seed)
    out["reseeded"] = torch.rand(n, device=device)
    set_state(saved)
    out["restored"] = torch.rand(n, device=device)
    ones = torch.ones(n, device=device)
    torch.manual_seed(seed)
    before = get_state()
    out["dropout_a"] = torch.nn.functional.dropout(ones, p=p, training=True)
    torch.manual_seed(seed)
    out["dropout_b"] = torch.nn.functional.dropout(ones, p=p, training=True)
    set_state(before)
    out["dropout_state"] = torch.nn.functional.dropout(ones, p=p, training=True)
    return out


class RngError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def _gen(device, g):
    if not 0 <= g < MAX_GENS:
        raise RngError("invalid", f"generator {g} outside 0..{MAX_GENS - 1}")
    if g == 0:
        return None  # the default generator
    if g not in _gens:
        _gens[g] = torch.Generator(device=device)
    return _gens[g]


def _seed(device, g, seed):
    gen = _gen(device, g)
    if gen is None:
        torch.manual_seed(seed)
    else:
        gen.manual_seed(seed)
    _seeds[g] = seed


def _dropout_then_more(device, p, n):
    """The checkpointed layer, the layers after it, the backward (which
    recomputes the forward): (y, dL/dx, the uniforms between)."""
    x = torch.ones(n, device=device, requires_grad=True)
    y = checkpoint(lambda t: F.dropout(t, p=p, training=True), x,
                   preserve_rng_state=FAULT != "no_preserve", use_reentrant=True)
    between = torch.rand(n, device=device)
    y.sum().backward()
    return y.detach(), x.grad.detach(), between


def action(device, msg, tensors):
    """(names, tensors) of the reply to an rng request with an "action"."""
    act, g = msg["action"], int(msg.get("gen", 0))
    n, p = int(msg.get("n", 0)), float(msg.get("p", 0.0))
    get_state, set_state = _state_fns(device)
    if not 0 <= n <= 1 << 24 or not 0 <= p < 1:
        raise RngError("invalid", f"rng: n = {n} or p = {p} out of range")
    if act == "seed":
        _seed(device, g, int(msg["seed"]))
        return [], []
    if act == "uniform":
        return ["output:0"], [torch.rand(n, device=device, generator=_gen(device, g))]
    if act == "dropout":
        return ["output:0"], [F.dropout(torch.ones(n, device=device), p=p, training=True)]
    if act == "get_state":
        gen = _gen(device, g)
        st = get_state() if gen is None else gen.get_state()
        return ["state"], [st.cpu().view(torch.int8).clone()]
    if act == "set_state":
        if len(tensors) != 1 or tensors[0].dtype != torch.int8:
            raise RngError("invalid", "rng set_state: expected one int8 state tensor")
        gen = _gen(device, g)
        if FAULT == "restore_reuse":
            _seed(device, g, _seeds.get(g, 0))
            return [], []
        st = tensors[0].cpu().contiguous().view(torch.uint8)
        try:
            set_state(st) if gen is None else gen.set_state(st)
        except RuntimeError as e:
            raise RngError("invalid", f"rng set_state: {e}")
        return [], []
    if act == "recompute":
        y, gx, between = _dropout_then_more(device, p, n)
        return ["output:0", "grad_input:0", "between"], [y, gx, between]
    raise RngError("invalid", f"rng: unknown action '{act}'")
