#!/usr/bin/env python3
"""A model failure in graph execution ends as a fused suite case
(docs/MODEL.md "Localization"), with real processes: numvald, a worker on emu
with bf16 accumulation only in the first block's score matmul
(emu:fused_accum_node=decoder.0.scores:bf16, a fault of the graph entry) and
one on the correct emu.

- The shipped decoder-only LM (suites/model.json "decoder-lm", fp32, one
  sample, "execution": "graph") fails at layer decoder.0, op bmm, node
  decoder.0.scores; the case says its reproducer is a fused case of that layer.
- The artifact is a fused job of the layer's nodes alone (the node names kept,
  so the fault keyed by the node name applies to it), its inputs the model's
  graph inputs the layer reads and the upstream node it reads, and it records
  the model node it came from.
- The agent gates it with the fused kind (5/5 runs fail, every node's fused
  value bit-identical), minimizes it (to the score bmm alone) and uploads it;
  the case carries the fused signature (its id recomputed here).
- The stored case is a valid stored_model_case (schema/result.schema.json).
- numvald promotes it: one suite case of kind fused, bmm fp32.
- A suite job replays it: it fails on the faulty mode and passes on emu.

usage: test_model_fused_promote.py NUMVALD NUMVAL-WORKER NUMVALCTL SOURCE_ROOT"""
import json
import os
import sys

import nvschema
from nvartifact import signature_id
from nvservice import Service, check, main

ROOT = sys.argv.pop(4) if len(sys.argv) > 4 else ""
FAULTY = "emu:fused_accum_node=decoder.0.scores:bf16"


def shipped_lm():
    with open(os.path.join(ROOT, "suites", "model.json")) as f:
        job = [j for j in json.load(f)["jobs"] if j["name"] == "decoder-lm"][0]
    job.pop("description", None)
    job.update({"dtypes": ["fp32"], "samples": 1, "execution": "graph"})
    return job


def test(bins):
    lm = shipped_lm()
    with Service(bins, lease_ms=4000) as s:
        s.start_daemon()
        s.start_worker("faulty", FAULTY)
        s.start_worker("emu", "emu")

        j1 = s.submit_build(lm, "faulty", "f1")
        check(s.wait_jobs([j1], 120)[j1]["state"] == "failed", "the LM fails on %s" % FAULTY)
        cs = [c for c in s.cases(j1) if c["verdict"] == "failed"]
        check(len(cs) == 1, "one failed case (%d)" % len(cs))
        c = cs[0]
        errs = nvschema.errors(nvschema.validator("stored_model_case"), c)
        check(not errs, "the case is a valid stored_model_case: %s" % errs)
        fd = c.get("first_divergent") or {}
        check(fd.get("layer") == "decoder.0" and fd.get("node") == "decoder.0.scores" and
              fd.get("op") == "bmm", "first divergent layer decoder.0, op bmm: %s"
              % json.dumps(fd)[:200])
        check((c.get("localized") or {}).get("state") == "fused_case" and
              len(c.get("artifact", "")) == 64,
              "the case says its reproducer is a fused case and names it (%s)"
              % c.get("localized"))

        man, records = s.artifact(c["artifact"])
        nodes = [n["name"] for n in man["spec"]["graph"]["nodes"]]
        ins = [i["name"] for i in man["spec"]["graph"]["inputs"]]
        names = [r[0] for r in records]
        check(man["spec"]["kind"] == "fused" and nodes and
              all(n.startswith("decoder.0.") for n in nodes) and "decoder.0.scores" in nodes,
              "the artifact is a fused job of layer decoder.0's %d nodes alone" % len(nodes))
        check("embed.x" in ins and "wq" not in ins and "decoder.0.wq" in ins and
              all(("input:" + i) in names for i in ins) and
              all(("fused:" + n) in names for n in nodes),
              "its inputs: the upstream node embed.x and the layer's parameters, each stored; "
              "every node's fused value stored (%s)" % ins)
        check(man.get("model", {}).get("node") == "decoder.0.scores" and
              man["model"].get("layer") == "decoder.0" and
              man["model"].get("execution") == "graph",
              "the artifact records the model node it came from (%s)" % man.get("model"))

        check(c.get("repro_rate") == {"runs": 5, "failed": 5, "bit_identical": 5},
              "gate (fused kind): 5/5 runs fail, bit-identical (%s)" % c.get("repro_rate"))
        sig = c.get("signature") or {}
        check(sig.get("kind") == "fused" and sig.get("op") == "bmm" and
              sig.get("dtype") == "fp32" and sig.get("id") == signature_id(sig),
              "fused signature (bmm, fp32, %s), id = sha256 of its canonical JSON"
              % sig.get("failure_class"))
        check(c.get("flaky") is False and len(c.get("minimized_artifact", "")) == 64,
              "the case carries its minimized artifact")
        mman, _ = s.artifact(c["minimized_artifact"])
        mnodes = [n["name"] for n in mman["spec"]["graph"]["nodes"]]
        check(mman["spec"]["kind"] == "fused" and "decoder.0.scores" in mnodes and
              len(mnodes) < len(nodes) and mman.get("minimized_from") == c["artifact"],
              "minimized from the layer's %d nodes to %s" % (len(nodes), mnodes))

        st, suite = s.api("GET", "/api/v1/suite", scope="read")
        check(st == 200 and len(suite["suite"]) == 1, "promoted: one suite case")
        sc = suite["suite"][0]
        check(sc["kind"] == "fused" and sc["op"] == "bmm" and sc["dtype"] == "fp32" and
              sc["signature"] == sig["id"] and sc["artifact"] == c["minimized_artifact"] and
              sc["origin_job"] == int(j1),
              "suite case: kind fused, bmm fp32, the minimized artifact, origin job (%s)"
              % {k: sc.get(k) for k in ("kind", "op", "dtype", "origin_job")})

        sj_bad = s.submit_build({"kind": "suite"}, "faulty", "f2")
        done = s.wait_jobs([sj_bad], 120)
        sj_ok = s.submit_build({"kind": "suite"}, "emu", "f3")
        done.update(s.wait_jobs([sj_ok], 120))
        bad = [(x.get("kind"), x["verdict"]) for x in s.cases(sj_bad)]
        good = [(x.get("kind"), x["verdict"]) for x in s.cases(sj_ok)]
        check(done[sj_bad]["state"] == "failed" and bad == [("fused", "failed")],
              "suite replay on the faulty mode: the fused case fails (%s)" % bad)
        check(done[sj_ok]["state"] == "passed" and good == [("fused", "passed")],
              "suite replay on emu: it passes (%s)" % good)


if __name__ == "__main__":
    main(test)
