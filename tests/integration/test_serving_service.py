#!/usr/bin/env python3
"""Serving jobs through numvald (docs/SERVING.md "Stored results"), with real
processes: numvald, a worker agent on emu and one on emu:batch_splitk=on (a
matmul split-k chosen by the batch's row count, docs/SERVING.md "emu's serving
misbehaviours").

- A bad serving spec is refused at submit naming the field's JSON pointer.
- `numvalctl submit` of the five checks (suites/serving.json, fp32, a shorter
  long context) on emu: every job stored as passed, one case per dtype, and the
  JSON API returns each case with its check's criteria: per-position figures of
  prefill_decode (2 band(t) recomputed from its parts), long_context's points
  with a band that grows with the position, batch's 6 compositions, sustained's
  12 requests, paged's evictions.
- The batch job on emu:batch_splitk=on: stored as failed with the named cause
  (failure_class batch_variance, the message naming the batch of 2 and its
  prompt lengths), the composition table saying what changed; the sustained
  job fails naming the request and the schedule step.
- Every stored job and case validates against stored_job / stored_serving_case
  (schema/result.schema.json); mutated copies are rejected.

usage: test_serving_service.py NUMVALD NUMVAL-WORKER NUMVALCTL SOURCE_ROOT"""
import copy
import json
import math
import os
import subprocess
import sys

import nvschema
from nvservice import Service, check, main

ROOT = sys.argv.pop(4) if len(sys.argv) > 4 else ""
FAULTY = "emu:batch_splitk=on"


def shipped():
    with open(os.path.join(ROOT, "suites", "serving.json")) as f:
        jobs = json.load(f)["jobs"]
    for j in jobs:
        j.pop("description", None)
        j["dtypes"] = ["fp32"]
        # The long context is O(context^2) with exact references; 128 positions
        # keep the band's growth visible (docs/SERVING.md "Measured").
        if j["check"] == "long_context":
            j["context"], j["every"] = 128, 16
        if j["check"] == "prefill_decode":
            j["prompt"] = 12
    return {j["check"]: j for j in jobs}


def u(dt):
    return {"fp32": 2.0 ** -24, "bf16": 2.0 ** -8}[dt]


def sampling_case():
    """A repeated-sampling case as docs/SERVING.md "Stored results" names its
    keys: 8 tokens, counts and expected counts of 800 samples (a fixture)."""
    exp = [200.0, 150.0, 120.0, 100.0, 90.0, 70.0, 40.0, 30.0]
    obs = [207, 141, 125, 97, 88, 74, 38, 30]
    g = 2 * sum(o * math.log(o / e) for o, e in zip(obs, exp))
    return {"index": 0, "op": "serving", "dtype": "fp32", "sample": 0, "seed": 1,
            "check": "sampling", "accumulator": "fp32", "verdict": "passed",
            "criteria": {"sampling": {
                "histogram": [{"token": t, "observed": o, "expected": e}
                              for t, (o, e) in enumerate(zip(obs, exp))],
                "g": g, "df": 7, "p": 0.9, "alpha": 0.001, "samples": 800,
                "reproducible": True, "passed": True}}}


def submit(s, spec, device, name):
    path = os.path.join(s.tmp, name + ".json")
    with open(path, "w") as f:
        json.dump(spec, f)
    p = s.ctl("submit", path, "--device", device, "--wait", "--timeout", "240")
    ids = p.stdout.split()
    check(len(ids) >= 1, "numvalctl submit %s printed %d job ids (%s)" % (name, len(ids), p.stderr[-300:]))
    return p, ids


def validate(s, job_id, cases):
    errs = nvschema.errors(nvschema.validator("stored_job"), s.job(job_id))
    check(not errs, "job %s as stored_job: %s" % (job_id, errs))
    v = nvschema.validator("stored_serving_case")
    for c in cases:
        errs = nvschema.errors(v, c)
        check(not errs, "case %s (%s) as stored_serving_case: %s" % (c["id"], c["check"], errs))


def test(bins):
    jobs = shipped()
    with Service(bins, lease_ms=3000) as s:
        s.start_daemon()
        s.start_worker("emu-ok", "emu")
        s.start_worker("emu-split", FAULTY)

        bad = copy.deepcopy(jobs["batch"])
        bad["others"] = "three"
        with open(os.path.join(s.tmp, "bad.json"), "w") as f:
            json.dump(bad, f)
        p = s.ctl("submit", "bad.json")
        check(p.returncode == 2 and "/others" in p.stderr,
              "a bad serving spec is refused at submit naming the field (%s)" %
              p.stderr.strip()[-200:])

        # Every shipped check on the correct emu, as one suite file.
        suite = {"name": "serving-service", "jobs": list(jobs.values())}
        p, ids = submit(s, suite, "emu-ok", "suite")
        check(p.returncode == 0 and len(ids) == len(jobs),
              "the %d serving checks on emu: numvalctl exits 0 with a job each (%d, %s)" %
              (len(jobs), p.returncode, p.stderr[-400:]))
        stored = {}
        for jid in ids:
            job = s.job(jid)
            cases = s.cases(jid)
            check(job["kind"] == "serving" and job["state"] == "passed" and
                  job["cases_total"] == 1 and len(cases) == 1,
                  "job %s stored as a passed serving job with its one case (%s, %s, %d)" %
                  (jid, job["kind"], job["state"], len(cases)))
            res = job["result"]
            check(res["kind"] == "serving" and res["check"] == cases[0]["check"] and
                  res["decoder"]["width"] == job["spec"]["decoder"]["width"] and
                  "cases" not in res,
                  "job %s: the stored result names the check and the decoder, without cases"
                  % jid)
            validate(s, jid, cases)
            stored[cases[0]["check"]] = (job, cases[0])
        check(set(stored) == set(jobs), "one stored job per check (%s)" % sorted(stored))

        # The per-check fields, as the API returns them.
        job, c = stored["prefill_decode"]
        pd = c["criteria"]["prefill_decode"]
        dec = job["spec"]["decoder"]
        worst = 0.0
        for q in pd["per_position"]:
            k = max(dec["width"], dec["ffn"], q["position"] + 1)
            band = 4 * (q["e_dtype_ref"] + k * u(c["accumulator"])) + u(c["dtype"])
            worst = max(worst, abs(2 * band - q["allowed"]) / (2 * band))
        check(pd["positions"] == 12 and [q["position"] for q in pd["per_position"]] ==
              list(range(12)) and worst < 1e-12 and
              all(q["within"] and q["same_top1"] for q in pd["per_position"]),
              "prefill_decode: 12 positions, each allowed 2 band(t) recomputed from its parts "
              "(worst relative difference %g)" % worst)
        c = stored["long_context"][1]
        lc = c["criteria"]["long_context"]
        check(lc["context"] == 128 and [q["position"] for q in lc["points"]] ==
              list(range(15, 128, 16)) and lc["points"][-1]["band"] > lc["points"][0]["band"] and
              all(q["e_dev"] <= q["band"] for q in lc["points"]) and lc["agreement"] == 1.0,
              "long_context: a point every 16 positions, the band grows with the position, "
              "every top-1 agrees (%s)" % lc["points"][-1])
        b = stored["batch"][1]["criteria"]["batch"]
        check(len(b["compositions"]) == 6 and
              {(r["requests"], r["layout"]) for r in b["compositions"]} ==
              {(n, l) for n in (2, 3, 4) for l in ("packed", "padded")} and
              all(r["values_differing"] == 0 and r["first_differing_step"] is None
                  for r in b["compositions"]),
              "batch: 3 batch sizes x 2 layouts stored, none differing")
        sb = stored["sustained"][1]["criteria"]["sustained"]
        check(sb["requests"] == 12 and len(sb["per_request"]) == 12 and
              all(q["values_differing"] == 0 for q in sb["per_request"]),
              "sustained: 12 requests stored, each equal to its solo run")
        pg = stored["paged"][1]["criteria"]["paged"]
        check(pg["evictions"] > 0 and pg["judged"] and
              sum(q["recomputations"] for q in pg["per_request"]) > 0 and
              all(q["values_differing"] == 0 for q in pg["per_request"]),
              "paged: %d evictions, recomputed caches equal to the uninterrupted run" %
              pg["evictions"])

        # The batch and sustained checks on the split-k device: failed, cause named.
        p, ids = submit(s, {"name": "serving-split", "jobs": [jobs["batch"], jobs["sustained"]]},
                        "emu-split", "split")
        check(p.returncode == 1 and len(ids) == 2,
              "batch and sustained on %s: numvalctl exits 1 (%d, %s)" %
              (FAULTY, p.returncode, p.stderr[-300:]))
        job = s.job(ids[0])
        [c] = s.cases(ids[0])
        others = jobs["batch"]["others"]
        check(job["state"] == "failed" and job["cases_failed"] == 1 and
              c["verdict"] == "failed" and c["failure_class"] == "batch_variance" and
              ("batch of 2 requests (prompt lengths %d, %d)" % (jobs["batch"]["prompt"], others[0]))
              in c["error"] and "decode step 0" in c["error"],
              "batch on %s stored as failed, batch_variance, naming the batch of 2 (%s)" %
              (FAULTY, c.get("error")))
        rows = c["criteria"]["batch"]["compositions"]
        first = rows[0]
        check(first["requests"] == 2 and first["prompt_lengths"] == [jobs["batch"]["prompt"],
                                                                    others[0]] and
              not first["passed"] and first["values_differing"] > 0 and
              first["first_differing_step"] == 0 and
              job["result"]["mode"]["serving"]["batch_splitk"] is True,
              "the stored composition table says what changed (%s)" % first)
        validate(s, ids[0], [c])
        [c2] = s.cases(ids[1])
        check(c2["verdict"] == "failed" and c2["failure_class"] == "sustained_variance" and
              "schedule step" in c2["error"] and c2["error"].startswith("request "),
              "sustained on %s stored as failed, naming the request and schedule step (%s)" %
              (FAULTY, c2.get("error")))
        validate(s, ids[1], [c2])

        # The validator can fail: mutated copies of a stored case are rejected.
        v = nvschema.validator("stored_serving_case")
        for what, m in nvschema.mutations(c):
            check(nvschema.errors(v, m), "stored_serving_case rejects a case with %s" % what)
        m = copy.deepcopy(c)
        m["criteria"]["batch"]["compositions"][0]["layout"] = "ragged"
        check(nvschema.errors(v, m), "stored_serving_case rejects a composition layout 'ragged'")
        m = copy.deepcopy(c)
        m["check"] = "paged"
        check(nvschema.errors(v, m), "stored_serving_case rejects check 'paged' with batch criteria")
        # numval-worker run's own result of the failing batch job validates as a
        # suite run (the serving_result under job_result).
        spec = os.path.join(s.tmp, "batch.json")
        with open(spec, "w") as f:
            json.dump(jobs["batch"], f)
        out = os.path.join(s.tmp, "batch-out.json")
        subprocess.run([bins["worker"], "run", spec, "--backend", FAULTY, "--output", out],
                       capture_output=True, timeout=300)
        with open(out) as f:
            doc = json.load(f)
        errs = nvschema.errors(nvschema.validator(), doc)
        check(doc["kind"] == "serving" and doc["verdict"] == "failed" and not errs,
              "numval-worker run's serving result validates (%s)" % errs)

        # The repeated-sampling record under the documented key names (the
        # check's producer is not in this tree yet): accepted, and its
        # histogram entries and p checked.
        smp = sampling_case()
        errs = nvschema.errors(nvschema.validator("serving_case"), smp)
        check(not errs, "a sampling case with histogram, g, df, p, alpha, samples, "
              "reproducible validates: %s" % errs)
        for what, fn in (("a histogram entry without 'expected'",
                          lambda m: m["criteria"]["sampling"]["histogram"][0].pop("expected")),
                         ("p of 1.5", lambda m: m["criteria"]["sampling"].update(p=1.5)),
                         ("no 'reproducible'",
                          lambda m: m["criteria"]["sampling"].pop("reproducible"))):
            m = copy.deepcopy(smp)
            fn(m)
            check(nvschema.errors(nvschema.validator("serving_case"), m),
                  "serving_case rejects a sampling record with %s" % what)

        bad = s.sanitizer_reports()
        check(not bad, "no sanitizer reports: %s" % bad[:3])


if __name__ == "__main__":
    main(test)
