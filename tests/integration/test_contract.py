#!/usr/bin/env python3
"""Contract jobs against devices that lie (docs/CONTRACT.md): numval-worker run
of a contract job on

- plugin_liar.c, emu computing in one mode and declaring another, four lies:
  nearest-even casts declared, toward-zero done; fp32 accumulation declared,
  bf16 done; no FTZ declared, FTZ done; deterministic declared, a random
  reduction order done;
- plugin_fault_bf16acc.c, a device of its own (sum and matmul only) that
  declares an fp32 accumulator and accumulates in bf16;

each must fail with the contract_mismatch of that field, the declared and the
measured value, and evidence whose inputs and outputs prove it: the test
recomputes what the declared behaviour would have given from the evidence's
numbers alone (Python's struct and float arithmetic, not numval's). emu in the
lies' real modes, declared truthfully, passes with no mismatch. Every result is
valid under schema/result.schema.json, and broken copies of a contract result
are rejected. A bad spec is refused naming its JSON pointer.

usage: test_contract.py NUMVAL_WORKER LIAR_SO BF16ACC_SO
Prints TAP; temp files live in a temp dir that is always removed."""
import copy
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import nvschema

from nvtap import ok, finish, checks

WORKER, LIAR, BF16ACC = sys.argv[1:4]
SPEC = {"kind": "contract", "dtypes": ["fp32", "bf16"], "fp32_sweep": 256}
VALIDATOR = nvschema.validator()


def run(tmp, job, backend, want_rc):
    path = os.path.join(tmp, "job-%d.json" % checks())
    with open(path, "w") as f:
        json.dump(job, f)
    p = subprocess.run([WORKER, "run", path, "--backend", backend, "--threads", "2"],
                       capture_output=True, text=True, timeout=600)
    ok(p.returncode == want_rc, "%s: exit %d (want %d)" % (backend, p.returncode, want_rc),
       p.stderr[-2000:])
    if want_rc == 2:
        return p.stderr
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        ok(False, "%s: the output is JSON" % backend, p.stdout[-2000:])
        return None
    errs = nvschema.errors(VALIDATOR, doc)
    ok(not errs, "%s: the result is valid under the schema" % backend, "\n".join(errs))
    return doc


def mismatch(doc, field):
    for m in doc.get("mismatches", []):
        if m["field"] == field:
            return m
    return None


def f32(bits):
    return struct.unpack("<f", struct.pack("<I", int(bits, 16)))[0]


def bf16(bits):
    return struct.unpack("<f", struct.pack("<I", int(bits, 16) << 16))[0]


def rne_bf16(x):
    """x (an fp32 value) rounded to bf16, nearest even, as bits."""
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    return (u + 0x7FFF + ((u >> 16) & 1)) >> 16


def check_rtz(doc):
    m = mismatch(doc, "contract.bf16.conversion_rounding")
    ok(m and m["declared"] == "rne" and m["measured"] == "rtz",
       "nearest-even declared, toward zero measured", json.dumps(doc.get("mismatches"))[:1500])
    if not m:
        return
    # the evidence refuting nearest even: an fp32 input whose bf16 output is its
    # truncation, not its nearest-even rounding
    ev = [e for e in m["evidence"] if e.get("refutes", "").startswith("rounding=rne,")]
    ok(ev, "the evidence names the input that refutes nearest even", json.dumps(m)[:1500])
    for e in ev[:1]:
        x = f32(e["input"]["bits"])
        out = int(e["output"]["bits"], 16)
        trunc = struct.unpack("<I", struct.pack("<f", x))[0] >> 16
        ok(out == trunc and out != rne_bf16(x),
           "evidence %s -> %s: the truncation of the input, not its nearest even (0x%04x)"
           % (e["input"]["bits"], e["output"]["bits"], rne_bf16(x)))


def check_accum(doc, what):
    m = mismatch(doc, "contract.fp32.accumulation")
    ok(m and m["declared"] == "fp32" and m["measured"] == "bf16",
       "%s: fp32 accumulation declared, bf16 measured" % what,
       json.dumps(doc.get("mismatches"))[:1500])
    if not m:
        return
    e = m["evidence"][0]
    xs = [f32(i["bits"]) for i in e["inputs"]]
    got = f32(e["output"]["bits"])
    # In fp32 every grouping of [1, s, -1] (s = 2^-8 here) gives s exactly: s and
    # 1 + s need 9 bits. The device returned something else.
    s = sorted(xs, key=abs)[0]
    exact_fp32 = all(abs(v) in (1.0, abs(s)) for v in xs) and abs(s) >= 2.0 ** -23
    ok(exact_fp32 and got != s,
       "%s: evidence %s summed to %r where an fp32 accumulator gives %r" % (what, xs, got, s))


def check_ftz(doc):
    m = mismatch(doc, "contract.fp32.ftz")
    ok(m and "kept" in str(m["declared"]) and m["measured"] is True,
       "no FTZ declared, FTZ measured", json.dumps(doc.get("mismatches"))[:1500])
    if not m:
        return
    c = m["evidence"][0]["case"]
    a, b = (f32(i["bits"]) for i in c["inputs"])
    exact = a - b  # exact: both are fp32 values of one binade
    ok(c["op"] == "sub" and 0 < abs(exact) < 2.0 ** -126 and f32(c["output"]["bits"]) == 0,
       "evidence: %r - %r = %r (subnormal) came back 0" % (a, b, exact))


def check_random(doc):
    m = mismatch(doc, "contract.fp32.deterministic(sum)")
    ok(m and m["declared"] is True and m["measured"] is False,
       "deterministic declared, nondeterminism measured", json.dumps(doc.get("mismatches"))[:1500])
    if m:
        e = m["evidence"][0]
        ok(e["first_output"]["bits"] != e["differing_output"]["bits"],
           "evidence: the same row summed to %s and to %s" % (e["first_output"]["value"],
                                                               e["differing_output"]["value"]))
    m = mismatch(doc, "contract.fp32.reduction_order")
    ok(m and m["declared"] == "sequential" and m["measured"] == "random",
       "sequential order declared, random measured")


def check_rejects(doc):
    m0 = doc["mismatches"][0]
    broken = [("no mismatches list", {k: v for k, v in doc.items() if k != "mismatches"}),
              ("a mismatch without evidence",
               dict(doc, mismatches=[{k: v for k, v in m0.items() if k != "evidence"}])),
              ("a mismatch of another class", dict(doc, mismatches=[dict(m0, **{"class": "x"})])),
              ("a measured contract field numval does not write",
               dict(doc, measured=dict(doc["measured"], contract={"fp32": {"colour": 1}}))),
              ("a reduction order outside the vocabulary",
               dict(doc, measured=dict(doc["measured"],
                                       contract={"fp32": {"reduction_order": "zigzag"}}))),
              ("kind 'contracts'", dict(doc, kind="contracts"))]
    for what, bad in broken:
        ok(nvschema.errors(VALIDATOR, copy.deepcopy(bad)), "schema rejects: %s" % what)


def main():
    tmp = tempfile.mkdtemp(prefix="nv-contract-")
    try:
        lies = [("rounding=rtz|", check_rtz), ("accum=bf16|accum=fp32",
                                               lambda d: check_accum(d, "liar")),
                ("ftz=on|", check_ftz), ("reduce=random|", check_random)]
        first = None
        for opts, check in lies:
            doc = run(tmp, SPEC, "plugin:%s?%s" % (LIAR, opts), 1)
            if doc:
                ok(doc["verdict"] == "failed" and all(
                    m["class"] == "contract_mismatch" and m["evidence"] for m in doc["mismatches"]),
                   "%s: failed, every mismatch with evidence" % opts)
                check(doc)
                first = first or doc
            real = opts.split("|")[0]
            doc = run(tmp, SPEC, "emu:" + real, 0)
            if doc:
                ok(doc["verdict"] == "passed" and not doc["mismatches"],
                   "emu:%s declared truthfully: no mismatch" % real,
                   json.dumps(doc.get("mismatches"))[:1500])
        doc = run(tmp, SPEC, "plugin:%s?declare=fp32" % BF16ACC, 1)
        if doc:
            check_accum(doc, "fault_bf16acc")
            ok(doc["summary"]["errors"] == 0 and not doc["measured"]["conversions"],
               "fault_bf16acc: the ops it does not offer are skipped, not errors")
        if first:
            check_rejects(first)
        err = run(tmp, dict(SPEC, dtypes=["int8"]), "emu", 2)
        ok("/dtypes/0" in err and "int8" in err, "a bad spec names its pointer: %s" % err.strip())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
