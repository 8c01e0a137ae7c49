#!/usr/bin/env python3
"""Which tolerance the permanent suite judges by (docs/API.md "Suite"), with real
numvald and agent workers on emu (correctly rounded exp) and emu-fast (exp off
by up to about 3 ULP in fp32):

- A job that demands more than the stored/default tolerance (its own "tolerance",
  tighter) and fails only by that demand is not promoted, although the agent
  gated and minimized it: the failure shows the job's demand, not the device.
- A failure under the default tolerance (1 ULP for fp32 exp) is promoted; a job
  whose own tolerance is looser than the default and still fails records an
  occurrence of the same signature.
- A suite replay judges by the tolerance current at replay time: it fails on
  emu-fast under the default; after a stored tolerance of 8 ULP is accepted,
  the next replay passes, and the artifact it replayed carries that tolerance
  (with the promoted artifact and its tolerance recorded in "replay").
- The replay's JUnit failure text names how it fails and never ends in an empty
  "first mismatches:" heading."""
import json
import os
import urllib.request
import xml.etree.ElementTree as ET

from nvartifact import decode
from nvservice import Service, check, main

EXP = {"kind": "op", "op": "exp", "dtypes": ["fp32"], "shapes": [[64]], "inputs": ["uniform"],
       "seed": 3}
TIGHT = {"metric": "ulp", "max_ulp": 0.25, "reason_code": "approximation_error",
         "reason": "suite test: a quarter ulp, tighter than correct rounding allows"}
LOOSE = {"metric": "ulp", "max_ulp": 1.5, "reason_code": "approximation_error",
         "reason": "suite test: 1.5 ulp, looser than the default"}
STORED = {"op": "exp", "dtype": "fp32",
          "tolerance": {"metric": "ulp", "max_ulp": 8, "reason_code": "accepted_fast_algorithm",
                        "reason": "suite test: the fast exp is accepted at 8 ulp"}}


def run(s, spec, device):
    st, body = s.api("POST", "/api/v1/jobs", dict(spec, device=device), scope="submit")
    check(st == 201, "submitted %s job on %s" % (spec["kind"], device))
    jid = body["job"]["id"]
    return s.wait_jobs([jid], 180)[jid], jid


def suite(s):
    st, body = s.api("GET", "/api/v1/suite", scope="read")
    check(st == 200, "GET /api/v1/suite")
    return body["suite"]


def artifact(s, sha):
    with urllib.request.urlopen(s.url + "/api/v1/artifacts/" + sha, timeout=30) as r:
        return decode(blob=r.read())[0]


def test(bins):
    agent = ["--minimize-deadline", "30"]
    with Service(bins, lease_ms=4000) as s:
        s.start_daemon()
        s.start_worker("emu", "emu", extra=agent)
        s.start_worker("emu-fast", "emu:transcendental=fast", extra=agent)

        job, jid = run(s, dict(EXP, tolerance=TIGHT), "emu")
        failed = [c for c in s.cases(jid) if c["verdict"] == "failed"]
        check(job["state"] == "failed" and failed and failed[0]["tolerance"]["source"] == "job"
              and failed[0]["max_ulp"] <= 0.5,
              "correctly rounded exp fails the job's own quarter-ulp tolerance (max_ulp %s)"
              % (failed[0]["max_ulp"] if failed else None))
        check(len(failed[0].get("minimized_artifact", "")) == 64 and failed[0].get("signature"),
              "the agent gated and minimized it")
        check(suite(s) == [], "not promoted: it passes the default tolerance")

        job, jid = run(s, EXP, "emu-fast")
        f = [c for c in s.cases(jid) if c["verdict"] == "failed"]
        check(job["state"] == "failed" and f and f[0]["tolerance"]["source"] == "default",
              "the fast exp fails the default tolerance (max_ulp %s)" %
              (f[0]["max_ulp"] if f else None))
        sc = suite(s)
        check(len(sc) == 1 and sc[0]["op"] == "exp" and sc[0]["occurrences"] == 1,
              "promoted: one suite case")
        job, jid = run(s, dict(EXP, seed=4, tolerance=LOOSE), "emu-fast")
        sc = suite(s)
        check(job["state"] == "failed" and len(sc) == 1 and sc[0]["occurrences"] == 2,
              "a failure under a job tolerance looser than the default counts as an "
              "occurrence (%s)" % [(c["id"], c["occurrences"]) for c in sc])

        # Replays: under the default, then under the newly stored tolerance.
        with open(os.path.join(s.tmp, "suite.json"), "w") as fh:
            json.dump({"kind": "suite", "device": "emu-fast"}, fh)
        p = s.ctl("submit", "suite.json", "--wait", "--junit", "r1.xml", "--timeout", "120")
        r1 = s.cases(p.stdout.split()[0])
        check(p.returncode == 1 and len(r1) == 1 and r1[0]["verdict"] == "failed",
              "suite replay on emu-fast fails under the default (%d: %s)" %
              (p.returncode, p.stderr[-300:]))
        fails = ET.parse(os.path.join(s.tmp, "r1.xml")).getroot().findall(".//failure")
        text = fails[0].text or "" if fails else ""
        check(len(fails) == 1 and "first mismatches:" not in text and
              fails[0].get("message", "").startswith("still fails: ulp_exceeded") and
              "artifact: " in text, "JUnit of the replay: how it fails, no empty heading "
              "(%r, %r)" % (fails[0].get("message") if fails else None, text))
        st, _ = s.api("POST", "/api/v1/tolerances", STORED)
        check(st == 201, "stored tolerance exp/fp32 v1: 8 ULP")
        p = s.ctl("submit", "suite.json", "--wait", "--timeout", "120")
        r2 = s.cases(p.stdout.split()[0])
        check(p.returncode == 0 and r2[0]["verdict"] == "passed",
              "the next replay judges by the stored tolerance and passes (%d: %s)" %
              (p.returncode, p.stderr[-300:]))
        promoted = sc[0]["artifact"]
        check(r2[0]["artifact"] != promoted, "it replayed a replay artifact, not the promoted one")
        man = artifact(s, r2[0]["artifact"])
        check(man["tolerance"]["max_ulp"] == 8 and man["tolerance"]["version"] == 1 and
              man["tolerance"]["source"] == "store" and
              man["replay"]["origin_artifact"] == promoted and
              man["replay"]["origin_tolerance"]["source"] == "default",
              "the replay artifact carries the stored tolerance and names what it replaces")
        check(artifact(s, promoted)["tolerance"]["source"] == "default",
              "the promoted artifact is unchanged")
        st, one = s.api("GET", "/api/v1/suite/%d" % sc[0]["id"], scope="read")
        hist = [h["verdict"] for h in one["suite_case"]["history"]]
        check(hist == ["failed", "passed"], "the suite case's history: %s" % hist)


if __name__ == "__main__":
    main(test)
