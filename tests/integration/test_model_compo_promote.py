#!/usr/bin/env python3
"""A model failure of the composition ends as a fused suite case
(docs/MODEL.md "Localization", "A composition"), with real processes:
numvald, a worker on emu rounding every result toward zero (emu:rounding=rtz)
and one on the correct emu.

Round toward zero keeps each op within its own tolerance (an error under one
ulp, in one direction), but the errors share a sign, so through a chain of
matmuls and activations they add up where correctly rounded errors partly
cancel: the shipped MLP with its hidden block repeated 6 times, in bf16,
leaves the band at hidden.2.a while every op alone is within its tolerance.

- The case's first divergent op (gelu at hidden.2.a) is within its default
  tolerance on the inputs the device gave it ("local"), and the case says its
  reproducer is a composition case.
- The artifact is a fused job with "composition": {"execution": "unfused"}
  whose graph ends at hidden.2.a (its only output) and starts at the first
  layer (the smallest candidate that fails: no later start does), its inputs
  the model's graph inputs it reads, every node's eager value stored as its
  "unfused:" value.
- The agent gates it with the fused kind (5/5 runs fail, bit-identical),
  minimizes it and uploads it; the signature is the fused one (gelu, bf16,
  out_of_band), its id recomputed here. The stored case is a valid
  stored_model_case.
- numvald promotes it: one suite case of kind fused, gelu bf16.
- A suite job replays it: it fails on the faulty mode and passes on emu.

usage: test_model_compo_promote.py NUMVALD NUMVAL-WORKER NUMVALCTL SOURCE_ROOT"""
import json
import os
import sys

import nvschema
from nvartifact import signature_id
from nvservice import Service, check, main

ROOT = sys.argv.pop(4) if len(sys.argv) > 4 else ""
FAULTY = "emu:rounding=rtz"


def deep_mlp():
    with open(os.path.join(ROOT, "suites", "model.json")) as f:
        job = [j for j in json.load(f)["jobs"] if j["name"] == "mlp-classifier"][0]
    job.pop("description", None)
    job.update({"name": "mlp-deep", "dtypes": ["bf16"], "samples": 1})
    for layer in job["model"]["layers"]:
        if layer.get("block") == "hidden":
            layer["repeat"] = 6
    return job


def test(bins):
    mlp = deep_mlp()
    with Service(bins, lease_ms=4000) as s:
        s.start_daemon()
        s.start_worker("faulty", FAULTY)
        s.start_worker("emu", "emu")

        j0 = s.submit_build(mlp, "emu", "c0")
        check(s.wait_jobs([j0], 120)[j0]["state"] == "passed", "the deep MLP passes on emu")

        j1 = s.submit_build(mlp, "faulty", "c1")
        check(s.wait_jobs([j1], 240)[j1]["state"] == "failed", "it fails on %s" % FAULTY)
        cs = [c for c in s.cases(j1) if c["verdict"] == "failed"]
        check(len(cs) == 1, "one failed case (%d)" % len(cs))
        c = cs[0]
        errs = nvschema.errors(nvschema.validator("stored_model_case"), c)
        check(not errs, "the case is a valid stored_model_case: %s" % errs)
        fd = c.get("first_divergent") or {}
        check(fd.get("node") == "hidden.2.a" and fd.get("op") == "gelu" and
              (fd.get("local") or {}).get("verdict") == "within_tolerance",
              "first divergent node hidden.2.a (gelu), within its tolerance alone: %s"
              % json.dumps(fd)[:300])
        loc = c.get("localized") or {}
        comp = loc.get("composition") or {}
        check(loc.get("state") == "composition_case" and len(c.get("artifact", "")) == 64 and
              comp.get("e_dev", 0) > comp.get("band", 1),
              "the case says its reproducer is a composition case, outside the band (%s)" % loc)

        man, records = s.artifact(c["artifact"])
        spec = man["spec"]
        nodes = [n["name"] for n in spec["graph"]["nodes"]]
        ins = [i["name"] for i in spec["graph"]["inputs"]]
        names = [r[0] for r in records]
        check(spec["kind"] == "fused" and spec.get("composition", {}).get("execution") ==
              "unfused" and spec["graph"]["outputs"] == ["hidden.2.a"] and
              nodes[0] == "fc_in.h" and len(nodes) == comp.get("nodes"),
              "the artifact is a fused composition job of %s ending at hidden.2.a" % nodes)
        check("x" in ins and all(("input:" + i) in names for i in ins) and
              all(("unfused:" + n) in names for n in nodes) and
              man.get("first_divergent", {}).get("criterion") == "composition",
              "its inputs and every node's eager value stored (%s)" % ins)

        check(c.get("repro_rate") == {"runs": 5, "failed": 5, "bit_identical": 5},
              "gate (fused kind): 5/5 runs fail, bit-identical (%s)" % c.get("repro_rate"))
        sig = c.get("signature") or {}
        check(sig.get("kind") == "fused" and sig.get("op") == "gelu" and
              sig.get("dtype") == "bf16" and sig.get("failure_class") == "out_of_band" and
              sig.get("id") == signature_id(sig),
              "fused signature (gelu, bf16, out_of_band), id = sha256 of its canonical JSON "
              "(%s)" % {k: sig.get(k) for k in ("op", "dtype", "failure_class")})
        check(c.get("flaky") is False and len(c.get("minimized_artifact", "")) == 64,
              "the case carries its minimized artifact")
        mman, _ = s.artifact(c["minimized_artifact"])
        check(mman["spec"]["kind"] == "fused" and "composition" in mman["spec"] and
              mman.get("minimized_from") == c["artifact"],
              "minimized (%s), the composition criterion kept"
              % [n["name"] for n in mman["spec"]["graph"]["nodes"]])

        st, suite = s.api("GET", "/api/v1/suite", scope="read")
        check(st == 200 and len(suite["suite"]) == 1, "promoted: one suite case")
        sc = suite["suite"][0]
        check(sc["kind"] == "fused" and sc["op"] == "gelu" and sc["dtype"] == "bf16" and
              sc["signature"] == sig["id"] and sc["artifact"] == c["minimized_artifact"] and
              sc["origin_job"] == int(j1),
              "suite case: kind fused, gelu bf16, the minimized artifact, origin job (%s)"
              % {k: sc.get(k) for k in ("kind", "op", "dtype", "origin_job")})

        sj_bad = s.submit_build({"kind": "suite"}, "faulty", "c2")
        done = s.wait_jobs([sj_bad], 120)
        sj_ok = s.submit_build({"kind": "suite"}, "emu", "c3")
        done.update(s.wait_jobs([sj_ok], 120))
        bad = [(x.get("kind"), x["verdict"]) for x in s.cases(sj_bad)]
        good = [(x.get("kind"), x["verdict"]) for x in s.cases(sj_ok)]
        check(done[sj_bad]["state"] == "failed" and bad == [("fused", "failed")],
              "suite replay on the faulty mode: the fused case fails (%s)" % bad)
        check(done[sj_ok]["state"] == "passed" and good == [("fused", "passed")],
              "suite replay on emu: it passes (%s)" % good)


if __name__ == "__main__":
    main(test)
