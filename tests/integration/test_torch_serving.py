#!/usr/bin/python3
"""Serving jobs on the PyTorch harness's serve request (docs/SERVING.md "Steps on
the harness", docs/EXEC_PROTOCOL.md "Optional requests"): the harness runs the
decoder's steps in torch with its own paged KV cache, numval judges the logits
against its references as for any device. suites/serving.json (long context cut
to 128 positions) through the harness on the CPU:
- attention "batched" (the default): every check passes in fp32 and bf16; paged's
  recomputed tokens do not reproduce the decode steps' bits (torch's softmax of a
  prefill row padded with -inf, docs/TORCH_FINDINGS.md) and are judged within
  2 band(t), as the harness declares no sequential reduction order; with
  --serve-fault kv_bf16 paged fp32 fails there at a recomputed token, naming its
  page;
- attention "rowwise" (each query row its own call): every check passes, the
  fp32 prefill equal to the cached decode bit for bit;
- --serve-fault kv_bf16 (the KV cache held in bf16 while the job declares fp32):
  prefill_decode fails at position 1, long_context at its first position, paged
  at a recomputation; batch and sustained pass; every bf16 case passes;
- --serve-fault batch_splitk (weight matmuls split-k by the batch's row
  count): batch fails naming the batch of 2 and the packed layout from decode
  step 0, sustained naming the schedule step, paged at a decode step before any
  recomputation (judged bit for bit); prefill_decode and long_context pass;
- --no-requests (a harness without the request): the same jobs run op by op
  ("device_steps": "ops"); where torch.matmul in bf16 changes a row's bits
  with the batch's row count on this CPU (a probe of torch itself says so),
  the batch check catches it where the harness's F.linear passes, and passes
  where it does not.
- argmax and sample op jobs (normal, specials, large) pass through the
  harness's op entry (torch_select.py), and so does the suite's sampling job.
Protocol errors (unknown model, a step past the held cache, a missing weight)
are errors of the request, named, and the harness keeps serving.

usage: test_torch_serving.py NUMVAL_WORKER SOURCE_ROOT   (TAP; exit 77 without torch)
Temp files live in a temp dir that is always removed."""
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torchproto import TORCH_PY, Harness, torch_available  # noqa: E402

from nvtap import ok, finish

WORKER, ROOT = sys.argv[1:3]
HARNESS = "exec:%s %s --device cpu" % (TORCH_PY, os.path.join(ROOT, "worker/harness/torch_harness.py"))


def suite(names=None):
    with open(os.path.join(ROOT, "suites", "serving.json")) as f:
        jobs = json.load(f)["jobs"]
    jobs = copy.deepcopy([j for j in jobs if names is None or j["name"] in names])
    for j in jobs:
        if j["check"] == "long_context":
            j["context"], j["every"] = 128, 32
    return jobs


def run(tmp, jobs, flags=""):
    """numval-worker run of jobs on the harness with flags: {(job, dtype): case}
    and the results."""
    path, out = os.path.join(tmp, "suite.json"), os.path.join(tmp, "out.json")
    with open(path, "w") as f:
        json.dump({"name": "torch-serving", "jobs": jobs}, f)
    if os.path.exists(out):
        os.unlink(out)
    p = subprocess.run([WORKER, "run", path, "--backend", (HARNESS + " " + flags).strip(),
                        "--threads", "2", "--output", out],
                       capture_output=True, text=True, timeout=900)
    doc = {}
    if os.path.exists(out):
        with open(out) as f:
            doc = json.load(f)
    cases = {(j["name"], c["dtype"]): c for j in doc.get("results", []) for c in j["cases"]}
    return cases, doc.get("results", []), p.stderr


def brief(cases):
    return "\n".join("%s %s %s %s %s" % (k[0], k[1], c.get("verdict"), c.get("failure_class"),
                                         (c.get("error") or "")[:200])
                     for k, c in sorted(cases.items()))


def verdicts(cases, want):
    """want: {(job, dtype): (verdict, class or None)}; every other case passes."""
    bad = []
    for k, c in cases.items():
        v, cls = want.get(k, ("passed", None))
        if c.get("verdict") != v or c.get("failure_class") != cls:
            bad.append(k)
    return len(cases) == 2 * len(suite()) and not bad


def protocol(tmp):
    """The serve request spoken directly: load, step, its errors."""
    h = Harness(ROOT, "--device", "cpu")
    try:
        ok("serve" in h.hello["describe"]["requests"] and
           h.hello["describe"]["mode"]["serve"] == {"fault": "none", "attention": "batched"},
           "the hello lists the serve request and describe's mode.serve says fault none, "
           "attention batched", h.hello["describe"].get("mode"))
        V, D, H, L, Fw, P = 16, 8, 2, 1, 16, 12
        rng = np.random.default_rng(1)
        names, arrays = [], []

        def add(name, shape):
            names.append(name)
            arrays.append(("fp32", (rng.standard_normal(shape) * 0.3).astype(np.float32)))

        for name, shape in (("wte", (V, D)), ("rope_cos", (P, D)), ("rope_sin", (P, D)),
                            ("g_final", (D,)), ("w_unembed", (D, V))):
            add(name, shape)
        for w, shape in (("g_attn", (D,)), ("wq", (D, D)), ("wk", (D, D)), ("wv", (D, D)),
                         ("wo", (D, D)), ("g_mlp", (D,)), ("w_gate", (D, Fw)), ("w_up", (D, Fw)),
                         ("w_down", (Fw, D))):
            add("decoder.0." + w, shape)
        cfg = {"vocab": V, "width": D, "heads": H, "layers": L, "ffn": Fw, "dtype": "fp32",
               "page": 4}
        r, _ = h.call({"type": "serve", "action": "load", "model": 1, "config": cfg,
                       "names": names[:-1]}, arrays[:-1])
        ok(r["status"] == "error" and "decoder.0.w_down" in r["message"],
           "a load without a weight is refused naming it", r)
        r, _ = h.call({"type": "serve", "action": "load", "model": 1, "config": cfg,
                       "names": names}, arrays)
        ok(r["status"] == "ok", "load: the model's weights accepted", r)
        ids = np.array([3, 1, 4, 1, 5], np.int32)
        step = {"type": "serve", "action": "step", "model": 1, "layout": "packed"}
        r, t = h.call(dict(step, requests=[{"cache": 7, "start": 0, "n": 5}]), [("int32", ids)])
        ok(r["status"] == "ok" and t and t[0].shape == (5, V),
           "a prefill of 5 tokens answers [5, vocab] logits", r)
        r, _ = h.call(dict(step, requests=[{"cache": 8, "start": 3, "n": 1}]),
                      [("int32", ids[:1])])
        ok(r["status"] == "error" and r["code"] == "invalid" and
           "holds 0 positions, the step starts at 3" in r["message"],
           "a step past what a cache holds is refused, naming both", r)
        r, _ = h.call(dict(step, model=99, requests=[{"cache": 7, "start": 5, "n": 1}]),
                      [("int32", ids[:1])])
        ok(r["status"] == "error" and "model 99 is not loaded" in r["message"],
           "a step on a model never loaded is refused naming it", r)
        r, t = h.call(dict(step, requests=[{"cache": 7, "start": 5, "n": 1}]),
                      [("int32", ids[:1])])
        ok(r["status"] == "ok" and t[0].shape == (1, V),
           "the harness keeps serving after refused requests (the cache's sixth position)", r)
    finally:
        h.close()


def main(tmp):
    protocol(tmp)
    jobs = suite()

    cases, results, err = run(tmp, jobs)
    ok(verdicts(cases, {}), "batched attention: every check passes in fp32 and bf16",
       brief(cases) or err[-800:])
    pgs = [cases.get(("paged-cache", d), {}).get("criteria", {}).get("paged", {})
           for d in ("fp32", "bf16")]
    ok(all(p.get("rule") == "band" and p.get("evictions", 0) > 0 and p.get("worst_ratio", 9) < 1
           and sum(q["values_differing"] for q in p.get("per_request", [])) > 0 for p in pgs),
       "batched attention: paged's recomputed logits differ in bits from the uninterrupted run "
       "and lie within 2 band(t) (worst d/allowed %s)" % [p.get("worst_ratio") for p in pgs], pgs)
    pc, _, err = run(tmp, suite(["paged-cache"]), "--serve-fault kv_bf16")
    c = pc.get(("paged-cache", "fp32"), {})
    f = c.get("criteria", {}).get("paged", {}).get("first_failure") or {}
    ok(c.get("failure_class") == "paged_recompute_mismatch" and f.get("rule") == "band" and
       f.get("recomputed") is True and ", in page %d of " % f.get("page", -1) in c.get("error", "")
       and pc.get(("paged-cache", "bf16"), {}).get("verdict") == "passed",
       "batched attention, kv_bf16: paged fp32 fails beyond the band at a recomputed token, "
       "naming its schedule step and page; bf16 passes", brief(pc) or err[-800:])
    ok(cases and all(c.get("device_steps") == "harness" for c in cases.values()) and
       all(r.get("mode", {}).get("serve") == {"fault": "none", "attention": "batched"}
           for r in results),
       "every case's device side ran as harness steps; the result's mode says how")
    lc = cases.get(("long-context", "fp32"), {}).get("criteria", {}).get("long_context", {})
    ok(lc.get("context") == 128 and lc.get("agreement") == 1.0 and lc.get("worst_ratio", 9) < 1,
       "long_context fp32 on torch: 128 positions, every top-1 agrees, inside the band", lc)

    cases, _, err = run(tmp, jobs, "--serve-attention rowwise")
    ok(verdicts(cases, {}), "rowwise attention: every check passes in fp32 and bf16",
       brief(cases) or err[-800:])
    pd = cases.get(("prefill-decode", "fp32"), {}).get("criteria", {}).get("prefill_decode", {})
    ok(pd.get("worst_ratio") == 0 and pd.get("positions") == 32,
       "rowwise attention: the fp32 prefill equals the cached decode bit for bit (d = 0 at all "
       "32 positions)", pd.get("worst_ratio"))
    pg = cases.get(("paged-cache", "fp32"), {}).get("criteria", {}).get("paged", {})
    ok(pg.get("evictions", 0) > 0 and pg.get("judged") is True,
       "rowwise attention: paged evicted and recomputed (%s evictions), judged (%s)"
       % (pg.get("evictions"), pg.get("rule")), pg)

    cases, _, err = run(tmp, jobs, "--serve-attention rowwise --serve-fault kv_bf16")
    ok(verdicts(cases, {("prefill-decode", "fp32"): ("failed", "prefill_decode_mismatch"),
                        ("long-context", "fp32"): ("failed", "context_growth"),
                        ("paged-cache", "fp32"): ("failed", "paged_recompute_mismatch")}),
       "kv_bf16 (a bf16 cache under fp32 jobs): prefill_decode, long_context and paged fail in "
       "fp32; batch, sustained and every bf16 case pass", brief(cases) or err[-800:])
    e = {k[0]: c.get("error", "") for k, c in cases.items() if k[1] == "fp32"}
    ok(e.get("prefill-decode", "").startswith("position 1 of 32") and
       e.get("long-context", "").startswith("position 1 of 128") and
       "recomputation" in e.get("paged-cache", ""),
       "kv_bf16: the failures name position 1 (the first read of the cache) and the "
       "recomputation", e)

    cases, _, err = run(tmp, jobs, "--serve-attention rowwise --serve-fault batch_splitk")
    ok(verdicts(cases, {("batch-invariance", "fp32"): ("failed", "batch_variance"),
                        ("sustained-batching", "fp32"): ("failed", "sustained_variance"),
                        ("paged-cache", "fp32"): ("failed", "paged_recompute_mismatch")}),
       "batch_splitk (split-k by row count): batch, sustained and paged fail in fp32; "
       "prefill_decode, long_context and bf16 pass", brief(cases) or err[-800:])
    e = {k[0]: c.get("error", "") for k, c in cases.items() if k[1] == "fp32"}
    ok(e.get("batch-invariance", "").startswith("batch of 2 requests (prompt lengths 16, 3), "
                                                "layout packed") and
       "from decode step 0" in e.get("batch-invariance", "") and
       "schedule step" in e.get("sustained-batching", ""),
       "batch_splitk: the failures name the batch of 2, the layout, the decode step and the "
       "schedule step", e)

    # The selections through the harness's op entry (worker/harness/torch_select.py:
    # numval's Philox uniform, the distribution in torch's fp32 or fp64).
    sel = [{"op": "argmax", "shapes": [[64, 50], [7]]},
           {"op": "sample", "shapes": [[256, 50]],
            "attrs": {"temperature": 0.7, "top_k": 20, "top_p": 0.9, "seed": 5}},
           {"op": "sample", "shapes": [[1000, 64]], "attrs": {"seed": 9, "offset": 123}}]
    jobs = [dict({"kind": "op", "name": "%s-%d" % (j["op"], i), "dtypes": ["fp32", "bf16", "fp64"],
                  "inputs": ["normal", "specials", "large"]}, **j) for i, j in enumerate(sel)]
    _, results, err = run(tmp, jobs)
    got = [(r.get("op"), c["dtype"], c["input"], c["verdict"]) for r in results for c in r["cases"]]
    ok(len(got) == 9 * sum(len(j["shapes"]) for j in sel) and all(g[3] == "passed" for g in got),
       "argmax and sample op jobs pass on torch (normal, specials, large; fp32, bf16, fp64)",
       [g for g in got if g[3] != "passed"] or err[-800:])

    # Whether torch.matmul in bf16 changes a row's bits with the row count
    # depends on the CPU kernel torch picks (measured: it does where oneDNN's
    # bf16 kernels run, AVX-512 BF16 CPUs; it does not on an AVX2-only CPU),
    # so the expected verdict comes from torch on this machine.
    variant = matmul_bf16_batch_variant()
    cases, _, err = run(tmp, suite(["prefill-decode", "batch-invariance"]), "--no-requests")
    want = {("batch-invariance", "bf16"): ("failed", "batch_variance")} if variant else {}
    ok(len(cases) == 4 and all(c.get("device_steps") == "ops" for c in cases.values()) and
       all(c.get("verdict") == want.get(k, ("passed",))[0] for k, c in cases.items()),
       "without the serve request the jobs run op by op; torch.matmul in bf16 %s batch "
       "invariance on this CPU, and the batch check says so" %
       ("fails" if variant else "keeps"), brief(cases) or err[-800:])


MATMUL_PROBE = """
import torch
torch.set_num_threads(1)
g = torch.Generator().manual_seed(0)
variant = False
for k in (16, 32, 64, 128, 256):
    for n in (16, 64, 256):
        w = torch.randn(k, n, generator=g).bfloat16()
        a = torch.randn(8, k, generator=g).bfloat16()
        full = torch.matmul(a, w)
        for r in (1, 2, 3, 5):
            variant |= not torch.equal(torch.matmul(a[:r], w), full[:r])
print("variant" if variant else "invariant")
"""


def matmul_bf16_batch_variant():
    """torch.matmul in bf16 on this machine: does a row of a product change
    with the number of rows multiplied (row 0..r-1 of 8 rows against r rows)?"""
    p = subprocess.run([TORCH_PY, "-c", MATMUL_PROBE], capture_output=True, text=True,
                       timeout=120)
    return p.stdout.strip() == "variant"


if __name__ == "__main__":
    if not torch_available():
        print("1..0 # SKIP %s cannot import torch and numpy" % TORCH_PY)
        sys.exit(77)
    tmp = tempfile.mkdtemp(prefix="nvtest-torch-serving-")
    try:
        main(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(finish())
