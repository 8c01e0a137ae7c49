#!/usr/bin/env python3
"""A serving failure ends as a permanent suite case (docs/SERVING.md
"Artifacts"), with real processes: numvald, an agent on emu with the serving
fault batch_splitk=on (a matmul whose split of the reduction follows the
call's row count) and one on the correct emu.

- A batch-invariance job (fp32) fails on the fault with batch_variance; the
  case says its reproducer is a serving pair and names it.
- The artifact is a serving pair of the first divergent node of the decode
  step: its op called on the request alone and on the request in the batch;
  read here with an independent reader: the two calls' inputs agree bit for
  bit in the request's box (the weights whole), their outputs do not.
- The agent gates it (5/5 runs fail, both outputs bit-identical), minimizes it
  (fewer input values, the batched call down to the request and one other
  row) and uploads it; the case carries the serving signature (its id
  recomputed here) and is a valid stored_serving_case.
- numvald promotes it: one suite case of kind serving, the node's op and dtype.
- A suite job replays it: it fails on the fault and passes on the correct emu.
- The same job on the correct emu passes (the artifact blames the fault).
- A prefill_decode job on an agent on emu:kv_cache=bf16 fails; its case is an
  op case of cache_write, which the serving row hands to the op kind's gate;
  numvald promotes it beside the pair, and the suite replayed there fails it
  and passes the pair.
- Without numvald (numval-worker run --artifacts, repro, minimize): a
  sustained failure on the same fault is a serving pair too; a prefill_decode
  and a long_context failure on emu:kv_cache=bf16 (the cache held in bf16)
  are op cases of the first op call that fails its tolerance, the cache_write
  of the failing step; each reproduces on its fault (exit 1) and not on emu
  (exit 0).

usage: test_serving_promote.py NUMVALD NUMVAL-WORKER NUMVALCTL"""
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile

import nvschema
from nvartifact import decode, encode, parse, signature_id
from nvservice import Fail, Service, bins_from_argv
from nvtap import finish, ok

FAULTY = "emu:batch_splitk=on"
KV = "emu:kv_cache=bf16"
JOB = {"kind": "serving", "name": "batch-small", "check": "batch",
       "decoder": {"vocab": 16, "width": 8, "heads": 1, "layers": 1, "ffn": 8},
       "prompt": 4, "others": [3, 5], "steps": 2, "dtypes": ["fp32"], "seed": 1}
FP32 = 1  # the ABI's dtype id (docs/ARTIFACTS.md)


def values(rec):
    """An fp32 tensor record's elements as their bit patterns (uint32)."""
    name, dt, shape, data = rec[0], rec[1], rec[2], rec[3]
    if dt != FP32:
        raise Fail("tensor %s: dtype id %d, not fp32" % (name, dt))
    return shape, list(struct.unpack("<%dI" % (len(data) // 4), data))


def box(shape, bits, bx):
    """The elements of box {offset, extent} (None: the whole tensor), row-major."""
    if bx is None:
        return bits
    out = []

    def walk(d, at):
        if d == len(shape):
            out.append(bits[at])
            return
        stride = 1
        for s in shape[d + 1:]:
            stride *= s
        for i in range(bx["extent"][d]):
            walk(d + 1, at + (bx["offset"][d] + i) * stride)
    walk(0, 0)
    return out


def pair_checks(man, records, what):
    """The pair's claim, recomputed from the stored tensors: inputs agree in
    the request's box, outputs differ there. Returns the count that differs."""
    t = {r[0]: r for r in records}
    sp = man["serving_pair"]
    a, b = sp["calls"]
    agree = True
    for i, (ba, bb) in enumerate(zip(a["input_boxes"], b["input_boxes"])):
        sa, va = values(t["a.input:%d" % i])
        sb, vb = values(t["b.input:%d" % i])
        agree &= box(sa, va, ba) == box(sb, vb, bb)
    sa, va = values(t["a.output:0"])
    sb, vb = values(t["b.output:0"])
    oa, ob = box(sa, va, a["output_box"]), box(sb, vb, b["output_box"])
    differ = sum(x != y for x, y in zip(oa, ob))
    ok(agree and len(oa) == len(ob) and differ > 0,
       "%s: the two calls' inputs agree bit for bit in the request's box, %d of its %d output "
       "values differ" % (what, differ, len(oa)), json.dumps(sp)[:600])
    return differ


def test(s):
    s.start_daemon()
    s.start_worker("faulty", FAULTY)
    s.start_worker("emu", "emu")
    s.start_worker("kvcache", KV)

    j1 = s.submit_build(JOB, "faulty", "f1")
    ok(s.wait_jobs([j1], 180)[j1]["state"] == "failed", "the batch job fails on %s" % FAULTY)
    cs = [c for c in s.cases(j1) if c["verdict"] == "failed"]
    ok(len(cs) == 1 and cs[0].get("failure_class") == "batch_variance",
       "one failed case, batch_variance", [json.dumps(c)[:300] for c in cs])
    c = cs[0]
    errs = nvschema.errors(nvschema.validator("stored_serving_case"), c)
    ok(not errs, "the case is a valid stored_serving_case", errs)
    loc = c.get("localized") or {}
    ok(loc.get("state") == "serving_pair" and len(c.get("artifact", "")) == 64,
       "the case says its reproducer is a serving pair and names it (%s)" % loc)

    man, records = s.artifact(c["artifact"])
    sp = man.get("serving_pair", {})
    names = sorted(r[0] for r in records)
    ok(man["spec"]["kind"] == "serving" and sp.get("version") == 1 and
       sp.get("node", "").startswith("decoder.0.") and sp.get("op") == "matmul" and
       man.get("serving", {}).get("node") == sp.get("node"),
       "the artifact is a version-1 serving pair of node %s (op %s), its origin recorded"
       % (sp.get("node"), sp.get("op")), json.dumps(man.get("serving"))[:400])
    ok(names == ["a.input:0", "a.input:1", "a.output:0", "b.input:0", "b.input:1", "b.output:0"],
       "it holds both calls' inputs and outputs (%s)" % names)
    comp = man.get("serving", {}).get("composition", {})
    ok(comp.get("requests") == 2 and comp.get("layout") == "packed" and
       comp.get("decode_step") == 0 and comp.get("prompt_lengths") == [4, 3],
       "it records the failing composition: a batch of 2, packed, decode step 0 (%s)" % comp)
    pair_checks(man, records, "stored pair")

    ok(c.get("repro_rate") == {"runs": 5, "failed": 5, "bit_identical": 5},
       "gate: 5/5 runs fail, bit-identical (%s)" % c.get("repro_rate"))
    sig = c.get("signature") or {}
    ok(sig.get("kind") == "serving" and sig.get("check") == "batch" and
       sig.get("op") == "matmul" and sig.get("dtype") == "fp32" and
       sig.get("failure_class") == "batch_variance" and sig.get("id") == signature_id(sig),
       "serving signature (batch, matmul, fp32), id = sha256 of its canonical JSON",
       json.dumps(sig)[:300])
    ok(c.get("flaky") is False and len(c.get("minimized_artifact", "")) == 64,
       "the case carries its minimized artifact")
    mman, mrec = s.artifact(c["minimized_artifact"])
    mi = mman.get("minimized", {})
    mt = {r[0]: r for r in mrec}
    rows = mt["b.input:0"][2][0]
    ok(mman.get("minimized_from") == c["artifact"] and
       mi.get("elements_after", 1e9) < mi.get("elements_before", 0) and
       mi.get("nonzero_after", 1e9) < mi.get("nonzero_before", 0) and rows == 2,
       "minimized: %s -> %s input values (%s nonzero), the batched call down to %d rows"
       % (mi.get("elements_before"), mi.get("elements_after"), mi.get("nonzero_after"), rows),
       json.dumps(mi))
    pair_checks(mman, mrec, "minimized pair")

    st, suite = s.api("GET", "/api/v1/suite", scope="read")
    sc = (suite or {}).get("suite", [{}])
    ok(st == 200 and len(sc) == 1, "promoted: one suite case")
    sc = sc[0]
    ok(sc.get("kind") == "serving" and sc.get("op") == "matmul" and sc.get("dtype") == "fp32" and
       sc.get("signature") == sig.get("id") and sc.get("artifact") == c["minimized_artifact"] and
       sc.get("origin_job") == int(j1),
       "suite case: kind serving, matmul fp32, the minimized artifact, origin job",
       json.dumps(sc)[:400])

    sj_bad = s.submit_build({"kind": "suite"}, "faulty", "f2")
    done = s.wait_jobs([sj_bad], 120)
    sj_ok = s.submit_build({"kind": "suite"}, "emu", "f3")
    done.update(s.wait_jobs([sj_ok], 120))
    bad, good = s.cases(sj_bad), s.cases(sj_ok)
    ok(done[sj_bad]["state"] == "failed" and
       [(x.get("kind"), x["verdict"], x.get("same_signature")) for x in bad] ==
       [("serving", "failed", True)],
       "suite replay on the fault: the serving case fails with its signature",
       [json.dumps(x)[:300] for x in bad])
    ok(done[sj_ok]["state"] == "passed" and
       [(x.get("kind"), x["verdict"]) for x in good] == [("serving", "passed")],
       "suite replay on emu: it passes", [json.dumps(x)[:300] for x in good])
    v = nvschema.validator("stored_suite_case")
    errs = [e for x in bad + good for e in nvschema.errors(v, x)]
    ok(not errs, "the replayed cases are valid stored_suite_cases", errs)

    j2 = s.submit_build(JOB, "emu", "f4")
    ok(s.wait_jobs([j2], 180)[j2]["state"] == "passed", "the batch job passes on emu")

    # an accuracy failure: its op case goes the op kind's way through the serving row
    pd = {"kind": "serving", "name": "prefill-small", "check": "prefill_decode",
          "decoder": JOB["decoder"], "prompt": 6, "dtypes": ["fp32"], "seed": 1}
    j3 = s.submit_build(pd, "kvcache", "f5")
    ok(s.wait_jobs([j3], 180)[j3]["state"] == "failed", "the prefill_decode job fails on %s" % KV)
    c3 = ([c for c in s.cases(j3) if c["verdict"] == "failed"] or [{}])[0]
    sig3 = c3.get("signature") or {}
    ok((c3.get("localized") or {}).get("state") == "op_case" and sig3.get("kind") == "op" and
       sig3.get("op") == "cache_write" and c3.get("repro_rate", {}).get("failed") == 5 and
       len(c3.get("minimized_artifact", "")) == 64,
       "its case: an op case of cache_write, gated by the op kind (5/5) and minimized",
       json.dumps(c3)[:600])
    errs = nvschema.errors(nvschema.validator("stored_serving_case"), c3)
    ok(not errs, "that case is a valid stored_serving_case too", errs)
    st, suite = s.api("GET", "/api/v1/suite", scope="read")
    kinds = sorted((x.get("kind"), x.get("op"), x.get("dtype")) for x in (suite or {}).get("suite", []))
    ok(kinds == [("op", "cache_write", "fp32"), ("serving", "matmul", "fp32")],
       "promoted: the op case of cache_write beside the serving pair (%s)" % kinds)
    sj = s.submit_build({"kind": "suite"}, "kvcache", "f6")
    s.wait_jobs([sj], 120)
    got = sorted((x.get("kind") or "op", x.get("op"), x["verdict"]) for x in s.cases(sj))
    ok(got == [("op", "cache_write", "failed"), ("serving", "matmul", "passed")],
       "suite replay on %s: the cache_write case fails, the serving pair passes (%s)" % (KV, got))


SMALL = {"vocab": 16, "width": 8, "heads": 1, "layers": 1, "ffn": 8}
LOCAL = [("sustained", {"requests": 4, "prompt": 4, "steps": 3}, FAULTY, "serving_pair",
          "sustained_variance"),
         ("prefill_decode", {"prompt": 6}, "emu:kv_cache=bf16", "op_case", "prefill_decode_mismatch"),
         ("long_context", {"context": 32, "every": 8}, "emu:kv_cache=bf16", "op_case",
          "context_growth")]


def local(worker, tmp):
    for check, extra, fault, state, cls in LOCAL:
        job = dict({"kind": "serving", "check": check, "decoder": SMALL, "dtypes": ["fp32"],
                    "seed": 1}, **extra)
        d = os.path.join(tmp, check)
        os.mkdir(d)
        path = os.path.join(d, "job.json")
        with open(path, "w") as f:
            json.dump(job, f)
        p = subprocess.run([worker, "run", path, "--backend", fault, "--artifacts", d],
                           capture_output=True, text=True, timeout=300)
        c = json.loads(p.stdout)["cases"][0] if p.stdout else {}
        arts = glob.glob(os.path.join(d, "*.nvart"))
        loc = c.get("localized") or {}
        ok(p.returncode == 1 and c.get("failure_class") == cls and loc.get("state") == state and
           len(arts) == 1 and os.path.basename(arts[0]) == c.get("artifact", "") + ".nvart",
           "%s on %s: %s, localized to %s, one artifact" % (check, fault, cls, state),
           [p.stderr[-800:], json.dumps(c)[:400]])
        if not arts:
            continue
        man, _ = parse(subprocess.run(["zstd", "-dc", arts[0]], capture_output=True,
                                      check=True, timeout=60).stdout)
        if state == "op_case":
            ok(man["spec"]["kind"] == "op" and man["spec"]["op"] == "cache_write" and
               man.get("serving", {}).get("node") == "decoder.0.k_cache",
               "%s: an op case of cache_write, node decoder.0.k_cache" % check,
               json.dumps(man.get("serving")))
        rc = [subprocess.run([worker, "repro", arts[0], "--backend", b], capture_output=True,
                             timeout=120).returncode for b in (fault, "emu")]
        mn = os.path.join(d, "min.nvart")
        m = subprocess.run([worker, "minimize", arts[0], "-o", mn], capture_output=True,
                           timeout=300)
        ok(rc == [1, 0] and m.returncode == 1 and os.path.exists(mn),
           "%s: repro fails on the fault, passes on emu (%s); minimize writes a verified case"
           % (check, rc), m.stderr.decode()[-600:])
        if state == "serving_pair":
            refusals(worker, arts[0], d)


def refusals(worker, art, d):
    """A damaged serving pair is refused (exit 2) with a message naming what."""
    man, tensors = decode(path=art)

    def bad(what, m, t, needle):
        path = os.path.join(d, "bad.nvart")
        encode(m, t, path, d)
        p = subprocess.run([worker, "repro", path, "--backend", "emu"], capture_output=True,
                           text=True, timeout=60)
        ok(p.returncode == 2 and needle in p.stderr,
           "a pair with %s is refused naming it ('%s')" % (what, needle), p.stderr[-400:])

    m = json.loads(json.dumps(man))
    m["serving_pair"]["version"] = 2
    bad("an unknown version", m, tensors, "serving pair version 2")
    bad("a missing tensor", man, {k: v for k, v in tensors.items() if k != "b.output:0"},
        "'b.output:0'")
    m = json.loads(json.dumps(man))
    m["serving_pair"]["calls"][1]["output_box"]["offset"][0] = 99
    bad("a box outside its tensor", m, tensors, "the box of 'b.output:0' is not inside it")
    m = json.loads(json.dumps(man))
    del m["serving_pair"]["op"]
    bad("no op", m, tensors, "'serving_pair.op'")


if __name__ == "__main__":
    bins = bins_from_argv()
    try:
        with Service(bins, lease_ms=4000) as svc:
            test(svc)
    except Fail as e:
        ok(False, "the service steps ran: %s" % e)
    tmp = tempfile.mkdtemp(prefix="nvtest-serving-promote-")
    try:
        local(bins["worker"], tmp)
    finally:
        subprocess.run(["rm", "-rf", tmp])
    sys.exit(finish())
