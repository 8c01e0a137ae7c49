"""RNG streams for the "rng" request of the exec protocol (docs/EXEC_PROTOCOL.md).

The harness only draws; the worker side judges (bit equality where PyTorch
promises reproducibility, inequality where the stream must advance). Streams come
from the device's default generator, the one dropout and torch.rand use."""

import torch


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
