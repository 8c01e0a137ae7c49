#!/usr/bin/env python3
"""Serving jobs (docs/SERVING.md): the shipped suites/serving.json passes on
emu's correct mode (fp32; bf16 with fp32 accumulation) for NUMVAL_SERVING_SEEDS
seeds (default 2; the suite's 10-seed run is recorded in docs/SERVING.md), and
each emu serving misbehaviour fails the check that is about it, naming what
changed, while the other checks pass:
- emu:kv_cache=bf16 (the KV cache held in bf16 under an fp32 job): prefill_decode
  fails at position 1 (the first decode step that reads the cache) and
  long_context fails with the position; batch and sustained pass (alone and
  batched read the same cache); bf16 jobs pass (the cache is not narrower).
  paged fails at a token computed by a recomputation (a prefill reads fresh keys
  and values where the uninterrupted run read the narrowed cache).
- emu:batch_splitk=on (matmul rows summed in a split-k chosen by the batch's row
  count): batch fails naming the batch of 2 and the packed layout, from decode
  step 0, sustained naming the request and the schedule step; prefill_decode and
  long_context pass (the split changes fp32 rounding
  only, within the band).
The reported tolerances are recomputed from their parts (the band formula of
docs/MODEL.md), and bad serving specs are refused with the JSON pointer.

usage: test_serving.py NUMVAL_WORKER SOURCE_ROOT
Prints TAP. Temp files live in a temp dir that is always removed."""
import copy
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

from nvtap import ok, finish

WORKER, ROOT = sys.argv[1:3]
SEEDS = int(os.environ.get("NUMVAL_SERVING_SEEDS", "2"))


def suite_jobs():
    with open(os.path.join(ROOT, "suites", "serving.json")) as f:
        return json.load(f)["jobs"]


def run(tmp, jobs, backend, seed):
    jobs = copy.deepcopy(jobs)
    for j in jobs:
        j["seed"] = seed
    path = os.path.join(tmp, "suite.json")
    out = os.path.join(tmp, "out.json")
    with open(path, "w") as f:
        json.dump({"name": "serving-test", "jobs": jobs}, f)
    if os.path.exists(out):
        os.unlink(out)
    p = subprocess.run([WORKER, "run", path, "--backend", backend, "--threads", "2",
                        "--output", out], capture_output=True, text=True, timeout=600)
    doc = None
    if os.path.exists(out):
        with open(out) as f:
            doc = json.load(f)
    return p.returncode, doc, p.stderr


def by_name(doc):
    return {j.get("name"): j for j in (doc or {}).get("results", [])}


def case(job, dtype):
    return next(c for c in job["cases"] if c["dtype"] == dtype)


def unit_roundoff(dt):
    return {"fp32": 2.0 ** -24, "bf16": 2.0 ** -8, "fp16": 2.0 ** -11, "fp64": 2.0 ** -53}[dt]


def small(jobs):
    """The suite with a shorter long context and prompt (the misbehaving modes
    fail early; the correct mode runs the suite as shipped)."""
    jobs = copy.deepcopy(jobs)
    for j in jobs:
        if j["check"] == "long_context":
            j["context"], j["every"] = 256, 32
        if j["check"] == "prefill_decode":
            j["prompt"] = 16
    return jobs


def check_band(c, dec):
    """Recompute 2 band(t) of every reported prefill_decode position."""
    crit = c["criteria"]["prefill_decode"]
    u_acc = unit_roundoff(c["accumulator"])
    worst = 0
    for p in crit["per_position"]:
        k = max(dec["width"], dec["ffn"], p["position"] + 1)
        band = 4 * (p["e_dtype_ref"] + k * u_acc) + unit_roundoff(c["dtype"])
        worst = max(worst, abs(2 * band - p["allowed"]) / (2 * band))
        if (p["d"] <= p["allowed"]) != p["within"]:
            return False
    return worst < 1e-12


def main():
    tmp = tempfile.mkdtemp(prefix="nvtest-serving-")
    try:
        jobs = suite_jobs()
        ok({j["check"] for j in jobs} == {"prefill_decode", "long_context", "batch", "sustained",
                                         "paged", "sampling"},
           "suites/serving.json holds the six checks (sampling: test_serving_sampling.py)")
        for seed in range(1, SEEDS + 1):
            rc, doc, err = run(tmp, jobs, "emu", seed)
            verdicts = [(j.get("name"), c["dtype"], c["verdict"], c.get("error"))
                        for j in (doc or {}).get("results", []) for c in j["cases"]]
            ok(rc == 0 and verdicts and all(v[2] == "passed" for v in verdicts),
               "seed %d: every serving case passes on emu" % seed, (err, verdicts))
            if seed == 1 and doc:
                res = by_name(doc)
                pd = res["prefill-decode"]
                ok(all(check_band(c, pd["decoder"]) for c in pd["cases"]),
                   "prefill_decode: the allowed distance is 2 band(t), recomputed from its parts")
                lc = case(res["long-context"], "fp32")["criteria"]["long_context"]
                ok(lc["context"] == 1024 and lc["points"][-1]["position"] == 1023 and
                   lc["points"][-1]["band"] > lc["points"][0]["band"] and
                   lc["agreement"] == 1.0,
                   "long_context fp32: 1024 positions, the band grows with the position, "
                   "every top-1 agrees", lc)
                b = case(res["batch-invariance"], "fp32")["criteria"]["batch"]
                ok(len(b["compositions"]) == 6 and
                   all(r["values_differing"] == 0 for r in b["compositions"]),
                   "batch fp32: 3 batch sizes x 2 layouts, bit for bit equal to the solo run", b)
                sb = case(res["sustained-batching"], "fp32")["criteria"]["sustained"]
                arrivals = [q["arrives"] for q in sb["per_request"]]
                ok(len(arrivals) == 12 and arrivals == sorted(arrivals) and
                   len(set(arrivals)) > 1 and
                   all(1 <= q["prompt"] <= 12 and 1 <= q["generates"] <= 8 and
                       q["values_differing"] == 0 for q in sb["per_request"]),
                   "sustained fp32: 12 requests on a spread schedule, each equal to its solo run",
                   sb)
                pg = case(res["paged-cache"], "fp32")["criteria"]["paged"]
                ok(pg["judged"] and pg["evictions"] > 0 and
                   all(q["recomputations"] > 0 and q["values_differing"] == 0
                       for q in pg["per_request"]),
                   "paged fp32: every request evicted and recomputed, bit for bit equal", pg)

        rc, doc, err = run(tmp, small(jobs), "emu:kv_cache=bf16", 1)
        res = by_name(doc)
        c = case(res["prefill-decode"], "fp32")
        ok(rc != 0 and c["verdict"] == "failed" and
           c["failure_class"] == "prefill_decode_mismatch" and
           c["error"].startswith("position 1 of 16:"),
           "kv_cache=bf16: prefill_decode fp32 fails at position 1 (the first cached read)", c)
        ok(case(res["prefill-decode"], "bf16")["verdict"] == "passed",
           "kv_cache=bf16: prefill_decode bf16 passes (the cache is not narrower)")
        c = case(res["long-context"], "fp32")
        ok(c["verdict"] == "failed" and c["failure_class"] == "context_growth" and
           c["error"].startswith("position "),
           "kv_cache=bf16: long_context fp32 fails naming the position", c)
        c = case(res["paged-cache"], "fp32")
        ok(c["verdict"] == "failed" and c["failure_class"] == "paged_recompute_mismatch" and
           "computed by the recomputation of its evicted cache" in c["error"],
           "kv_cache=bf16: paged fp32 fails at a recomputed token (it reads fresh keys, the "
           "uninterrupted run the narrowed cache)", c)
        ok(all(x["verdict"] == "passed" for x in res["batch-invariance"]["cases"]) and
           all(x["verdict"] == "passed" for x in res["sustained-batching"]["cases"]),
           "kv_cache=bf16: batch and sustained pass (alone and batched read the same cache)")

        rc, doc, err = run(tmp, small(jobs), "emu:batch_splitk=on", 1)
        res = by_name(doc)
        c = case(res["batch-invariance"], "fp32")
        ok(rc != 0 and c["verdict"] == "failed" and c["failure_class"] == "batch_variance" and
           c["error"].startswith("batch of 2 requests (prompt lengths 16, 3), layout packed: "
                                 "the request's logits differ from its solo run from decode "
                                 "step 0"),
           "batch_splitk=on: batch fp32 fails naming the composition and the step", c)
        c = case(res["sustained-batching"], "fp32")
        ok(c["verdict"] == "failed" and c["failure_class"] == "sustained_variance" and
           "differ from its solo run, in schedule step " in c["error"],
           "batch_splitk=on: sustained fp32 fails naming the request and the schedule step", c)
        ok(all(x["verdict"] == "passed" for x in res["prefill-decode"]["cases"]) and
           all(x["verdict"] == "passed" for x in res["long-context"]["cases"]),
           "batch_splitk=on: prefill_decode and long_context pass (within the band)",
           [(x["dtype"], x["verdict"], x.get("error")) for j in doc["results"]
            for x in j["cases"]])

        op = {"kind": "op", "op": "cache_write", "dtypes": ["fp32", "bf16"],
              "shapes": [[2, 8, 4]], "seed": 1}
        path = os.path.join(tmp, "op.json")
        with open(path, "w") as f:
            json.dump(op, f)
        got = {}
        for be in ("emu", "emu:kv_cache=bf16"):
            p = subprocess.run([WORKER, "run", path, "--backend", be], capture_output=True,
                               text=True, timeout=60)
            got[be] = {c["dtype"]: c["verdict"] for c in json.loads(p.stdout)["cases"]}
        ok(got["emu"] == {"fp32": "passed", "bf16": "passed"} and
           got["emu:kv_cache=bf16"] == {"fp32": "failed", "bf16": "passed"},
           "op jobs of cache_write: pass on emu, fp32 fails with the cache held in bf16", got)

        bad = [({"decoder": {"width": 30, "heads": 4}}, "/decoder/heads"),
               ({"colour": 1}, "/colour"),
               ({"check": "nope"}, "/check"),
               ({"check": "long_context", "context": 16384,
                 "decoder": {"width": 1024, "layers": 16}}, "/context")]
        for patch, ptr in bad:
            spec = {"kind": "serving", "check": "prefill_decode", "decoder": {},
                    "dtypes": ["fp32"]}
            for k, v in patch.items():
                spec[k] = v if not isinstance(v, dict) else dict(spec.get(k, {}), **v)
            path = os.path.join(tmp, "bad.json")
            with open(path, "w") as f:
                json.dump(spec, f)
            p = subprocess.run([WORKER, "run", path, "--backend", "emu"], capture_output=True,
                               text=True, timeout=60)
            ok(p.returncode != 0 and ptr in p.stderr, "a bad spec is refused at %s" % ptr,
               p.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
