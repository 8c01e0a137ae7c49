#!/usr/bin/env python3
"""From failure to permanent regression test, with real processes.

The dropsum plugin sums fp32 correctly except that it skips element 5000 of an
axis longer than 4096. A random op job of 2^20 elements (128 rows of 8192) on
that device fails; the agent gates the failure (5/5 runs fail the same way),
minimizes it and uploads the reproducer with its signature; numvald promotes it
to the permanent suite. A second failing job with the same fault (another seed,
another build) records an occurrence, no second suite case. A suite job
replays the suite: it fails on the faulty device and passes on emu (correct),
and the case's history names the build it was fixed in. `numvalctl repro`
reproduces the stored failure bit for bit from its artifact alone. Retiring
needs a reason and leaves an audit entry. Build compare reports a newly failing
case and an error growth within tolerance.

Reproducer size: the fault needs an axis longer than 4096, so the minimizer
keeps the length and neutralizes (zeroes) the other elements; the size of a
reproducer is its count of non-neutral elements, asserted <= 64 (it is 1).

usage: test_suite_promote.py NUMVALD NUMVAL-WORKER NUMVALCTL PLUGIN_DROPSUM_SO"""
import hashlib
import json
import struct
import sys

from nvartifact import decode as decode_artifact
from nvservice import Service, check, main

PLUGIN = sys.argv.pop(4) if len(sys.argv) > 4 else ""

# Tolerance: Higham's pairwise bound (log2 n): the plugin accumulates in fp64 and
# rounds once, so its correct sums are far inside it; one dropped element of a
# normal sample exceeds it by orders of magnitude. It is the stored tolerance of
# sum/fp32 (the shipped default, the recursive-summation bound, would pass the
# dropped element): a failure found only under a job's own tighter tolerance is
# not promoted (docs/API.md "Suite"), and replays judge by the stored one.
SUM = {"kind": "op", "op": "sum", "dtypes": ["fp32"], "shapes": [[128, 8192]],
       "inputs": ["normal"], "seed": 11, "attrs": {"axis": -1}}
PAIRWISE = {"op": "sum", "dtype": "fp32",
            "tolerance": {"metric": "bound", "c": 1, "growth": "log2n",
                          "reason_code": "reduction_length",
                          "reason": "pairwise-or-better fp32 summation, Higham 4.2"}}


def decode(blob):
    return decode_artifact(blob=blob)


def artifact(s, sha):
    import urllib.request
    with urllib.request.urlopen(s.url + "/api/v1/artifacts/" + sha, timeout=30) as r:
        blob = r.read()
    check(hashlib.sha256(blob).hexdigest() == sha, "artifact %s.. hash-verified" % sha[:12])
    return blob


def submit(s, spec, device, build):
    st, body = s.api("POST", "/api/v1/jobs", dict(spec, device=device,
                                                  build={"name": build, "version": build}),
                     scope="submit")
    check(st == 201, "submitted %s on %s (%s)" % (spec["kind"], device, st if st != 201 else
                                                  body["job"]["id"]))
    return body["job"]["id"]


def test(bins):
    faulty = "plugin:%s?fault=drop" % PLUGIN
    with Service(bins, lease_ms=4000) as s:
        s.start_daemon()
        s.start_worker("faulty", faulty)
        s.start_worker("emu", "emu")
        s.start_worker("emu-fast", "emu:transcendental=fast")
        st, _ = s.api("POST", "/api/v1/tolerances", PAIRWISE)
        check(st == 201, "stored tolerance sum/fp32: the pairwise bound")

        j1 = submit(s, SUM, "faulty", "b1")
        job = s.wait_jobs([j1], 150)[j1]
        check(job["state"] == "failed", "2^20-element sum job fails on the faulty device")
        c1 = [c for c in s.cases(j1) if c["verdict"] == "failed"]
        check(len(c1) == 1, "one failed case")
        c1 = c1[0]
        check(c1.get("repro_rate") == {"runs": 5, "failed": 5, "bit_identical": 5},
              "gate: 5/5 runs fail, bit-identical (%s)" % c1.get("repro_rate"))
        check(not c1.get("flaky") and len(c1.get("minimized_artifact", "")) == 64,
              "case carries its minimized artifact")
        sig = c1["signature"]["id"]
        man, tens = decode(artifact(s, c1["minimized_artifact"]))
        x = tens["input:0"][2]
        nz = [(i, v) for i, v in enumerate(struct.unpack("<%df" % (len(x) // 4), x)) if v != 0]
        check(len(nz) <= 64 and [i for i, _ in nz] == [5000],
              "minimized: %d non-neutral element(s), at 5000 of %s" % (len(nz),
                                                                      tens["input:0"][1]))
        check(man["minimized_from"] == c1["artifact"], "minimized_from names the original")

        st, suite = s.api("GET", "/api/v1/suite", scope="read")
        check(st == 200 and len(suite["suite"]) == 1, "promoted: one suite case")
        sc = suite["suite"][0]
        check(sc["signature"] == sig and sc["occurrences"] == 1 and sc["origin_job"] == int(j1)
              and sc["first_failing_build"]["name"] == "b1",
              "suite case: signature, origin job, first failing build b1")

        j2 = submit(s, dict(SUM, seed=12), "faulty", "b2")
        check(s.wait_jobs([j2], 150)[j2]["state"] == "failed", "second job fails too")
        st, suite = s.api("GET", "/api/v1/suite", scope="read")
        check(len(suite["suite"]) == 1 and suite["suite"][0]["occurrences"] == 2,
              "same fault, second job: no second suite case, occurrences 2")

        # Build b2 is qualified before b3 (as builds follow each other): history and
        # "fixed in" follow the order runs finish, so the two runs must not race.
        sj_bad = submit(s, {"kind": "suite"}, "faulty", "b2")
        done = s.wait_jobs([sj_bad], 120)
        sj_ok = submit(s, {"kind": "suite"}, "emu", "b3")
        done.update(s.wait_jobs([sj_ok], 120))
        check(done[sj_bad]["state"] == "failed", "suite run on the faulty device fails")
        check(done[sj_ok]["state"] == "passed", "suite run on emu passes")
        rc = s.cases(sj_bad)[0]
        check(rc.get("bit_identical") is True and rc["failure_class"] == "bound_exceeded",
              "suite replay: same class, output bit-identical to the stored one")
        st, one = s.api("GET", "/api/v1/suite/%d" % sc["id"], scope="read")
        hist = [(h["build_name"], h["verdict"]) for h in one["suite_case"]["history"]]
        check(hist == [("b2", "failed"), ("b3", "passed")], "history by build: %s" % hist)
        check(one["suite_case"]["fixed_in_build"]["name"] == "b3", "fixed in build b3")

        # numvalctl repro: downloads the artifact and re-runs it through numval-worker.
        p = s.ctl("repro", str(c1["id"]), "--json", "--worker", bins["worker"],
                  token_scope="read")
        out = json.loads(p.stdout)
        check(p.returncode == 1 and out["still_fails"] and out["bit_identical"] == 5,
              "numvalctl repro: still fails, bit for bit 5/5 (%s)" % p.stderr.strip())
        p = s.ctl("repro", str(c1["id"]), "--minimized", "--backend", "emu", "--worker",
                  bins["worker"], token_scope="read")
        check(p.returncode == 0, "numvalctl repro --minimized --backend emu: passes")

        # Retire: reason required, audited, never deleted.
        st, body = s.api("POST", "/api/v1/suite/%d/retire" % sc["id"], {"reason": " "})
        check(st == 400 and body["error"]["field"] == "/reason", "retire without reason: 400")
        st, body = s.api("POST", "/api/v1/suite/%d/retire" % sc["id"],
                         {"reason": "dropsum fixed in b3"})
        check(st == 200 and body["suite_case"]["state"] == "retired", "retired with a reason")
        audit = [a["action"] for a in body["suite_case"]["audit"]]
        check(audit == ["promoted", "retired"], "audit trail %s" % audit)
        st, body = s.api("POST", "/api/v1/jobs", {"kind": "suite", "device": "emu"},
                         scope="submit")
        check(st == 400, "a suite job with no active case is refused")
        st, suite = s.api("GET", "/api/v1/suite", scope="read")
        check(len(suite["suite"]) == 1, "the retired case is still listed")

        # Build compare: c1 on emu (correctly rounded exp), c2 on emu-fast.
        exp = {"kind": "op", "op": "exp", "dtypes": ["fp32"], "inputs": ["normal"], "seed": 3}
        loose = {"metric": "ulp", "max_ulp": 1000, "reason_code": "accepted_fast_algorithm",
                 "reason": "compare test: accept the fast exp to observe its drift"}
        tight = {"metric": "ulp", "max_ulp": 1, "reason_code": "approximation_error",
                 "reason": "compare test: exp documented to 1 ulp"}
        ids = [submit(s, dict(exp, shapes=[[1024]], tolerance=loose), "emu", "c1"),
               submit(s, dict(exp, shapes=[[2048]], tolerance=tight), "emu", "c1"),
               submit(s, dict(exp, shapes=[[1024]], tolerance=loose), "emu-fast", "c2"),
               submit(s, dict(exp, shapes=[[2048]], tolerance=tight), "emu-fast", "c2")]
        s.wait_jobs(ids, 120)
        st, cmp = s.api("GET", "/api/v1/compare?base=c1&head=c2", scope="read")
        check(st == 200, "compare answers")
        nf = [e["match"]["shape"] for e in cmp["newly_failing"]]
        dr = [(e["match"]["shape"], e["base"]["max_ulp"], e["head"]["max_ulp"])
              for e in cmp["drift"]]
        check(nf == [[2048]], "newly failing: the tight exp case (%s)" % nf)
        check(len(dr) == 1 and dr[0][0] == [1024] and dr[0][1] <= 0.5 and dr[0][2] >= 1,
              "drift within tolerance: %s" % dr)
        p = s.ctl("compare", "c1", "c2", token_scope="read")
        check(p.returncode == 1 and "newly_failing: 1" in p.stdout, "numvalctl compare exits 1")
        st, _ = s.api("GET", "/api/v1/compare?base=c1&head=nope", scope="read")
        check(st == 404, "unknown build: 404")


if __name__ == "__main__":
    main(test)
