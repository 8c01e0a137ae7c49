#!/usr/bin/env python3
"""Model failures end as permanent suite cases (docs/MODEL.md "Localization"),
with real processes: numvald, a worker on emu with every op output held in fp8
e5m2 (emu:storage=fp8_e5m2) and one on the correct emu.

- The shipped decoder-only LM (suites/model.json "decoder-lm", fp32, one
  sample) fails; the case names the first divergent layer and op (embed /
  embedding, node embed.x) and says its reproducer is an op case.
- The agent gates that op case (5/5 runs fail the same way, bit-identical),
  minimizes it and uploads it; the case carries the op signature (its id
  recomputed here as the SHA-256 of its canonical JSON).
- numvald promotes it: one suite case of kind op, named by the localized op and
  dtype (embedding, fp32), whose artifact is an op job of that op alone with
  fewer non-neutral elements than the model's, and which records the model
  node it came from.
- The MLP classifier fails at its first matmul: a second suite case (matmul).
- A suite job replays both: they fail on the faulty mode and pass on emu.
- The stored job and its cases are valid stored_job / stored_model_case
  (schema/result.schema.json), and a mutated case is rejected.

usage: test_model_promote.py NUMVALD NUMVAL-WORKER NUMVALCTL SOURCE_ROOT"""
import json
import os
import sys

import nvschema
from nvartifact import signature_id
from nvservice import Service, check, main

ROOT = sys.argv.pop(4) if len(sys.argv) > 4 else ""
FAULTY = "emu:storage=fp8_e5m2"


def shipped(name):
    with open(os.path.join(ROOT, "suites", "model.json")) as f:
        job = [j for j in json.load(f)["jobs"] if j["name"] == name][0]
    job.pop("description", None)
    job["dtypes"] = ["fp32"]
    job["samples"] = 1
    return job


def failed_case(s, job_id):
    cs = [c for c in s.cases(job_id) if c["verdict"] == "failed"]
    check(len(cs) == 1, "job %s: one failed case (%d)" % (job_id, len(cs)))
    return cs[0]


def nonneutral(records, name):
    """Elements of tensor record name whose bytes are not all zero (+0.0)."""
    for r in records:
        if r[0] == name:
            n = 1
            for e in r[2]:
                n *= e
            w = len(r[3]) // n if n else 0
            return sum(1 for i in range(n) if any(r[3][i * w:(i + 1) * w]))
    return None


def check_stored(s, job_id):
    errs = nvschema.errors(nvschema.validator("stored_job"), s.job(job_id))
    check(not errs, "job %s as stored_job: %s" % (job_id, errs))
    v = nvschema.validator("stored_model_case")
    for c in s.cases(job_id):
        errs = nvschema.errors(v, c)
        check(not errs, "case %s as stored_model_case: %s" % (c["id"], errs))
        bad = dict(c, localized={"state": "somewhere", "reason": "x"})
        check(nvschema.errors(v, bad), "a case with localized state 'somewhere' is rejected")


def check_localized(s, job_id, name, layer, node, op):
    check_stored(s, job_id)
    c = failed_case(s, job_id)
    fd = c.get("first_divergent") or {}
    check(fd.get("layer") == layer and fd.get("node") == node and fd.get("op") == op and
          fd.get("local", {}).get("verdict") == "outside_tolerance",
          "first divergent layer %s, op %s (node %s), outside its own tolerance: %s"
          % (layer, op, node, json.dumps(fd)[:300]))
    check((c.get("localized") or {}).get("state") == "op_case" and
          len(c.get("artifact", "")) == 64,
          "the case says its reproducer is an op case and names its artifact (%s)"
          % c.get("localized"))
    check(c.get("repro_rate") == {"runs": 5, "failed": 5, "bit_identical": 5},
          "gate: 5/5 runs of the op case fail, bit-identical (%s)" % c.get("repro_rate"))
    sig = c.get("signature") or {}
    check(sig.get("kind") == "op" and sig.get("op") == op and sig.get("dtype") == "fp32" and
          sig.get("id") == signature_id(sig),
          "op signature (%s, fp32, %s), id = sha256 of its canonical JSON"
          % (op, sig.get("failure_class")))
    check(c.get("flaky") is False and len(c.get("minimized_artifact", "")) == 64,
          "the case carries its minimized artifact")
    man, records = s.artifact(c["minimized_artifact"])
    check(man["spec"]["kind"] == "op" and man["spec"]["op"] == op and
          man.get("minimized_from") == c["artifact"],
          "the minimized artifact is an op job of %s alone, minimized from the model's (%s)"
          % (op, json.dumps(man["spec"])[:200]))
    orig, orig_records = s.artifact(c["artifact"])
    check(orig.get("model", {}).get("node") == node and
          orig["model"].get("layer") == layer and orig["model"].get("job") == name,
          "the model's artifact records the node it came from (%s)" % orig.get("model"))
    before = nonneutral(orig_records, "input:0")
    after = nonneutral(records, "input:0")
    check(before is not None and after is not None and after < before,
          "minimized: input:0 has %s non-zero elements, the model's had %s" % (after, before))
    return c, sig


def test(bins):
    lm, mlp = shipped("decoder-lm"), shipped("mlp-classifier")
    with Service(bins, lease_ms=4000) as s:
        s.start_daemon()
        s.start_worker("faulty", FAULTY)
        s.start_worker("emu", "emu")

        j1 = s.submit_build(lm, "faulty", "f1")
        check(s.wait_jobs([j1], 120)[j1]["state"] == "failed", "the LM fails on %s" % FAULTY)
        c1, sig1 = check_localized(s, j1, "decoder-lm", "embed", "embed.x", "embedding")

        st, suite = s.api("GET", "/api/v1/suite", scope="read")
        check(st == 200 and len(suite["suite"]) == 1, "promoted: one suite case")
        sc = suite["suite"][0]
        check(sc["kind"] == "op" and sc["op"] == "embedding" and sc["dtype"] == "fp32" and
              sc["signature"] == sig1["id"] and sc["artifact"] == c1["minimized_artifact"] and
              sc["origin_job"] == int(j1),
              "suite case: kind op, embedding fp32, the minimized artifact, origin job (%s)"
              % {k: sc.get(k) for k in ("kind", "op", "dtype", "origin_job")})

        j2 = s.submit_build(mlp, "faulty", "f1")
        check(s.wait_jobs([j2], 120)[j2]["state"] == "failed", "the MLP fails on %s" % FAULTY)
        c2, sig2 = check_localized(s, j2, "mlp-classifier", "fc_in", "fc_in.h", "matmul")
        st, suite = s.api("GET", "/api/v1/suite", scope="read")
        ops = sorted((x["kind"], x["op"], x["dtype"]) for x in suite["suite"])
        check(ops == [("op", "embedding", "fp32"), ("op", "matmul", "fp32")],
              "two suite cases, one per localized op: %s" % ops)

        sj_bad = s.submit_build({"kind": "suite"}, "faulty", "f2")
        done = s.wait_jobs([sj_bad], 120)
        sj_ok = s.submit_build({"kind": "suite"}, "emu", "f3")
        done.update(s.wait_jobs([sj_ok], 120))
        bad = sorted((c.get("op"), c["verdict"]) for c in s.cases(sj_bad))
        ok = sorted((c.get("op"), c["verdict"]) for c in s.cases(sj_ok))
        check(done[sj_bad]["state"] == "failed" and
              bad == [("embedding", "failed"), ("matmul", "failed")],
              "suite replay on the faulty mode: both op cases fail (%s)" % bad)
        check(done[sj_ok]["state"] == "passed" and
              ok == [("embedding", "passed"), ("matmul", "passed")],
              "suite replay on emu: both pass (%s)" % ok)


if __name__ == "__main__":
    main(test)
