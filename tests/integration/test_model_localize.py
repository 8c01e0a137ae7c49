#!/usr/bin/env python3
"""Model jobs: localization of a fault in one node, and the long-decode and
accuracy figures (docs/MODEL.md "Measured").

- emu with bf16 accumulation only in the first block's attention score matmul
  (emu:fused_accum_node=decoder.0.scores:bf16 in graph execution;
  emu:accum_node=... in eager execution, where each op call names its node,
  nv_op_call.node) fails the shipped LM in fp32 at layer decoder.0, op bmm, node
  decoder.0.scores, whose own (local) check fails while every node before it
  is within its band; the same knob on decoder.1.scores moves the localization
  there (eager: also decoder.1.q, a matmul), and plain emu passes the same job.
- Greedy decode of 32 tokens (the shipped LM with its T = 16 positions widened
  to 36: prompt 4 + 32) on emu bf16 and fp32 vs fp64, seeds 1..N: every case
  passes, and the reported first divergent position and agreement equal what
  the two token lists give.
- The MLP classifier on emu bf16: the accuracy gap (b - c)/n recomputed from
  the discordant counts, inside its reported interval.

The figures are printed as TAP comments (docs/MODEL.md records them).

usage: test_model_localize.py NUMVAL_WORKER SOURCE_ROOT
NUMVAL_MODEL_SEEDS=N runs N seeds (default 10)."""
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile

from nvtap import ok, finish

WORKER, ROOT = sys.argv[1:3]
SEEDS = int(os.environ.get("NUMVAL_MODEL_SEEDS", "10"))


def shipped(name):
    with open(os.path.join(ROOT, "suites", "model.json")) as f:
        job = [j for j in json.load(f)["jobs"] if j["name"] == name][0]
    job.pop("description", None)
    return job


def run(tmp, job, backend):
    """(exit code, result, stderr) of one job."""
    path = os.path.join(tmp, "job.json")
    out = os.path.join(tmp, "out.json")
    with open(path, "w") as f:
        json.dump(job, f)
    if os.path.exists(out):
        os.unlink(out)
    p = subprocess.run([WORKER, "run", path, "--backend", backend, "--threads", "2",
                        "--output", out], capture_output=True, text=True, timeout=600)
    doc = None
    if os.path.exists(out):
        with open(out) as f:
            doc = json.load(f)
    return p.returncode, doc or {}, p.stderr


def check_localized(tmp):
    """A fault in one node, in graph execution (the graph entry's
    fused_accum_node) and in eager execution (the op entry's accum_node, keyed
    by the node name each call carries: nv_op_call.node, backend ABI 4)."""
    for execution, key, targets in (
            ("graph", "fused_accum_node", (("decoder.0.scores", "bmm"),
                                           ("decoder.1.scores", "bmm"))),
            ("eager", "accum_node", (("decoder.0.scores", "bmm"), ("decoder.1.scores", "bmm"),
                                     ("decoder.1.q", "matmul")))):
        lm = shipped("decoder-lm")
        lm.update(execution=execution, dtypes=["fp32"], samples=3)
        rc, doc, err = run(tmp, lm, "emu")
        ok(rc == 0 and all(c["verdict"] == "passed" for c in doc.get("cases", [])),
           "the LM in %s execution passes on emu (fp32, 3 samples)" % execution, err[-500:])
        for node, op in targets:
            backend = "emu:%s=%s:bf16" % (key, node)
            rc, doc, err = run(tmp, lm, backend)
            mode = (doc.get("mode") or {})
            an = (mode.get("fused", {}) if execution == "graph" else mode).get("accum_node")
            ok(an == {"node": node, "accum": "bf16"},
               "describe's mode names the faulty node (%s: %s)" % (key, an))
            bad = []
            for c in doc.get("cases", []):
                fd = c.get("first_divergent") or {}
                names = [x["name"] for x in c["nodes"]]
                k = names.index(node)
                before = [x["name"] for x in c["nodes"][:k] if x["state"] != "in_band"]
                if (c["verdict"] != "failed" or fd.get("node") != node or fd.get("op") != op or
                        fd.get("layer") != node.rsplit(".", 1)[0] or
                        (fd.get("local") or {}).get("verdict") != "outside_tolerance" or before):
                    bad.append("sample %s: %s, %s, out of band before it: %s"
                               % (c.get("sample"), c["verdict"], json.dumps(fd)[:300], before))
                else:
                    print("# %s %s sample %d: e_dev %.3g, band %.3g, local max ULP %.3g"
                          % (execution, node, c["sample"], fd["e_dev"], fd["band"],
                             fd["local"]["max_ulp"]))
            ok(rc == 1 and len(doc.get("cases", [])) == 3 and not bad,
               "%s: bf16 accumulation only in %s: localized to that %s (layer %s), nothing "
               "out of band before it" % (execution, node, op, node.rsplit(".", 1)[0]),
               "\n".join(bad) + err[-300:])


def check_bad_knob(tmp):
    lm = shipped("decoder-lm")
    lm.update(execution="graph", dtypes=["fp32"], samples=1)
    bad = []
    for key in ("fused_accum_node", "accum_node"):
        for v in ("nocolon", "x:int8", ":bf16", "n" * 64 + ":bf16"):
            rc, doc, err = run(tmp, lm, "emu:%s=%s" % (key, v))
            if rc != 2 or ("bad value '%s' for emu mode key '%s'" % (v, key)) not in err:
                bad.append("%s=%s: exit %d, %s" % (key, v, rc, err[-200:]))
    ok(not bad, "a bad fused_accum_node or accum_node value is refused naming the key and "
       "the value", "\n".join(bad))


def widened_lm(positions, decode):
    """The shipped LM with its T positions widened (ids, rotary tables, mask, scale)."""
    lm = shipped("decoder-lm")
    t = lm["model"]["inputs"][0]["shape"][0]
    for x in lm["model"]["inputs"] + lm["model"]["params"]:
        if x["name"] != "rot_half":
            x["shape"] = [positions if e == t else e for e in x["shape"]]
    lm["task"]["decode"] = decode
    return lm


def check_decode(tmp):
    lm = widened_lm(36, 32)
    bad, rows = [], []
    for seed in range(1, SEEDS + 1):
        lm["seed"] = seed
        rc, doc, err = run(tmp, lm, "emu")
        for c in doc.get("cases", []):
            d = c["criteria"]["decode"]
            ref, dev = d["tokens_ref"], d["tokens_dev"]
            first = next((i for i, (a, b) in enumerate(zip(ref, dev)) if a != b), None)
            agree = sum(a == b for a, b in zip(ref, dev)) / len(ref)
            rows.append((c["dtype"], seed, d["first_divergent"], d["agreement"]))
            if first is not None:
                print("# decode %s seed %d: first divergent step %d, fp64 margin %.3g <= "
                      "allowed %.3g" % (c["dtype"], seed, first, d["margin_at_divergence"],
                                         d["allowed_margin"]))
            if (c["verdict"] != "passed" or d["steps"] != 32 or len(ref) != 32 or
                    d["first_divergent"] != first or abs(d["agreement"] - agree) > 1e-12):
                bad.append("seed %d %s: %s first %s/%s agreement %s/%s"
                           % (seed, c["dtype"], c["verdict"], d["first_divergent"], first,
                              d["agreement"], agree))
        if rc != 0 or len(doc.get("cases", [])) != 2:
            bad.append("seed %d: exit %d %s" % (seed, rc, err[-300:]))
    for dt in ("fp32", "bf16"):
        r = [x for x in rows if x[0] == dt]
        print("# decode 32 tokens, emu %s vs fp64: first divergent %s; agreement %s"
              % (dt, [x[2] for x in r], [round(x[3], 4) for x in r]))
    ok(not bad, "greedy decode of 32 tokens on emu fp32 and bf16 vs fp64, %d seeds: passed, "
       "first divergent position and agreement as the token lists give" % SEEDS, "\n".join(bad))


def check_accuracy(tmp):
    mlp = shipped("mlp-classifier")
    mlp["dtypes"] = ["bf16"]
    bad = []
    for seed in range(1, SEEDS + 1):
        mlp["seed"] = seed
        rc, doc, err = run(tmp, mlp, "emu")
        for c in doc.get("cases", []):
            a = c["criteria"]["accuracy"]
            gap = (a["ref_right_dev_wrong"] - a["ref_wrong_dev_right"]) / a["n"]
            lo, hi = a["gap_ci"]
            print("# MLP bf16 seed %d: acc fp64 %.4f, device %.4f, gap %.4f in [%.4f, %.4f]"
                  % (seed, a["acc_ref"], a["acc_dev"], a["gap"], lo, hi))
            if c["verdict"] != "passed" or abs(a["gap"] - gap) > 1e-12 or not lo <= gap <= hi:
                bad.append("seed %d: %s gap %s/%s interval %s" % (seed, c["verdict"], a["gap"],
                                                                   gap, a["gap_ci"]))
        if rc != 0:
            bad.append("seed %d: exit %d %s" % (seed, rc, err[-300:]))
    ok(not bad, "the MLP's accuracy gap on emu bf16 is (b - c)/n and lies in its interval, "
       "%d seeds" % SEEDS, "\n".join(bad))


def main():
    tmp = tempfile.mkdtemp(prefix="numval-model-loc-")
    try:
        check_localized(tmp)
        check_bad_knob(tmp)
        check_decode(tmp)
        check_accuracy(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
