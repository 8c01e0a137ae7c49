#!/usr/bin/python3
"""A context-N token-by-token decode through a KV cache: numval's serving kind
on a backend (a long_context job: the device's decode, the fp64 and the
model-dtype reference decodes, each timed by the worker) next to the same
decoder in torch on the CPU (fp32 and fp64), printed side by side.

  /usr/bin/python3 bench/serving_decode.py --worker build/worker/numval-worker \
      --backend emu --context 8192

The decoder is the serving kind's (docs/SERVING.md): embedding, pre-norm
blocks of rotary causal self-attention (GPT-NeoX rotate-half) and a SwiGLU
MLP, final rms_norm and unembedding. torch runs its own seeded weights (the
timing does not depend on the values) with the cache preallocated, under
torch.no_grad(), on its default intra-op threads.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def numval(args):
    spec = {"kind": "serving", "check": "long_context", "name": "bench-long-context",
            "decoder": {"vocab": args.vocab, "width": args.width, "heads": args.heads,
                        "layers": args.layers, "ffn": args.ffn},
            "context": args.context, "every": max(1, args.context // 16),
            "dtypes": ["fp32"], "seed": 1}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
        path = f.name
    try:
        t0 = time.monotonic()
        out = subprocess.run([args.worker, "run", path, "--backend", args.backend],
                             capture_output=True, text=True, timeout=args.timeout)
        wall = time.monotonic() - t0
    finally:
        os.unlink(path)
    res = json.loads(out.stdout)
    case = res["cases"][0]
    crit = case["criteria"]["long_context"]
    return wall, crit["seconds"], case["verdict"], crit


def torch_decode(args, dtype):
    import torch
    torch.manual_seed(1)
    D, H, L, F, V, N = args.width, args.heads, args.layers, args.ffn, args.vocab, args.context
    hd = D // H

    def w(*shape, std):
        return (torch.randn(*shape, dtype=torch.float64) * std).to(dtype)

    wte = w(V, D, std=1.0)
    blocks = [dict(wq=w(D, D, std=D ** -0.5), wk=w(D, D, std=D ** -0.5),
                   wv=w(D, D, std=D ** -0.5), wo=w(D, D, std=D ** -0.5),
                   wg=w(D, F, std=D ** -0.5), wu=w(D, F, std=D ** -0.5),
                   wd=w(F, D, std=F ** -0.5)) for _ in range(L)]
    wun = w(D, V, std=D ** -0.5)
    inv = 10000.0 ** (-2.0 * torch.arange(hd // 2, dtype=torch.float64) / hd)
    ang = torch.arange(N, dtype=torch.float64)[:, None] * inv[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], -1).to(dtype)
    sin = torch.cat([ang.sin(), ang.sin()], -1).to(dtype)
    kc = [torch.zeros(H, N, hd, dtype=dtype) for _ in range(L)]
    vc = [torch.zeros(H, N, hd, dtype=dtype) for _ in range(L)]
    ids = torch.randint(0, V, (N,))

    def rms(x):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5)

    def rope(x, t):  # x [H, 1, hd]
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        return x * cos[t] + torch.cat([-x2, x1], -1) * sin[t]

    t0 = time.process_time()
    w0 = time.monotonic()
    with torch.no_grad():
        for t in range(N):
            x = wte[ids[t]][None, :]
            for li, b in enumerate(blocks):
                n1 = rms(x)
                q = (n1 @ b["wq"]).view(1, H, hd).transpose(0, 1)
                k = (n1 @ b["wk"]).view(1, H, hd).transpose(0, 1)
                v = (n1 @ b["wv"]).view(1, H, hd).transpose(0, 1)
                q, k = rope(q, t), rope(k, t)
                kc[li][:, t: t + 1] = k
                vc[li][:, t: t + 1] = v
                s = (q @ kc[li][:, : t + 1].transpose(1, 2)) * hd ** -0.5
                a = torch.softmax(s, -1) @ vc[li][:, : t + 1]
                x = x + a.transpose(0, 1).reshape(1, D) @ b["wo"]
                n2 = rms(x)
                x = x + (torch.nn.functional.silu(n2 @ b["wg"]) * (n2 @ b["wu"])) @ b["wd"]
            _ = rms(x) @ wun
    return time.monotonic() - w0, time.process_time() - t0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worker", default="build/worker/numval-worker")
    p.add_argument("--backend", default="emu")
    p.add_argument("--context", type=int, default=8192)
    p.add_argument("--width", type=int, default=16)
    p.add_argument("--heads", type=int, default=1)
    p.add_argument("--layers", type=int, default=1)
    p.add_argument("--ffn", type=int, default=32)
    p.add_argument("--vocab", type=int, default=64)
    p.add_argument("--timeout", type=float, default=3600)
    args = p.parse_args()
    wall, secs, verdict, crit = numval(args)
    import torch
    t32 = torch_decode(args, torch.float32)
    t64 = torch_decode(args, torch.float64)
    print(f"context {args.context}, width {args.width}, heads {args.heads}, layers "
          f"{args.layers}, ffn {args.ffn}, vocab {args.vocab}; torch {torch.__version__}, "
          f"{torch.get_num_threads()} intra-op thread(s); load average "
          f"{os.getloadavg()[0]:.1f}")
    print(f"numval long_context job: verdict {verdict}, agreement {crit['agreement']:.4f}, "
          f"worst e/band {crit['worst_ratio']:.3g}, whole job {wall:.1f} s wall")
    print("| decode to context %d | numval (%s) | torch CPU |" % (args.context, args.backend))
    print("|---|---|---|")
    print(f"| device dtype fp32, wall s | {secs['device']:.1f} | {t32[0]:.1f} |")
    print(f"| fp64, wall s | {secs['fp64_reference']:.1f} (exact reference) | {t64[0]:.1f} |")
    print(f"| model-dtype reference, wall s | {secs['dtype_reference']:.1f} | - |")
    print(f"| torch CPU time s (fp32 / fp64) | | {t32[1]:.1f} / {t64[1]:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
