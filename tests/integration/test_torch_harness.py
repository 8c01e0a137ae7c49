#!/usr/bin/python3
"""The PyTorch harness spoken to directly over the exec protocol: every way
an operator acquires a derivative, in-place ops on views and autograd's version
counter, double backward, output strides, the CPU-fallback flag, RNG streams and
the determinism refusal. Oracles are closed forms in fp64 numpy, not torch.

usage: test_torch_harness.py SOURCE_ROOT [--device DEV]   (TAP; exit 77 without torch)
(bench/device_cuda.sh runs it with --device cuda; CPU-only expectations are skipped
there.)"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torchproto import Harness, torch_available  # noqa: E402

from nvtap import ok, finish

ROOT = sys.argv[1]
DEVICE = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--device" else "cpu"


def close(a, b, rtol):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= rtol * np.maximum(np.abs(b), 1e-300)))


rng = np.random.default_rng(9)
X = rng.standard_normal(64)
GY = rng.standard_normal(64)
V = rng.standard_normal(64)
# fp64 everywhere below: torch's fp64 kernels and numpy's closed forms differ by a
# few ulp of fp64 (libm vs SLEEF/vectorized tanh, different operation order);
# 1e-12 relative is ~4500 ulp of fp64 and still 10^4 below any derivative mistake.
RTOL = 1e-12


def bwd(h, op, xs, gy, autograd):
    return h.call({"type": "backward", "op": op, "attrs": {"autograd": autograd},
                   "n_inputs": len(xs), "n_saved": 0}, [("fp64", x) for x in xs] + [("fp64", gy)])


def derivatives(h):
    t = np.tanh(X)
    want = GY * (1 - t * t)
    for mode in ("builtin", "custom_function", "aot", "inplace_view"):
        hdr, out = bwd(h, "tanh", [X], GY, mode)
        ok(hdr["status"] == "ok" and hdr.get("autograd") == mode and close(out[0], want, RTOL),
           f"tanh backward via '{mode}' equals gy (1 - tanh^2)", hdr)
    hdr, out = bwd(h, "sigmoid", [X], GY, "custom_function")
    s = 1 / (1 + np.exp(-X))
    ok(hdr["status"] == "ok" and close(out[0], GY * s * (1 - s), RTOL),
       "sigmoid custom autograd.Function: gy s (1 - s)", hdr)
    hdr, out = bwd(h, "exp", [X], GY, "inplace_view")
    ok(hdr["status"] == "ok" and close(out[0], GY * np.exp(X), RTOL),
       "exp_ on a view of a copy (legal in-place): gradient gy exp(x)", hdr)
    hdr, _ = bwd(h, "softmax", [X.reshape(8, 8)], GY.reshape(8, 8), "custom_function")
    ok(hdr["status"] == "error" and hdr["code"] == "unsupported",
       "custom_function refuses an op it has no hand-written derivative for", hdr)


def inplace_saved(h):
    # tanh saves its output, sin its input: modifying either in place through a view
    # must make autograd refuse the backward (its version counter moved).
    for op in ("tanh", "sin"):
        hdr, _ = bwd(h, op, [X], GY, "inplace_saved")
        ok(hdr["status"] == "error" and hdr["code"] == "inplace_modified" and
           "modified by an inplace operation" in hdr["message"],
           f"{op}: in-place change of a saved tensor through a view is refused ({hdr.get('code')})",
           hdr)
    # neg and add save nothing: the same in-place change is legal, gradient exact.
    hdr, out = bwd(h, "neg", [X], GY, "inplace_saved")
    ok(hdr["status"] == "ok" and np.array_equal(out[0], -GY),
       "neg saves nothing: the in-place change is legal and the gradient is -gy", hdr)
    hdr, out = bwd(h, "add", [X, V], GY, "inplace_saved")
    ok(hdr["status"] == "ok" and len(out) == 2 and np.array_equal(out[0], GY) and
       np.array_equal(out[1], GY), "add saves nothing: gradients gy, gy", hdr)


def double_backward(h):
    t = np.tanh(X)
    want = GY * V * (-2 * t * (1 - t * t))  # d/dx [gy (1 - tanh^2 x)] . v
    for mode in ("builtin", "custom_function"):
        hdr, out = h.call({"type": "double_backward", "op": "tanh", "attrs": {"autograd": mode},
                           "n_inputs": 1, "n_saved": 0},
                          [("fp64", X), ("fp64", GY), ("fp64", V)])
        ok(hdr["status"] == "ok" and close(out[0], want, RTOL),
           f"tanh second order via '{mode}' (create_graph=True): -2 gy v tanh (1 - tanh^2)", hdr)
    Y = rng.standard_normal(64)
    hdr, out = h.call({"type": "double_backward", "op": "mul", "attrs": {}, "n_inputs": 2,
                       "n_saved": 0}, [("fp64", X), ("fp64", Y), ("fp64", GY), ("fp64", V)])
    # g_a = gy * b: d<g_a, v>/da = 0, d<g_a, v>/db = gy v (exact products in fp64)
    ok(hdr["status"] == "ok" and np.array_equal(out[0], np.zeros(64)) and
       np.array_equal(out[1], GY * V), "mul second order: (0, gy v)", hdr)
    # protocol 2: one direction per input; d/dx sum_i <g_i, v_i> = (gy v_b, gy v_a)
    W = rng.standard_normal(64)
    hdr, out = h.call({"type": "double_backward", "op": "mul", "attrs": {}, "n_inputs": 2,
                       "n_saved": 0, "n_grads": 2},
                      [("fp64", X), ("fp64", Y), ("fp64", GY), ("fp64", V), ("fp64", W)])
    ok(hdr["status"] == "ok" and np.array_equal(out[0], GY * W) and
       np.array_equal(out[1], GY * V), "mul second order, both directions: (gy v_b, gy v_a)", hdr)
    # a custom Function whose backward detaches its saved output: autograd sees no
    # path from x through y, so its double backward is 0 where -2 gy v t (1 - t^2) belongs
    hdr, out = h.call({"type": "double_backward", "op": "tanh",
                       "attrs": {"autograd": "custom_detached"}, "n_inputs": 1, "n_saved": 0},
                      [("fp64", X), ("fp64", GY), ("fp64", V)])
    ok(hdr["status"] == "ok" and np.array_equal(out[0], np.zeros(64)),
       "custom_detached tanh: the double backward loses the term through y (0)", hdr)


def operator_checks(h):
    a = rng.standard_normal((4, 6)).astype(np.float32)
    # The worker's "transposed" layout: a [4, 6] view whose storage is [6, 4].
    hdr, out = h.call({"type": "forward", "op": "exp", "attrs": {}, "out_dtype": "fp32"},
                      [("fp32", a)], strides=[[1, 4]])
    # TensorIterator keeps an elementwise op's output in its input's memory layout.
    ok(hdr["status"] == "ok" and hdr["tensors"][0]["strides"] == [1, 4],
       "exp of a transposed input reports torch's output strides [1, 4]", hdr)
    # both torch and numpy exp are within 1 ulp of exact in fp32: 2 ulp apart at most
    ok(close(out[0], np.exp(a.astype(np.float64)), 2 * 2.0 ** -23),
       "the payload is the contiguous value of that output", hdr)
    ok(hdr["fallback"] is False, "an op on the %s device did not fall back" % DEVICE, hdr)
    hdr, _ = h.call({"type": "forward", "op": "matmul", "attrs": {}, "out_dtype": "fp32"},
                    [("fp32", a), ("fp32", a)])
    ok(hdr["status"] == "error" and hdr["code"] == "shape", "matmul [4,6]x[4,6]: code shape", hdr)
    if DEVICE != "cpu":
        return
    hdr, _ = h.call({"type": "forward", "op": "exp", "attrs": {}, "out_dtype": "fp16"},
                    [("fp16", a.astype(np.float16))])
    ok(hdr["status"] == "error" and hdr["code"] == "dtype" and "Half" in hdr["message"],
       "fp16 exp on torch 1.13's CPU: 'not implemented for Half' is code dtype", hdr)


def fallback_detection():
    sys.path.insert(0, os.path.join(ROOT, "worker/harness"))
    import torch
    import torch_harness
    _, _, fell = torch_harness.encode_tensor("output:0", torch.ones(3), "cpu")
    _, _, fell_cuda = torch_harness.encode_tensor("output:0", torch.ones(3), "cuda")
    ok(fell is False and fell_cuda is True,
       "a result on the CPU while 'cuda' was requested is flagged as a fallback")


def rng_streams(h):
    hdr, out = h.call({"type": "rng", "seed": 1234, "n": 4096, "p": 0.25})
    s = dict(zip([d["name"] for d in hdr["tensors"]], out))
    ok(hdr["status"] == "ok" and np.array_equal(s["first"], s["reseeded"]),
       "manual_seed twice: identical streams", hdr)
    ok(not np.array_equal(s["first"], s["second"]), "the stream advances between draws")
    ok(np.array_equal(s["second"], s["restored"]), "get_rng_state/set_rng_state replays the stream")
    ok(np.array_equal(s["dropout_a"], s["dropout_b"]) and
       np.array_equal(s["dropout_a"], s["dropout_state"]),
       "dropout reproduces with the same seed and with a restored state")
    d = s["dropout_a"]
    kept = d != 0
    # p = 0.25: kept values are 1/(1-p) = 4/3 rounded to fp32; the kept fraction of
    # 4096 Bernoulli(0.75) draws has sd 0.0068, so +-0.05 is > 7 sd.
    ok(np.all(d[kept] == np.float32(4.0 / 3.0)) and abs(kept.mean() - 0.75) < 0.05,
       "dropout keeps ~75%% scaled by 4/3 (kept %.3f)" % kept.mean())


def determinism(root):
    a = rng.standard_normal((1, 1, 4, 4)).astype(np.float32)
    req = {"type": "forward", "op": "max_unpool2d", "attrs": {}, "out_dtype": "fp32"}
    h = Harness(root, "--device", DEVICE, "--deterministic")
    try:
        ok(h.hello["describe"]["mode"]["deterministic"] is True,
           "--deterministic shows in describe's mode")
        hdr, _ = h.call(req, [("fp32", a)])
        ok(hdr["status"] == "error" and hdr["code"] == "nondeterministic" and
           "deterministic" in hdr["message"],
           "use_deterministic_algorithms(True): max_unpool2d refused with code nondeterministic",
           hdr)
        hdr, _ = h.call({"type": "forward", "op": "exp", "attrs": {}, "out_dtype": "fp32"},
                        [("fp32", a)])
        ok(hdr["status"] == "ok", "the harness survives the refusal and serves the next call")
    finally:
        h.close()
    return req, a


def main():
    if not torch_available():
        print("1..0 # SKIP /usr/bin/python3 cannot import torch and numpy")
        return 77
    h = Harness(ROOT, "--device", DEVICE)
    try:
        d = h.hello["describe"]
        ok(d["device"] == "torch:" + DEVICE and d["build"]["name"] == "pytorch" and
           d["gradient_dtype"] == "input", "describe names torch, its version and gradient dtype", d)
        derivatives(h)
        inplace_saved(h)
        double_backward(h)
        operator_checks(h)
        rng_streams(h)
        req, a = determinism(ROOT)
        hdr, _ = h.call(req, [("fp32", a)])
        ok(hdr["status"] == "ok", "without --deterministic the same max_unpool2d runs", hdr)
    finally:
        h.close()
    fallback_detection()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
