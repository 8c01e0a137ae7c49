#!/usr/bin/python3
"""numval exec harness for PyTorch (protocol: docs/EXEC_PROTOCOL.md).

Runs numval's operator catalog through PyTorch's own operators on one device, so a
lab validates its accelerator where its backend really plugs in: the dispatcher,
autograd, autocast and the RNG.

    numval-worker run job.json --backend "exec:/usr/bin/python3 worker/harness/torch_harness.py --device cpu"

--device takes cpu, cuda, cuda:N, or a privateuseone device name.
"""

import argparse
import atexit
import json
import math
import os
import platform
import resource
import sys

import numpy as np
import torch
import torch.nn.functional as F

import torch_autograd
import torch_model
import torch_rng
import torch_select
import torch_serve
import torch_train
from torch_autograd import HarnessError

PROTOCOL = 2  # 2 added double_backward with one direction per input; a worker saying 1 gets 1
AUTOGRAD = "builtin"  # set by --autograd
WRONG_OP = None  # set by --wrong-op: that op's modules in a graph request are wrong
# Optional requests (docs/EXEC_PROTOCOL.md "Optional requests"), listed in the hello;
# --no-requests lists none (how a harness that predates them looks to the worker).
REQUESTS = ["graph", "train", "rng", "serve", "configure"]
AT_HELLO = None  # (user, sys) CPU seconds when the hello was sent, for benchmarks

# Element encodings shared with the C ABI (docs/BACKEND_ABI.md). bf16 travels as
# its 16-bit pattern; numpy has no bf16, so it is viewed through int16.
DTYPES = {
    "fp64": (torch.float64, np.float64, 8),
    "fp32": (torch.float32, np.float32, 4),
    "fp16": (torch.float16, np.float16, 2),
    "bf16": (torch.bfloat16, np.int16, 2),
    "int32": (torch.int32, np.int32, 4),
    "int8": (torch.int8, np.int8, 1),
}
TORCH_TO_NAME = {v[0]: k for k, v in DTYPES.items()}


def read_exact(stream, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = stream.read(n - len(buf))
        if not chunk:
            raise EOFError("input closed in the middle of a tensor")
        buf += chunk
    return bytes(buf)


def decode_tensor(desc, raw, device):
    name = desc.get("dtype")
    if name not in DTYPES:
        raise HarnessError("dtype", f"dtype '{name}' is not available in PyTorch {torch.__version__}")
    tdt, ndt, size = DTYPES[name]
    shape = [int(s) for s in desc["shape"]]
    if math.prod(shape) * size != len(raw):
        raise HarnessError("invalid", f"tensor '{desc.get('name')}' has {len(raw)} bytes, "
                                      f"expected {math.prod(shape) * size}")
    arr = np.frombuffer(raw, dtype=np.dtype(ndt).newbyteorder("<")).copy().reshape(shape)
    t = torch.from_numpy(arr)
    if name == "bf16":
        t = t.view(torch.bfloat16)
    t = t.to(device)
    strides = desc.get("strides")
    if strides and all(int(s) > 0 for s in strides) and [int(s) for s in strides] != list(t.stride()):
        # The worker's view layout (transposed, strided): rebuild it on the device
        # so torch's kernels see the same memory layout the job asked for.
        laid = torch.empty_strided(shape, [int(s) for s in strides], dtype=t.dtype, device=device)
        laid.copy_(t)
        t = laid
    return t


def encode_tensor(name, t, device):
    """Descriptor (with torch's own output strides), contiguous payload, and
    whether the result lives somewhere else than the requested device."""
    t = t.detach()
    want = torch.device(device)
    fallback = t.device.type != want.type or (want.index is not None and t.device.index != want.index)
    strides = list(t.stride())
    t = t.cpu().contiguous()
    dname = TORCH_TO_NAME.get(t.dtype)
    if dname is None:
        if t.dtype == torch.int64:
            t, dname = t.to(torch.int32), "int32"
        elif t.dtype == torch.bool:
            t, dname = t.to(torch.int8), "int8"
        else:
            raise HarnessError("dtype", f"result dtype {t.dtype} has no numval encoding")
    if dname == "bf16":
        raw = t.view(torch.int16).numpy().astype("<i2").tobytes()
    else:
        raw = t.numpy().astype(np.dtype(DTYPES[dname][1]).newbyteorder("<")).tobytes()
    return {"name": name, "dtype": dname, "shape": list(t.shape), "strides": strides,
            "nbytes": len(raw)}, raw, fallback


def rms_norm(x, w, eps):
    # PyTorch 1.13 has no rms_norm; composed from its own operators as models do.
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * w


def gelu(x, a):
    return F.gelu(x, approximate="tanh" if a.get("approximate") == "tanh" else "none")


def var(x, a):
    return torch.var(x, dim=a.get("axis", -1), unbiased=bool(a.get("correction", 0)))


UNARY = {
    "neg": torch.neg, "abs": torch.abs, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
    "reciprocal": torch.reciprocal, "exp": torch.exp, "exp2": torch.exp2,
    "expm1": torch.expm1, "log": torch.log, "log2": torch.log2, "log1p": torch.log1p,
    "sin": torch.sin, "cos": torch.cos, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
    "erf": torch.erf, "silu": F.silu, "relu": torch.relu,
}
BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
    "pow": torch.pow, "maximum": torch.maximum, "minimum": torch.minimum,
}


def forward_op(op, a, xs, out_dtype):
    axis = a.get("axis", -1)
    if op in UNARY:
        return UNARY[op](xs[0])
    if op in BINARY:
        if xs[0].shape != xs[1].shape:
            raise HarnessError("shape", f"{op}: shapes {list(xs[0].shape)} and {list(xs[1].shape)} differ")
        return BINARY[op](xs[0], xs[1])
    table = {
        "gelu": lambda: gelu(xs[0], a),
        "fma": lambda: torch.addcmul(xs[2], xs[0], xs[1]),
        "cast": lambda: xs[0].to(DTYPES[a["to"]][0]) if a.get("to") in DTYPES else None,
        "sum": lambda: torch.sum(xs[0], dim=axis),
        "mean": lambda: torch.mean(xs[0], dim=axis),
        "max": lambda: torch.amax(xs[0], dim=axis),
        "var": lambda: var(xs[0], a),
        "norm2": lambda: torch.linalg.vector_norm(xs[0], ord=2, dim=axis),
        "logsumexp": lambda: torch.logsumexp(xs[0], dim=axis),
        "softmax": lambda: F.softmax(xs[0], dim=axis),
        "log_softmax": lambda: F.log_softmax(xs[0], dim=axis),
        "layer_norm": lambda: F.layer_norm(xs[0], xs[0].shape[-1:], xs[1], xs[2], a.get("eps", 1e-5)),
        "rms_norm": lambda: rms_norm(xs[0], xs[1], a.get("eps", 1e-5)),
        "cross_entropy": lambda: cross_entropy(xs, a),
        "matmul": lambda: matmul(xs, a),
        "bmm": lambda: matmul(xs, a),
        "conv2d": lambda: conv2d(xs, a),
        "avg_pool2d": lambda: avg_pool2d(xs[0], a),
        "max_pool2d": lambda: max_pool2d(xs[0], a),
        "rotary_embedding": lambda: rotary_embedding(xs[0], a),
        # data movement, so the serving kind's op-by-op decoder runs here too
        # (a harness without the serve request): values unchanged
        "embedding": lambda: F.embedding(xs[1].long(), xs[0]),
        "transpose": lambda: xs[0].transpose(-2, -1),
        "split_heads": lambda: xs[0].reshape(xs[0].shape[0], int(a["heads"]), -1).transpose(0, 1),
        "merge_heads": lambda: xs[0].transpose(0, 1).reshape(xs[0].shape[1], -1),
        "cache_write": lambda: xs[0].clone(),
        "argmax": lambda: torch_select.argmax(xs[0]),
        "sample": lambda: torch_select.sample(xs[0], a),
        "max_unpool2d": lambda: max_unpool2d(xs[0]),
        "index_add": lambda: index_add(xs[0]),
    }
    if op not in table:
        raise HarnessError("unsupported", f"op '{op}' is not in this harness")
    y = table[op]()
    if y is None:
        raise HarnessError("dtype", f"cast target '{a.get('to')}' is not available in PyTorch")
    return y


def cross_entropy(xs, a):
    if xs[1].dtype not in (torch.int32, torch.int64):
        raise HarnessError("dtype", f"cross_entropy target must be int32, got {xs[1].dtype}")
    return F.cross_entropy(xs[0], xs[1].long(), reduction=a.get("reduction", "none"))


def matmul(xs, a):
    scale = a.get("scale", "none")
    if scale not in ("none", None):
        raise HarnessError("unsupported", f"matmul scale '{scale}' needs scaled-matmul kernels "
                                          f"that PyTorch {torch.__version__} does not have")
    if xs[0].shape[-1] != xs[1].shape[-2]:
        raise HarnessError("shape", f"matmul: {list(xs[0].shape)} x {list(xs[1].shape)} do not fit")
    return torch.matmul(xs[0], xs[1])


def conv2d(xs, a):
    """NCHW, no bias; stride, padding, dilation the same in H and W, groups
    (core/ops/conv.c: PyTorch's Conv2d)."""
    if xs[0].dim() != 4 or xs[1].dim() != 4:
        raise HarnessError("shape", f"conv2d needs x [N, C, H, W] and weight [Co, C/groups, kh, kw], "
                                    f"got {list(xs[0].shape)} and {list(xs[1].shape)}")
    return F.conv2d(xs[0], xs[1], stride=int(a.get("stride", 1)), padding=int(a.get("padding", 0)),
                    dilation=int(a.get("dilation", 1)), groups=int(a.get("groups", 1)))


def avg_pool2d(x, a):
    """A square window, the stride defaulting to it; ceil_mode (default off),
    count_include_pad (default true) and divisor_override (default none) as
    the catalog's attributes, which are PyTorch's."""
    if x.dim() != 4:
        raise HarnessError("shape", f"avg_pool2d needs [N, C, H, W], got {list(x.shape)}")
    k = int(a.get("kernel", 2))
    d = a.get("divisor_override")
    return F.avg_pool2d(x, k, stride=int(a.get("stride", k)), padding=int(a.get("padding", 0)),
                        ceil_mode=bool(a.get("ceil_mode", False)),
                        count_include_pad=bool(a.get("count_include_pad", True)),
                        divisor_override=int(d) if d is not None else None)


def max_pool2d(x, a):
    """A square window, the stride defaulting to it (core/ops/attrs.c)."""
    if x.dim() != 4:
        raise HarnessError("shape", f"max_pool2d needs [N, C, H, W], got {list(x.shape)}")
    k = int(a.get("kernel", 2))
    return F.max_pool2d(x, k, stride=int(a.get("stride", k)), padding=int(a.get("padding", 0)))


def rotary_embedding(x, a):
    """core/ops/rotary.c as Hugging Face transformers' Llama computes it: inv_freq =
    1 / theta^(arange(0, hd, 2) / hd) and the angle positions x inv_freq in fp32
    (fp64 for fp64 x, where the default tolerance assumes an fp64 angle), cos and
    sin cast to x's dtype, x cos + rotate(x) sin; rotate is rotate_half for the
    half split, (-x_odd, x_even) interleaved for RoFormer's pairs."""
    if x.dim() < 2:
        raise HarnessError("shape", f"rotary_embedding needs x [.., T, D], got {list(x.shape)}")
    d, t = x.shape[-1], x.shape[-2]
    hd = int(a.get("head_dim", 0)) or d
    if hd % 2 or d % hd:
        raise HarnessError("shape", f"rotary_embedding: head_dim {hd} must be even and divide {d}")
    inter = bool(a.get("interleaved", False))
    off, theta = int(a.get("offset", 0)), float(a.get("theta", 10000))
    adt = torch.float64 if x.dtype == torch.float64 else torch.float32
    k = torch.arange(0, hd, 2, device=x.device, dtype=torch.int64).to(adt)
    inv = 1.0 / (theta ** (k / hd))
    pos = torch.arange(off, off + t, device=x.device, dtype=torch.int64).to(adt)
    ang = torch.outer(pos, inv)
    emb = ang.repeat_interleave(2, dim=-1) if inter else torch.cat((ang, ang), dim=-1)
    cos, sin = emb.cos().to(x.dtype)[:, None, :], emb.sin().to(x.dtype)[:, None, :]
    xh = x.reshape(*x.shape[:-1], d // hd, hd)
    if inter:
        rot = torch.stack((-xh[..., 1::2], xh[..., 0::2]), dim=-1).flatten(-2)
    else:
        rot = torch.cat((-xh[..., hd // 2:], xh[..., :hd // 2]), dim=-1)
    return (xh * cos + rot * sin).reshape(x.shape)


def max_unpool2d(x):
    """Not a catalog op: a kernel PyTorch refuses on every device under
    torch.use_deterministic_algorithms(True) (the determinism probe)."""
    if x.dim() != 4:
        raise HarnessError("shape", f"max_unpool2d needs [N, C, H, W], got {list(x.shape)}")
    y, idx = F.max_pool2d(x, 2, return_indices=True)
    return F.max_unpool2d(y, idx, 2)


def index_add(x):
    """Not a catalog op: index_add_ with repeated indices, non-deterministic on CUDA
    (atomics); deterministic on the CPU."""
    idx = torch.zeros(x.shape[0], dtype=torch.long, device=x.device)
    return torch.zeros_like(x).index_add_(0, idx, x)


def backward_op(op, a, xs, grad_out):
    """VJP through torch.autograd; attr "autograd" (else --autograd) picks how the
    derivative is acquired (worker/harness/torch_autograd.py)."""
    return torch_autograd.vjp(a.get("autograd", AUTOGRAD), op, a, xs, grad_out, forward_op)


def describe(device):
    dev = torch.device(device)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else platform.processor() or "cpu"
    autocast_lower = ["matmul", "linear", "conv", "bmm", "addmm", "baddbmm"]
    autocast_fp32 = ["exp", "log", "log_softmax", "softmax", "layer_norm", "cross_entropy",
                     "sum", "norm2", "pow", "rsqrt", "reciprocal", "expm1", "log1p"]
    return {
        "device": f"torch:{device}",
        "device_name": name,
        "build": {"name": "pytorch", "version": torch.__version__,
                  "runtime": f"python {platform.python_version()}",
                  "driver": torch.version.cuda or "none"},
        "mode": {"deterministic": torch.are_deterministic_algorithms_enabled(),
                 "tf32_matmul": bool(getattr(torch.backends.cuda.matmul, "allow_tf32", False)),
                 "tf32_cudnn": bool(torch.backends.cudnn.allow_tf32),
                 "float32_matmul_precision": torch.get_float32_matmul_precision(),
                 "autograd": AUTOGRAD,
                 **({"wrong_op": WRONG_OP} if WRONG_OP else {}),
                 **({"rng_fault": torch_rng.FAULT} if torch_rng.FAULT != "none" else {}),
                 "serve": torch_serve.mode()},
        "contract": {"dtypes": sorted(DTYPES), "autocast": {"lower_precision": autocast_lower,
                                                             "fp32": autocast_fp32}},
        "inference_only": False,
        "gradient_dtype": "input",
        "nondeterministic_ops": [],
        "requests": REQUESTS,
        # autograd keeps what it saves itself: the worker need not pass saved tensors
        "saved": {},
    }


def send(out, header, payloads=()):
    out.write((json.dumps(header, separators=(",", ":")) + "\n").encode())
    for p in payloads:
        out.write(p)
    out.flush()


def classify(e):
    """PyTorch reports refusals as RuntimeError; the protocol code by their text."""
    text = str(e)
    if "does not have a deterministic implementation" in text:
        return "nondeterministic"
    if "modified by an inplace operation" in text:
        return "inplace_modified"
    if "not implemented for" in text:  # e.g. "exp_vml_cpu" not implemented for 'Half'
        return "dtype"
    if "size" in text or "shape" in text:
        return "shape"
    return "device"


def handle(device, msg, tensors):
    """(names, tensors, extra header fields) of the reply to one request."""
    kind, attrs = msg.get("type"), msg.get("attrs") or {}
    if kind == "forward":
        return ["output:0"], [forward_op(msg["op"], attrs, tensors, msg.get("out_dtype"))], {}
    if kind in ("backward", "double_backward"):
        n_in, n_saved = int(msg["n_inputs"]), int(msg.get("n_saved", 0))
        xs, gy = tensors[:n_in], tensors[n_in + n_saved]
        how = attrs.get("autograd", AUTOGRAD)
        if kind == "backward":
            outs = torch_autograd.vjp(how, msg["op"], attrs, xs, gy, forward_op)
        else:
            # one direction per floating-point input after grad_output (protocol 2);
            # fewer (protocol 1 sent one, for input 0) leave the others zero
            floats = [x for x in xs if x.is_floating_point()]
            vs = list(tensors[n_in + n_saved + 1:])
            vs += [torch.zeros_like(x) for x in floats[len(vs):]]
            outs = torch_autograd.hvp(how, msg["op"], attrs, xs, gy, vs[:len(floats)], forward_op)
        return [f"grad_input:{i}" for i in range(len(outs))], outs, {"autograd": how}
    if kind == "graph" and "graph" in REQUESTS:
        return torch_model.run(msg, tensors, device, WRONG_OP)
    if kind == "rng" and "action" in msg and "rng" in REQUESTS:
        try:
            names, outs = torch_rng.action(device, msg, tensors)
        except torch_rng.RngError as e:
            raise HarnessError(e.code, str(e))
        return names, outs, {}
    if kind == "rng":
        got = torch_rng.streams(device, int(msg.get("seed", 0)), int(msg.get("n", 1024)),
                                float(msg.get("p", 0.5)))
        return list(got), list(got.values()), {}
    if kind == "train":
        return torch_train.handle(device, msg, tensors)
    if kind == "configure" and "configure" in REQUESTS:
        # The job's demanded determinism (docs/EXEC_PROTOCOL.md "configure"):
        # the answer is what torch reports after the setting, not the request.
        want = (msg.get("config") or {}).get("deterministic")
        if not isinstance(want, bool):
            raise HarnessError("invalid", "configure: config.deterministic must be a boolean")
        torch.use_deterministic_algorithms(want)
        return [], [], {"info": {"deterministic": torch.are_deterministic_algorithms_enabled()}}
    if kind == "serve" and "serve" in REQUESTS:
        return torch_serve.handle(device, msg, tensors)
    raise HarnessError("invalid", f"unknown message type '{kind}'")


def serve(device, inp, out):
    line = inp.readline(1 << 20)
    hello = json.loads(line)
    if hello.get("type") != "hello" or hello.get("protocol") not in (1, PROTOCOL):
        sys.stderr.write(f"torch_harness: expected hello protocol 1 or {PROTOCOL}, "
                         f"got {line[:200]!r}\n")
        return 2
    send(out, {"type": "hello", "protocol": hello["protocol"], "describe": describe(device)})
    global AT_HELLO
    r = resource.getrusage(resource.RUSAGE_SELF)
    AT_HELLO = (r.ru_utime, r.ru_stime)
    while True:
        line = inp.readline(1 << 20)
        if not line:
            return 0
        msg = json.loads(line)
        if msg.get("type") == "bye":
            return 0
        raws = [read_exact(inp, int(d["nbytes"])) for d in msg.get("tensors", [])]
        try:
            tensors = [decode_tensor(d, r, device) for d, r in zip(msg.get("tensors", []), raws)]
            names, outs, extra = handle(device, msg, tensors)
            enc = [encode_tensor(n, t, device) for n, t in zip(names, outs)]
            send(out, dict({"type": "result", "id": msg.get("id"), "status": "ok",
                            "fallback": any(e[2] for e in enc),
                            "tensors": [e[0] for e in enc]}, **extra), [e[1] for e in enc])
        except HarnessError as e:
            send(out, {"type": "result", "id": msg.get("id"), "status": "error",
                       "code": e.code, "message": str(e)})
        except RuntimeError as e:
            text = str(e)
            send(out, {"type": "result", "id": msg.get("id"), "status": "error",
                       "code": classify(e), "message": text.splitlines()[0] if text else "RuntimeError"})


def report_rusage(path):
    """Benchmarks: append this process's CPU seconds (user sys) since its hello to
    path at exit."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    t0 = AT_HELLO or (0.0, 0.0)  # start-up (imports) is not the protocol's cost
    with open(path, "a") as f:
        f.write(f"{r.ru_utime - t0[0]} {r.ru_stime - t0[1]}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--deterministic", action="store_true",
                    help="torch.use_deterministic_algorithms(True)")
    ap.add_argument("--threads", type=int, default=1,
                    help="intra-op threads (the worker already runs cases in parallel)")
    ap.add_argument("--autograd", default="builtin", choices=torch_autograd.MODES,
                    help="how backward acquires derivatives when a request does not say")
    ap.add_argument("--wrong-op", metavar="OP",
                    help="test flag: in graph requests, every module of catalog op OP scales its "
                         "output by 1 + 2^-7 (a deliberately wrong torch module)")
    ap.add_argument("--no-requests", action="store_true",
                    help="test flag: list no optional request in the hello")
    ap.add_argument("--train-fault", default="none", choices=torch_train.FAULTS,
                    help="a training-loop misuse for numval to catch (torch_train.py)")
    ap.add_argument("--rng-fault", default="none", choices=torch_rng.FAULTS,
                    help="an RNG misuse for numval's RNG jobs to catch (torch_rng.py)")
    ap.add_argument("--serve-fault", default="none", choices=torch_serve.FAULTS,
                    help="test flag: a deliberately wrong server in serve requests (kv_bf16, "
                         "kv_fp16: the KV cache held narrower than the declared dtype; "
                         "batch_splitk: weight matmuls split-k by the batch's row count)")
    ap.add_argument("--serve-attention", default="batched", choices=torch_serve.ATTENTIONS,
                    help="serve requests' attention: one call per request (batched) or per "
                         "query row (rowwise, the shapes of a decode step)")
    args = ap.parse_args()
    torch_train.FAULT = args.train_fault
    torch_rng.FAULT = args.rng_fault
    torch_serve.FAULT = args.serve_fault
    torch_serve.ATTENTION = args.serve_attention
    if os.environ.get("NUMVAL_HARNESS_RUSAGE"):
        atexit.register(report_rusage, os.environ["NUMVAL_HARNESS_RUSAGE"])
    global AUTOGRAD, WRONG_OP, REQUESTS
    AUTOGRAD = args.autograd
    WRONG_OP = args.wrong_op
    if args.no_requests:
        REQUESTS = []
    torch.set_num_threads(args.threads)
    if args.deterministic:
        torch.use_deterministic_algorithms(True)
    try:
        torch.empty(1, device=args.device)
    except (RuntimeError, AssertionError) as e:
        sys.stderr.write(f"torch_harness: device '{args.device}' is not usable: {e}\n")
        return 2
    return serve(args.device, sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    sys.exit(main())
