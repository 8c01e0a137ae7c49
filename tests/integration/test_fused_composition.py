#!/usr/bin/env python3
"""The fused kind's composition criterion (docs/JOBS.md "Fused jobs",
"composition") through the real numval-worker.

Usage: test_fused_composition.py NUMVAL_WORKER
A chain of 8 matmul + gelu pairs in bf16 (3 samples), its output judged by the
model's band:
- on emu, unfused and fused, every case passes: the device's error stays
  within the band of the correctly rounded execution of the same graph;
- on emu:rounding=rtz (every result rounded toward zero, each op within its
  own tolerance), the unfused execution fails every case with class
  out_of_band, the output a7 named as the first divergent node with criterion
  "composition" and e_dev above the band, and no node outside its own
  tolerance (the per-node judgement alone passes it);
- the same graph without "composition" passes on emu:rounding=rtz: what fails
  it is the composition criterion, not a node;
- every result is valid against schema/result.schema.json;
- the fused execution under rtz passes (emu's graph entry holds
  intermediates in fp32, so the bias of the stored results does not arise):
  the criterion judges the execution it names.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nvschema  # noqa: E402

WORKER = sys.argv[1]
failures = 0


def check(cond, msg):
    global failures
    print(("ok - " if cond else "not ok - ") + msg, flush=True)
    if not cond:
        failures += 1


def chain(execution):
    ins, nodes, prev = [{"name": "x", "shape": [64, 32]}], [], "x"
    for i in range(8):
        ins.append({"name": "w%d" % i, "shape": [32, 32]})
        nodes.append({"name": "h%d" % i, "op": "matmul", "inputs": [prev, "w%d" % i]})
        nodes.append({"name": "a%d" % i, "op": "gelu", "inputs": ["h%d" % i]})
        prev = "a%d" % i
    job = {"kind": "fused", "name": "chain", "dtypes": ["bf16"], "seed": 2, "samples": 3,
           "intermediate_dtype": "bf16",
           "graph": {"inputs": ins, "nodes": nodes, "outputs": [prev]}}
    if execution:
        job["composition"] = {"execution": execution}
    return job


def run(job, backend, tmp):
    path = os.path.join(tmp, "job.json")
    with open(path, "w") as f:
        json.dump(job, f)
    p = subprocess.run([WORKER, "run", path, "--backend", backend], capture_output=True,
                       text=True, timeout=300)
    doc = json.loads(p.stdout)
    errs = nvschema.errors(nvschema.validator(), doc)
    check(not errs, "the %s result on %s is valid (schema/result.schema.json): %s"
          % ("composition" if "composition" in job else "plain", backend, errs))
    return doc["cases"]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        for ex in ("unfused", "fused"):
            cs = run(chain(ex), "emu", tmp)
            check(len(cs) == 3 and all(c["verdict"] == "passed" and
                                       c["composition"]["passed"] for c in cs),
                  "%s on emu: 3/3 cases pass the band (%s)" %
                  (ex, [round(c["composition"]["outputs"][0]["e_dev"] /
                              c["composition"]["outputs"][0]["band"], 3) for c in cs]))
        cs = run(chain("unfused"), "emu:rounding=rtz", tmp)
        fds = [c.get("first_divergent") or {} for c in cs]
        outs = [c["composition"]["outputs"][0] for c in cs]
        check(len(cs) == 3 and all(c["verdict"] == "failed" and
                                   c.get("failure_class") == "out_of_band" for c in cs),
              "unfused on emu:rounding=rtz: 3/3 cases fail out_of_band")
        check(all(fd.get("node") == "a7" and fd.get("criterion") == "composition" and
                  fd.get("execution") == "unfused" and fd.get("e_dev") > fd.get("band")
                  for fd in fds),
              "the first divergent node is the output a7, by the composition criterion (%s)"
              % [(round(o["e_dev"], 4), round(o["band"], 4)) for o in outs])
        check(all(n["state"] == "within_tolerance" for c in cs for n in c["nodes"]),
              "every node is within its own tolerance")
        cs = run(chain(None), "emu:rounding=rtz", tmp)
        check(all(c["verdict"] == "passed" and "composition" not in c for c in cs),
              "without the criterion the same graph passes on emu:rounding=rtz")
        cs = run(chain("fused"), "emu:rounding=rtz", tmp)
        check(all(c["verdict"] == "passed" for c in cs),
              "the fused execution on emu:rounding=rtz passes (fp32 intermediates)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
