#!/usr/bin/python3
"""Which PyTorch CPU kernels change a row's bits with the shape of the call
(docs/TORCH_FINDINGS.md "Serving steps"): the reasons measured behind the
serving checks' verdicts on the harness. Seeded draws (torch.manual_seed(0)),
200 per line:
- softmax of a row padded with -inf (a prefill row under the causal mask)
  against the same row unpadded (a decode step's row);
- bmm: the last query row of an M-row call against the same row alone;
- a weight matmul's first row inside M rows against it alone, torch.matmul(x, W)
  and nn.Linear's F.linear(x, W^T), at the serving suite's [M, 32] x [32, 64];
- rsqrt of a [32, 1] column (rms_norm's scale of 32 rows, a prefill) against
  each element alone (a decode step's one row), and the composed rms_norm's
  rows of a [32, 32] call against each row alone.
Prints the counts. Not a test (torch is not a build dependency); run it by
hand: /usr/bin/python3 THIS_FILE."""
import math

import torch
import torch.nn.functional as F

torch.set_num_threads(1)
torch.manual_seed(0)
N = 200


def draw(lo, hi):
    return int(torch.randint(lo, hi, ()))


for dt in (torch.float32, torch.bfloat16):
    name = str(dt).replace("torch.", "")
    dif = 0
    for _ in range(N):
        n = draw(1, 32)
        L = draw(n, 40)
        x = torch.randn(1, n).to(dt)
        pad = torch.cat([x, torch.full((1, L - n), -math.inf, dtype=dt)], 1)
        dif += not torch.equal(torch.softmax(x, -1), torch.softmax(pad, -1)[:, :n])
    print("%s softmax, row padded with -inf vs unpadded: %d of %d rows differ" % (name, dif, N))
    dif = 0
    for _ in range(N):
        M, K, L = draw(2, 32), 16, draw(1, 40)
        q, k = torch.randn(2, M, K).to(dt), torch.randn(2, K, L).to(dt)
        dif += not torch.equal(torch.bmm(q, k)[:, -1:], torch.bmm(q[:, -1:], k))
    print("%s bmm, last of M query rows vs alone: %d of %d differ" % (name, dif, N))
    mm = lin = 0
    for _ in range(N):
        M = draw(2, 20)
        x, w = torch.randn(M, 32).to(dt), torch.randn(32, 64).to(dt)
        mm += not torch.equal(torch.matmul(x, w)[:1], torch.matmul(x[:1], w))
        wt = w.t().contiguous()
        lin += not torch.equal(F.linear(x, wt)[:1], F.linear(x[:1], wt))
    print("%s weight matmul, row 0 of M rows vs alone: torch.matmul %d, F.linear %d of %d differ"
          % (name, mm, lin, N))
    dif = rows = 0
    for _ in range(N // 20):
        x = torch.randn(32, 32).to(dt)
        a = x.pow(2).mean(dim=-1, keepdim=True) + 1e-5
        col = torch.rsqrt(a)
        dif += sum(int(not torch.equal(col[i:i + 1], torch.rsqrt(a[i:i + 1]))) for i in range(32))
        full = x * col
        rows += sum(int(not torch.equal(full[i:i + 1], x[i:i + 1] * torch.rsqrt(a[i:i + 1])))
                    for i in range(32))
    print("%s rsqrt of a [32, 1] column vs each element alone: %d of %d differ; rms_norm rows "
          "of [32, 32] vs alone: %d of %d differ" % (name, dif, 32 * (N // 20), rows, 32 * (N // 20)))
