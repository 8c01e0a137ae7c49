"""The selections of docs/TOLERANCES.md "Selections" in torch: argmax, and
sample, a categorical draw whose uniform is numval's Philox4x32-10 block
(Salmon et al., SC'11) rather than torch's generator, whose stream is not the
definition's. The distribution is computed the way a device would: in the
logits' compute dtype (fp32 for fp32, bf16 and fp16 logits; fp64 for fp64),
with torch's sort, softmax and cumsum, so numval judges torch's arithmetic
against its exact reference and the boundary rule."""
import torch

MASK = 0xFFFFFFFF
M0, M1 = 0xD2511F53, 0xCD9E8D57
W0, W1 = 0x9E3779B9, 0xBB67AE85
SAMP = 0x706D6173  # "samp": keeps these blocks apart from the input generators'


def philox4x32_10(ctr, key):
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for r in range(10):
        if r:
            k0, k1 = (k0 + W0) & MASK, (k1 + W1) & MASK
        p0, p1 = M0 * c0, M1 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & MASK, p1 & MASK, ((p0 >> 32) ^ c3 ^ k1) & MASK, p0 & MASK
    return c0, c1, c2, c3


def uniform(seed, n):
    """Row n's uniform in [0, 1): the top 53 bits of the block's words w0, w1."""
    n &= (1 << 64) - 1
    w = philox4x32_10((n & MASK, n >> 32, SAMP, 0), (seed & MASK, (seed >> 32) & MASK))
    return ((w[0] << 32 | w[1]) >> 11) * 2.0 ** -53


def argmax(x):
    # ties to the lowest index, a NaN above every number: torch.argmax's rules
    return torch.argmax(x, dim=-1)


def sample(x, a):
    temp = float(a.get("temperature", 1.0))
    top_k = int(a.get("top_k", 0))
    top_p = float(a.get("top_p", 1.0))
    seed, offset = int(a.get("seed", 0)), int(a.get("offset", 0))
    cdt = torch.float64 if x.dtype == torch.float64 else torch.float32
    V = x.shape[-1]
    rows = x.reshape(-1, V).to(cdt)
    R = rows.shape[0]
    # stable descending sort: equal logits keep index order (step 1)
    xs, order = torch.sort(rows, dim=-1, descending=True, stable=True)
    # z - z_max as (x - x_max) / T: x / T alone overflows for large logits or
    # a small T (bf16's 3.4e38 / 0.7), and a difference that overflows to -inf
    # is a token of probability exp(-huge) = 0, as exact arithmetic has it
    z = (xs - xs[:, :1]) / temp
    pos = torch.arange(V).expand(R, V)
    kept = torch.ones(R, V, dtype=torch.bool)
    if 0 < top_k < V:
        kept &= pos < top_k
    q = torch.softmax(z.masked_fill(~kept, float("-inf")), dim=-1)
    if top_p < 1:
        cs = torch.cumsum(q, dim=-1)
        count = ((cs < top_p) & kept).sum(dim=-1, keepdim=True) + 1
        kept &= pos < count
        q = q.masked_fill(~kept, 0.0)
        q = q / q.sum(dim=-1, keepdim=True)
    cdf = torch.cumsum(q, dim=-1)
    u = torch.tensor([uniform(seed, offset + r) for r in range(R)], dtype=torch.float64)
    j = (cdf.to(torch.float64) <= u[:, None]).sum(dim=-1)
    # a rounded CDF may end below u: the draw lands on the last token it can draw
    last = torch.where(q > 0, pos, torch.zeros_like(pos)).amax(dim=-1)
    j = torch.minimum(j, last)
    tok = order.gather(-1, j[:, None]).squeeze(-1).to(torch.int32)
    bad = torch.isnan(rows).any(dim=-1) | torch.isposinf(rows).any(dim=-1) | torch.isneginf(rows).all(dim=-1)
    tok = torch.where(bad, torch.full_like(tok, -1), tok)
    return tok.reshape(x.shape[:-1])
