#!/usr/bin/python3
"""The row-count dependence of PyTorch's CPU bf16 matmul accumulator
(docs/TORCH_FINDINGS.md "Measured contract"): A [M, 67] times a column of
ones, rows [1, 2^-t, 0 ... 0, -1]; the output is 2^-t only when the kernel
holds 1 + 2^-t, i.e. t <= p - 1 for a p-bit accumulator. Prints, per row count
M, the largest t kept, and the first M with 24 bits. Not a test (torch is not
a build dependency); run it by hand: /usr/bin/python3 THIS_FILE."""
import torch

torch.set_num_threads(1)
ONES = torch.ones(67, 1, dtype=torch.bfloat16)


def rows(m, t):
    r = [0.0] * 67
    r[0], r[1], r[66] = 1.0, 2.0 ** -t, -1.0
    return torch.tensor([r] * m, dtype=torch.bfloat16)


def kept(m, t):
    return (rows(m, t) @ ONES)[0].item() == 2.0 ** -t


for m in (1, 48, 61, 62, 64, 1440):
    print("rows %4d: kept up to t = %d" % (m, max(t for t in range(1, 30) if kept(m, t))))
print("first row count with 24 bits:", next(m for m in range(1, 65) if kept(m, 20)))
