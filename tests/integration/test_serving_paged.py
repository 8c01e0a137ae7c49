#!/usr/bin/env python3
"""The paged check's rule (docs/SERVING.md "paged"): the paged-cache job of
suites/serving.json (4 requests under 9 of 17 pages) on emu's modes.
- emu (reduction order sequential, deterministic): judged bit for bit, 0 values
  differ, passes.
- emu:reduce=pairwise (deterministic, but the sum's grouping follows its
  length, so a recomputed prefill's masked row does not reproduce the decode
  step's bits): fp32 logits differ from the run without eviction, and the case
  passes, every token from a request's first recomputation on judged within
  2 band(t), the others bit for bit.
- emu:reduce=random (declares nondeterministic ops): every token judged within
  the band; passes.
- a wrong recomputation still fails: emu:kv_cache=bf16 (a cache held in bf16
  under fp32) bit for bit, and with reduce=pairwise or reduce=random within the
  band, at a token the recomputation computed; the message and the
  first_failure fields name the request, token, schedule step, position and
  page, and agree.
- emu:reduce=pairwise,batch_splitk=on: a decode step in another batch, before
  any recomputation, still judged bit for bit (the batch check's packed rule).
Every case is valid against serving_case (schema/result.schema.json), and a
case whose first_failure lost its page is rejected.

usage: test_serving_paged.py NUMVAL_WORKER SOURCE_ROOT
Prints TAP. Temp files live in a temp dir that is always removed."""
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import nvschema
from nvtap import ok, finish

WORKER, ROOT = sys.argv[1:3]
VALID = nvschema.validator("serving_case")


def paged_job():
    with open(os.path.join(ROOT, "suites", "serving.json")) as f:
        return next(j for j in json.load(f)["jobs"] if j["check"] == "paged")


def run(tmp, backend):
    """{dtype: case} of the paged job on backend."""
    path, out = os.path.join(tmp, "paged.json"), os.path.join(tmp, "out.json")
    with open(path, "w") as f:
        json.dump({"name": "paged", "jobs": [paged_job()]}, f)
    if os.path.exists(out):
        os.unlink(out)
    subprocess.run([WORKER, "run", path, "--backend", backend, "--threads", "2", "--output", out],
                   capture_output=True, text=True, timeout=600)
    if not os.path.exists(out):
        return {}
    with open(out) as f:
        doc = json.load(f)
    cases = {c["dtype"]: c for r in doc.get("results", []) for c in r["cases"]}
    errs = [e for c in cases.values() for e in nvschema.errors(VALID, c)]
    ok(cases and not errs, "%s: every case valid against serving_case" % backend, errs[:3])
    return cases


def pg(c):
    return c.get("criteria", {}).get("paged", {})


def band_after_recompute(p, steps):
    """Deterministic, not sequential: each request's tokens from its first
    recomputation on in the band, the earlier ones bit for bit."""
    return all(q["tokens_band"] + q["tokens_bitwise"] == steps and q["recomputations"] > 0 and
               0 < q["tokens_band"] < steps for q in p["per_request"])


def caught(c, rule, steps_prompts, page):
    """A failure at a recomputed token, its fields and message agreeing."""
    f = pg(c).get("first_failure") or {}
    if not (c.get("verdict") == "failed" and c.get("failure_class") == "paged_recompute_mismatch"
            and f.get("rule") == rule and f.get("recomputed") is True):
        return False
    pos = steps_prompts[f["request"]] - 1 + f["token"]
    m = re.match(r"request (\d+), token (\d+) \(schedule step (\d+); position (\d+), in page (\d+) "
                 r"of (\d+) positions\)", c.get("error", ""))
    return (m and [int(x) for x in m.groups()] ==
            [f["request"], f["token"], f["schedule_step"], pos, pos // page, page] and
            f["position"] == pos and f["page"] == pos // page and
            "computed by the recomputation of its evicted cache" in c["error"] and
            (rule == "bits" or f["d"] > f["allowed"]))


def main(tmp):
    job = paged_job()
    steps, page = job["steps"], job["page"]
    prompts = [job["prompt"]] + job["others"]

    cases = run(tmp, "emu")
    p = pg(cases.get("fp32", {}))
    ok(all(c["verdict"] == "passed" and pg(c)["rule"] == "bits" for c in cases.values()) and
       p.get("evictions", 0) > 0 and p.get("first_failure", 0) is None and
       all(q["values_differing"] == 0 and q["tokens_bitwise"] == steps for q in p["per_request"]),
       "emu (sequential, deterministic): judged bit for bit, 0 values differ", p)

    cases = run(tmp, "emu:reduce=pairwise")
    p = pg(cases.get("fp32", {}))
    ok(all(c["verdict"] == "passed" and pg(c)["rule"] == "band" for c in cases.values()) and
       sum(q["values_differing"] for q in p["per_request"]) > 0 and
       band_after_recompute(p, steps) and 0 < p["worst_ratio"] < 1,
       "emu:reduce=pairwise: fp32 bits differ after a recomputation, within 2 band(t) of the "
       "uninterrupted run (worst d/allowed %s); passes" % p.get("worst_ratio"), p)

    cases = run(tmp, "emu:reduce=random")
    p = pg(cases.get("fp32", {}))
    ok(all(c["verdict"] == "passed" and pg(c)["rule"] == "band" for c in cases.values()) and
       all(q["tokens_band"] == steps for q in p["per_request"]) and p["worst_ratio"] < 1,
       "emu:reduce=random (nondeterministic ops declared): every token within the band; passes", p)

    for backend, rule in (("emu:kv_cache=bf16", "bits"), ("emu:reduce=pairwise,kv_cache=bf16", "band"),
                          ("emu:reduce=random,kv_cache=bf16", "band")):
        cases = run(tmp, backend)
        c = cases.get("fp32", {})
        ok(caught(c, rule, prompts, page) and cases.get("bf16", {}).get("verdict") == "passed",
           "%s: fp32 fails (%s) at a recomputed token, the message naming request, token, "
           "schedule step, position and page as the fields do; bf16 passes" % (backend, rule),
           (c.get("error"), pg(c).get("first_failure")))
        if rule == "band" and c:
            m = copy.deepcopy(c)
            del m["criteria"]["paged"]["first_failure"]["page"]
            ok(nvschema.errors(VALID, m), "serving_case rejects a first_failure without its page")

    cases = run(tmp, "emu:reduce=pairwise,batch_splitk=on")
    c = cases.get("fp32", {})
    f = pg(c).get("first_failure") or {}
    ok(c.get("verdict") == "failed" and f.get("rule") == "bits" and f.get("recomputed") is False and
       "a decode step in another batch, before any recomputation" in c.get("error", ""),
       "reduce=pairwise,batch_splitk=on: a decode step before any recomputation is still judged "
       "bit for bit and fails", (c.get("error"), f))


if __name__ == "__main__":
    tmp = tempfile.mkdtemp(prefix="nvtest-serving-paged-")
    try:
        main(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(finish())
