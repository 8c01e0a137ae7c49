#!/usr/bin/python3
"""The PyTorch CPU facts docs/TORCH_FINDINGS.md states about log1p, sigmoid and
silu near the ends of fp32's range, checked on every fp32 input of the ranges
named (the exact values from Python's double-precision math, far more precise
than fp32 there). Run with Debian's python3-torch: /usr/bin/python3
tests/integration/check_torch_findings.py; exit 77 (skip) without torch."""
import math
import sys

try:
    import numpy as np
    import torch
except ImportError:
    print("1..0 # SKIP torch or numpy not importable")
    sys.exit(77)

torch.set_num_threads(1)
F32 = np.float32
FLT_MAX = float(np.finfo(F32).max)
TINY = float(np.finfo(F32).tiny)
failed = 0


def check(cond, what):
    global failed
    print("%s - %s" % ("ok" if cond else "not ok", what), flush=True)
    failed += not cond


def every_f32(a, b):
    """Every fp32 value in [a, b] (same sign), as a tensor."""
    ia, ib = (int(np.array([F32(v)]).view(np.uint32)[0]) for v in (a, b))
    lo, hi = min(ia, ib), max(ia, ib)
    return torch.from_numpy(np.arange(lo, hi + 1, dtype=np.uint32).view(F32).copy())


def t16(x, dtype=torch.float32):
    return torch.full((16,), x, dtype=dtype)


print("# torch", torch.__version__)
# log1p: inf above 1e38, and not because 1 + x overflows.
one_plus = float((torch.tensor([1.0]) + torch.tensor([FLT_MAX]))[0])
check(one_plus == FLT_MAX, "1 + FLT_MAX in fp32 rounds to FLT_MAX (%r): no overflow" % one_plus)
check(math.isinf(float(torch.log1p(t16(FLT_MAX))[0])) and
      math.isinf(float(torch.log1p(torch.tensor([FLT_MAX]))[0])),
      "log1p(FLT_MAX) = inf in fp32 (16 elements and 1), exact %.8g" % math.log1p(FLT_MAX))
check(float(torch.log(t16(FLT_MAX))[0]) == float(F32(math.log(FLT_MAX))),
      "log(FLT_MAX) in fp32 is finite and correct")
big = every_f32(1e38, FLT_MAX)
y = torch.log1p(big)
fin = big[torch.isfinite(y)].tolist()
check(fin == [float(F32(1e38))] and bool(torch.isinf(y[big > F32(1e38)]).all()),
      "log1p: inf for every one of the %d fp32 x above fp32(1e38) = %r; finite at it" %
      (len(big) - 1, float(F32(1e38))))
mid = every_f32(1e37, 1e38)
check(bool(torch.isfinite(torch.log1p(mid)).all()),
      "log1p: finite for all %d fp32 x in [1e37, 1e38]" % len(mid))

# sigmoid: 0 below -ln(FLT_MAX), where exp(-x) overflows; subnormal results above are kept.
neg = every_f32(-110.0, -80.0)
s = torch.sigmoid(neg)
zero = s == 0
edge = neg[zero].max().item()
check(bool((s[neg <= edge] == 0).all()) and edge < -math.log(FLT_MAX) < neg[~zero].min().item(),
      "sigmoid fp32: 0 for every x <= %r, the first fp32 below -ln(FLT_MAX) = %r; nonzero above"
      % (edge, -math.log(FLT_MAX)))
lost = neg[(neg <= edge) & (neg > math.log(2.0 ** -150))]
check(len(lost) > 1000000, "%d of those x have an exact sigmoid that is a nonzero fp32 subnormal "
      "(x > ln 2^-150 = %.5g)" % (len(lost), math.log(2.0 ** -150)))
kept = neg[(neg >= -88.72) & (neg <= -87.4)]
got = torch.sigmoid(kept).double().numpy()
exact = np.array([1 / (1 + math.exp(-x)) for x in kept.tolist()])
rel = float((np.abs(got - exact) / exact).max())
check(rel < 1e-6 and float(exact.max()) < TINY,
      "sigmoid fp32 on [-88.72, -87.4]: subnormal results returned, max relative error %.3g "
      "(no flush to zero)" % rel)
e1, e2 = float(torch.exp(t16(88.72283))[0]), float(torch.exp(t16(88.7229))[0])
check(math.isfinite(e1) and math.isinf(e2),
      "fp32 exp(88.72283) = %.7g, exp(88.7229) = inf: the same threshold" % e1)
b = torch.sigmoid(torch.tensor([-88.0, -88.5, -89.0, -90.0]).to(torch.bfloat16)).float().tolist()
check(b[0] > 0 and b[1] > 0 and b[2] == 0 and b[3] == 0,
      "sigmoid bf16: subnormal results at -88 and -88.5 (%r, %r), 0 from -89 (bf16 inputs)"
      % (b[0], b[1]))

# silu: -0 from the same x, where the exact results are normal floats.
si = torch.nn.functional.silu(neg)
nz = (si == 0) & torch.signbit(si)
check(neg[nz].max().item() == edge and bool(nz[neg <= edge].all()),
      "silu fp32: -0 for every x <= %r (the sigmoid threshold)" % edge)
normal = [x for x in neg[nz].tolist() if abs(x / (1 + math.exp(-x))) >= TINY]
check(len(normal) > 400000 and min(normal) < -91.8 and max(normal) == edge,
      "%d of those x, in [%.5g, %.8g], have an exact silu that is a normal fp32 (e.g. "
      "silu(-88.73) = %.4g)" % (len(normal), min(normal), max(normal),
                                -88.73 / (1 + math.exp(88.73))))
print("1..%d" % 13)
sys.exit(1 if failed else 0)
