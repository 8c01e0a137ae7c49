"""The serve request of the PyTorch harness (docs/EXEC_PROTOCOL.md "Optional
requests", docs/SERVING.md "Steps on the harness"): the serving kind's decoder
(the model kind's decoder-lm) run step by step in torch, with the KV cache held
here as a paged torch cache.

A step is what the serving kind's step interface (sv_forward) is: a batch of
requests, each feeding n tokens at its next positions; all rows go through the
weight matmuls, norms and MLP together (nn.Linear's F.linear, the weight stored
[out, in]); the attention is per request ("packed", a ragged batch) or one
batched call over every request with keys and values zero padded and masked
with -inf ("padded"). A step attends to the cached positions and to its own
fresh keys and values, as a prefill does for all of its positions, and then
writes the fresh keys and values into the cache: the serving kind's semantics
(worker/kinds/serving/decoder.c), so a cache held narrower than declared shows
in every read of the cache and never in a prefill.

The cache: one pool of pages per model, [pages, layers, 2, heads, page, Dh] in
the cache dtype, a free list, and per request a block table (its pages in
order) and a length. A step whose request starts at 0 resets that request
(frees its pages: the serving kind's eviction and recomputation); a start below
the held length truncates, one above it is an error.
"""

import math

import torch
import torch.nn.functional as F

from torch_autograd import HarnessError

PAGE = 16  # positions per cache page unless the load says otherwise
MAX_MODELS = 8  # models held at once (each case loads one and frees it)
MAX_PAGES = 1 << 20
# --serve-fault: deliberately wrong servers for numval to catch
FAULTS = ["none", "kv_bf16", "kv_fp16", "batch_splitk"]
FAULT = "none"
# --serve-attention: "batched" (one bmm/softmax call per request over all its
# query rows, the causal mask padding each row with -inf: what a model's
# forward does) or "rowwise" (each query row its own call over exactly its
# positions, the shapes a decode step has: prefill rows then equal decode rows
# bit for bit, a batch-invariant attention)
ATTENTIONS = ["batched", "rowwise"]
ATTENTION = "batched"
TDT = {"fp64": torch.float64, "fp32": torch.float32, "bf16": torch.bfloat16,
       "fp16": torch.float16}

MODELS = {}


def mode():
    """describe()'s mode.serve (what the fault flag made of the server)."""
    return {"fault": FAULT, "attention": ATTENTION}


class Model:
    def __init__(self, cfg, named, device):
        try:
            self.V, self.D = int(cfg["vocab"]), int(cfg["width"])
            self.H, self.L, self.Fw = int(cfg["heads"]), int(cfg["layers"]), int(cfg["ffn"])
            self.dtype = TDT[cfg["dtype"]]
        except (KeyError, TypeError, ValueError) as e:
            raise HarnessError("invalid", f"serve load: bad config ({e!r})")
        if self.H <= 0 or self.D % self.H or (self.D // self.H) % 2:
            raise HarnessError("invalid", "serve load: width must split into heads of even width")
        self.hd = self.D // self.H
        self.eps = float(cfg.get("eps", 1e-5))
        self.page = int(cfg.get("page", PAGE))
        if not 1 <= self.page <= 4096:
            raise HarnessError("invalid", f"serve load: page {self.page} not in 1..4096")
        # what the fault flag stores the cache in; the declared dtype otherwise
        self.cache_dtype = {"kv_bf16": torch.bfloat16, "kv_fp16": torch.float16}.get(
            FAULT, self.dtype)
        if torch.finfo(self.cache_dtype).bits >= torch.finfo(self.dtype).bits:
            self.cache_dtype = self.dtype  # not narrower: the fault changes nothing
        self.device = device

        def get(name, shape):
            t = named.get(name)
            if t is None or list(t.shape) != list(shape):
                raise HarnessError("shape", f"serve load: tensor '{name}' missing or not {shape}")
            if t.dtype != self.dtype:
                raise HarnessError("dtype", f"serve load: tensor '{name}' is {t.dtype}, "
                                            f"the model is {self.dtype}")
            return t

        D, Fw = self.D, self.Fw
        self.wte = get("wte", [self.V, D])
        self.cos = named.get("rope_cos")
        self.sin = named.get("rope_sin")
        if self.cos is None or self.sin is None or self.cos.shape != self.sin.shape or \
                self.cos.dim() != 2 or self.cos.shape[1] != D:
            raise HarnessError("shape", "serve load: rope_cos/rope_sin missing or not [P, width]")
        self.max_pos = int(self.cos.shape[0])
        self.g_final = get("g_final", [D])
        # nn.Linear's layout: the weight stored [out, in]
        self.unembed = get("w_unembed", [D, self.V]).t().contiguous()
        self.layers = []
        for layer in range(self.L):
            p = f"decoder.{layer}."
            self.layers.append({
                "g_attn": get(p + "g_attn", [D]), "g_mlp": get(p + "g_mlp", [D]),
                **{w: get(p + w, [D, D]).t().contiguous() for w in ("wq", "wk", "wv", "wo")},
                "w_gate": get(p + "w_gate", [D, Fw]).t().contiguous(),
                "w_up": get(p + "w_up", [D, Fw]).t().contiguous(),
                "w_down": get(p + "w_down", [Fw, D]).t().contiguous()})
        # the score scale rounded once to the model dtype, as the kind's mul op sees it
        self.scale = torch.tensor(1 / math.sqrt(self.hd), dtype=torch.float64).to(self.dtype)
        self.pool = torch.zeros((0, self.L, 2, self.H, self.page, self.hd),
                                dtype=self.cache_dtype, device=device)
        self.free = []
        self.caches = {}  # request id -> [block table (page indices), length]

    # -- the paged cache ------------------------------------------------------
    def page_alloc(self):
        if not self.free:
            n = max(4, self.pool.shape[0])
            if self.pool.shape[0] + n > MAX_PAGES:
                raise HarnessError("invalid", f"serve: the KV cache passed {MAX_PAGES} pages")
            grown = torch.zeros((n,) + tuple(self.pool.shape[1:]), dtype=self.cache_dtype,
                                device=self.device)
            self.free = list(range(self.pool.shape[0] + n - 1, self.pool.shape[0] - 1, -1))
            self.pool = torch.cat([self.pool, grown])
        return self.free.pop()

    def drop(self, cid):
        c = self.caches.pop(cid, None)
        if c:
            self.free.extend(reversed(c[0]))

    def cache_for(self, cid, start):
        c = self.caches.setdefault(cid, [[], 0])
        if start > c[1]:
            raise HarnessError("invalid", f"serve step: request cache {cid} holds {c[1]} "
                                          f"positions, the step starts at {start}")
        keep = (start + self.page - 1) // self.page
        self.free.extend(reversed(c[0][keep:]))
        del c[0][keep:]
        c[1] = start
        return c

    def cached(self, c, layer):
        """Keys and values [H, len, Dh] of a request's cache, in the model dtype."""
        if c[1] == 0:
            e = torch.zeros((self.H, 0, self.hd), dtype=self.dtype, device=self.device)
            return e, e
        kv = self.pool[c[0], layer]  # [blocks, 2, H, page, Dh]
        kv = kv.permute(1, 2, 0, 3, 4).reshape(2, self.H, -1, self.hd)[:, :, :c[1]]
        return kv[0].to(self.dtype), kv[1].to(self.dtype)

    def cache_write(self, c, layer, k, v, pos):
        """k, v [H, n, Dh] at positions pos.. of the request (pages already held)."""
        for i in range(k.shape[1]):
            p = pos + i
            blk, off = c[0][p // self.page], p % self.page
            self.pool[blk, layer, 0, :, off] = k[:, i].to(self.cache_dtype)
            self.pool[blk, layer, 1, :, off] = v[:, i].to(self.cache_dtype)

    # -- the step -------------------------------------------------------------
    def linear(self, x, w):
        if FAULT != "batch_splitk":
            return F.linear(x, w)
        # the fault: a split-k chosen by the batch's row count, fp32 partial sums
        parts = 1 + (x.shape[0] - 1) % 4
        ks = torch.tensor_split(torch.arange(x.shape[1]), parts)
        acc = sum(F.linear(x[:, k].float(), w[:, k].float()) for k in ks)
        return acc.to(x.dtype)

    def rms_norm(self, x, g):
        # PyTorch 1.13 has no rms_norm: composed from its operators as models do
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * g

    def rope(self, x, cos, sin):
        """x cos + rotate_half(x) sin, GPT-NeoX's rotate-half in each head."""
        xh = x.view(x.shape[0], self.H, self.hd)
        half = self.hd // 2
        rot = torch.cat([-xh[..., half:], xh[..., :half]], dim=-1).reshape(x.shape)
        return x * cos + rot * sin

    def heads(self, x):
        return x.view(x.shape[0], self.H, self.hd).transpose(0, 1)  # [H, N, Dh]

    def attend_rows(self, req, q, k, v, layer):
        """--serve-attention rowwise: request req's query rows one by one."""
        c, start, n, r0 = req
        ck, cv = self.cached(c, layer)
        keys = torch.cat([ck, k[:, r0:r0 + n]], dim=1)
        vals = torch.cat([cv, v[:, r0:r0 + n]], dim=1)
        rows = []
        for i in range(n):
            s = torch.bmm(q[:, r0 + i:r0 + i + 1], keys[:, :start + i + 1].transpose(1, 2))
            rows.append(torch.bmm(torch.softmax(s * self.scale, dim=-1), vals[:, :start + i + 1]))
        return torch.cat(rows, dim=1)

    def attend(self, reqs, q, k, v, layer):
        """Context rows [H, N, Dh] of requests reqs (each (cache, start, n, row0))
        attending to their cache and their fresh keys and values."""
        keys, vals, qs = [], [], []
        for c, start, n, r0 in reqs:
            ck, cv = self.cached(c, layer)
            keys.append(torch.cat([ck, k[:, r0:r0 + n]], dim=1))
            vals.append(torch.cat([cv, v[:, r0:r0 + n]], dim=1))
            qs.append(q[:, r0:r0 + n])
        nq = max(x.shape[1] for x in qs)
        nk = max(x.shape[1] for x in keys)
        B = len(reqs)

        def pad(x, rows):
            return F.pad(x, (0, 0, 0, rows - x.shape[1]))

        qb = torch.cat([pad(x, nq) for x in qs]) if B > 1 else qs[0]
        kb = torch.cat([pad(x, nk) for x in keys]) if B > 1 else keys[0]
        vb = torch.cat([pad(x, nk) for x in vals]) if B > 1 else vals[0]
        mask = torch.full((B, self.H, nq, nk), -math.inf, dtype=self.dtype, device=self.device)
        for b, (c, start, n, r0) in enumerate(reqs):
            i = torch.arange(nq, device=self.device).unsqueeze(1)
            p = torch.arange(nk, device=self.device).unsqueeze(0)
            # a padded query row attends to position 0 only and is dropped
            open_ = torch.where(i < n, p <= start + i, p == 0)
            mask[b].masked_fill_(open_, 0)
        s = torch.bmm(qb, kb.transpose(1, 2)) * self.scale
        s = s + mask.view(B * self.H, nq, nk)
        o = torch.bmm(torch.softmax(s, dim=-1), vb).view(B, self.H, nq, self.hd)
        return [o[b, :, :reqs[b][2]] for b in range(B)]

    def step(self, reqs_msg, ids, layout):
        if ids.dim() != 1 or ids.dtype != torch.int32:
            raise HarnessError("shape", "serve step: the token ids must be one int32 vector")
        reqs, row = [], 0
        for r in reqs_msg:
            start, n = int(r["start"]), int(r["n"])
            if n < 1 or start < 0 or start + n > self.max_pos:
                raise HarnessError("invalid", f"serve step: positions {start}..{start + n} "
                                              f"outside the rotary tables' {self.max_pos}")
            c = self.cache_for(int(r["cache"]), start)
            reqs.append((c, start, n, row))
            row += n
        if row != ids.shape[0]:
            raise HarnessError("shape", f"serve step: {ids.shape[0]} token ids for {row} rows")
        if int(ids.min()) < 0 or int(ids.max()) >= self.V:
            raise HarnessError("invalid", "serve step: a token id outside the vocabulary")
        pos = torch.cat([torch.arange(s, s + n, device=self.device) for _, s, n, _ in reqs])
        cos, sin = self.cos[pos], self.sin[pos]
        x = F.embedding(ids.long(), self.wte)
        for layer, w in enumerate(self.layers):
            n1 = self.rms_norm(x, w["g_attn"])
            q = self.rope(self.linear(n1, w["wq"]), cos, sin)
            k = self.rope(self.linear(n1, w["wk"]), cos, sin)
            v = self.linear(n1, w["wv"])
            qh, kh, vh = self.heads(q), self.heads(k), self.heads(v)
            if ATTENTION == "rowwise":
                ctx = [self.attend_rows(r, qh, kh, vh, layer) for r in reqs]
            elif layout == "padded":
                ctx = self.attend(reqs, qh, kh, vh, layer)
            else:  # packed: a ragged batch, each request's attention its own call
                ctx = [self.attend([r], qh, kh, vh, layer)[0] for r in reqs]
            for c, start, n, r0 in reqs:
                while len(c[0]) * self.page < start + n:
                    c[0].append(self.page_alloc())
                self.cache_write(c, layer, kh[:, r0:r0 + n], vh[:, r0:r0 + n], start)
            merged = torch.cat(ctx, dim=1).transpose(0, 1).reshape(row, self.D)
            h = x + self.linear(merged, w["wo"])
            n2 = self.rms_norm(h, w["g_mlp"])
            gated = F.silu(self.linear(n2, w["w_gate"])) * self.linear(n2, w["w_up"])
            x = h + self.linear(gated, w["w_down"])
        for c, start, n, _ in reqs:
            c[1] = start + n
        return self.linear(self.rms_norm(x, self.g_final), self.unembed)


def handle(device, msg, tensors):
    """(names, tensors, extra header fields) of a serve request's reply; a
    malformed request is an error of the request, never the harness's end."""
    try:
        return handle_request(device, msg, tensors)
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise HarnessError("invalid", f"serve {msg.get('action')!r}: malformed request ({e!r})")


def handle_request(device, msg, tensors):
    action = msg.get("action")
    mid = msg.get("model")
    if action == "load":
        if len(MODELS) >= MAX_MODELS and mid not in MODELS:
            raise HarnessError("invalid", f"serve load: {MAX_MODELS} models already held "
                                          "(free one first)")
        names = msg.get("names") or []
        if len(names) != len(tensors):
            raise HarnessError("invalid", f"serve load: {len(names)} names for {len(tensors)} "
                                          "tensors")
        named = dict(zip(names, tensors))
        MODELS[mid] = Model(msg.get("config") or {}, named, device)
        m = MODELS[mid]
        return [], [], {"info": {"cache_page": m.page, "fault": FAULT}}
    if action == "free":
        MODELS.pop(mid, None)
        return [], [], {}
    m = MODELS.get(mid)
    if m is None:
        raise HarnessError("invalid", f"serve {action}: model {mid!r} is not loaded here")
    for cid in msg.get("drop", []):
        m.drop(int(cid))
    if action != "step":
        raise HarnessError("invalid", f"serve: unknown action {action!r}")
    layout = msg.get("layout", "packed")
    if layout not in ("packed", "padded") or not msg.get("requests") or len(tensors) != 1:
        raise HarnessError("invalid", "serve step: needs a layout, requests and one ids tensor")
    with torch.no_grad():
        return ["logits"], [m.step(msg["requests"], tensors[0], layout)], {}
