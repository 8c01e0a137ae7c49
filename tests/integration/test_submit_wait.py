#!/usr/bin/env python3
"""numvalctl submit --wait against a real numvald with a worker it supervises
(device emu-sup, spawned by numvald from its config) and a standalone one:
exit 0 for a passing job, 1 for a failing one, 2 for a bad spec or an
unreachable server; JUnit XML checked with xml.etree; a failure artifact is
downloadable and its bytes hash to its id."""
import hashlib
import json
import os
import struct
import xml.etree.ElementTree as ET

from nvservice import Service, check, main


# A passing job: exp on a correctly rounding device, judged by the op's shipped
# default tolerance. 1 dtype x 2 shapes x 2 inputs = 4 cases.
PASSING = {"kind": "op", "op": "exp", "dtypes": ["fp32"], "shapes": [[257], [16, 33]],
           "layouts": ["contiguous"], "inputs": ["normal", "uniform"], "seed": 11}

# A failing job: the same op on a device with a fast exp approximation, under a
# 0.5-ulp tolerance (correct rounding), so every case whose values are not all
# correctly rounded fails. The tolerance is deliberately tight: that is the test.
FAILING = dict(PASSING, tolerance={
    "metric": "ulp", "max_ulp": 0.5, "reason_code": "approximation_error",
    "reason": "integration test: demand correct rounding to expose the fast exp"})


def junit_counts(path):
    root = ET.parse(path).getroot()
    check(root.tag == "testsuites", "JUnit root is <testsuites>")
    cases = root.findall("./testsuite/testcase")
    fails = [c for c in cases if c.find("failure") is not None]
    errors = [c for c in cases if c.find("error") is not None]
    return root, cases, fails, errors


def test(bins):
    with Service(bins, lease_ms=3000, devices={"emu-sup": "emu"}) as s:
        s.start_daemon()
        s.start_worker("emu-fast", "emu:transcendental=fast")
        d = s.tmp
        with open(os.path.join(d, "pass.json"), "w") as f:
            json.dump(PASSING, f)
        with open(os.path.join(d, "fail.json"), "w") as f:
            json.dump(FAILING, f)
        with open(os.path.join(d, "bad.json"), "w") as f:
            json.dump(dict(PASSING, op="no_such_op"), f)

        p = s.ctl("submit", "pass.json", "--device", "emu-sup", "--wait", "--junit",
                  "pass.xml", "--build-name", "it", "--build-version", "1", "--commit", "abc",
                  "--timeout", "240")
        check(p.returncode == 0, "passing job: numvalctl exits 0 (got %d: %s)" %
              (p.returncode, p.stderr[-500:]))
        job_id = p.stdout.strip()
        job = s.job(job_id)
        check(job["state"] == "passed" and job["cases_total"] == 4,
              "passing job stored as passed with 4 cases (%s, %s)" %
              (job["state"], job["cases_total"]))
        root, cases, fails, errors = junit_counts(os.path.join(d, "pass.xml"))
        check(len(cases) == 4 and not fails and not errors,
              "pass.xml: 4 testcases, no failure (%d, %d)" % (len(cases), len(fails)))
        names = sorted(c.get("name") for c in cases)
        check(names[0] == "exp/fp32/16x33/normal/contiguous",
              "testcase named op/dtype/shape/input/layout (%s)" % names[0])

        p = s.ctl("submit", "fail.json", "--device", "emu-fast", "--wait", "--junit",
                  "fail.xml", "--timeout", "240")
        check(p.returncode == 1, "failing job: numvalctl exits 1 (got %d: %s)" %
              (p.returncode, p.stderr[-500:]))
        job_id = p.stdout.strip()
        job = s.job(job_id)
        stored = s.cases(job_id)
        n_failed = sum(1 for c in stored if c["verdict"] == "failed")
        check(job["state"] == "failed" and n_failed >= 1 and job["cases_failed"] == n_failed,
              "failing job stored as failed, %d failed cases" % n_failed)
        root, cases, fails, errors = junit_counts(os.path.join(d, "fail.xml"))
        check(len(cases) == len(stored) and len(fails) == n_failed and not errors,
              "fail.xml: %d testcases, %d failures (API: %d, %d)" %
              (len(cases), len(fails), len(stored), n_failed))
        check(root.get("failures") == str(n_failed) and root.get("tests") == str(len(stored)),
              "fail.xml totals match")
        check("first mismatches" in (fails[0].find("failure").text or ""),
              "a <failure> carries the first mismatches")
        check(all(c["tolerance"].get("reason_code") == "approximation_error"
                  for c in stored), "cases record the tolerance with its reason")

        p = s.ctl("submit", "bad.json", "--wait")
        check(p.returncode == 2 and "no_such_op" in p.stderr and "/op" in p.stderr,
              "bad spec: exit 2 with the server's message and field (%s)" % p.stderr.strip())

        p = s.ctl("--json", "jobs", "--limit", "10", token_scope="read")
        listed = json.loads(p.stdout)["jobs"] if p.returncode == 0 else []
        check(len(listed) == 2, "numvalctl --json jobs lists the 2 accepted jobs")

        # More numvalctl commands a CI script relies on, against the live server.
        p = s.ctl("show", job_id, token_scope="read")
        check(p.returncode == 0 and "failed" in p.stdout, "numvalctl show prints the job")
        p = s.ctl("--json", "cases", job_id, "--failed", token_scope="read")
        check(p.returncode == 0 and len(json.loads(p.stdout)["cases"]) == n_failed,
              "numvalctl cases --failed lists the %d failed cases" % n_failed)
        p = s.ctl("tolerance", "set", "--op", "exp", "--dtype", "fp32", "--metric", "ulp",
                  "--max-ulp", "2", "--reason-code", "approximation_error", "--reason", "",
                  token_scope="admin")
        check(p.returncode == 2 and "reason" in p.stderr, "tolerance set without reason refused")
        p = s.ctl("tolerance", "set", "--op", "exp", "--dtype", "fp32", "--metric", "ulp",
                  "--max-ulp", "2", "--reason-code", "approximation_error", "--reason",
                  "fast exp documented to 2 ulp", token_scope="admin")
        check(p.returncode == 0 and "version" in p.stdout,
              "tolerance set with a reason makes a new version (%s%s)" % (p.stdout, p.stderr))
        p = s.ctl("--json", "tolerance", "history", "--op", "exp", "--dtype", "fp32",
                  token_scope="read")
        check(p.returncode == 0 and "fast exp documented" in p.stdout,
              "tolerance history shows it (%s)" % p.stderr.strip())
        for cmd in (["builds"], ["devices"], ["jobs"]):
            p = s.ctl(*cmd, token_scope="read")
            check(p.returncode == 0, "numvalctl %s works (%s)" % (cmd[0], p.stderr.strip()))
        p = s.ctl("--json", "devices", token_scope="read")
        devs = {d["name"]: d for d in json.loads(p.stdout)["devices"]}
        check(devs.get("emu-sup", {}).get("local") is True and "emu-fast" in devs,
              "devices: the supervised emu-sup (local) and the standalone emu-fast")

        sha = next((c.get("artifact") for c in stored if c.get("artifact")), None)
        check(sha is not None, "a failed case has an artifact id")
        p = s.ctl("artifact", sha, "-o", "a.nvart", token_scope="read")
        check(p.returncode == 0, "numvalctl artifact downloads it (%s)" % p.stderr.strip())
        with open(os.path.join(d, "a.nvart"), "rb") as f:
            blob = f.read()
        check(hashlib.sha256(blob).hexdigest() == sha and blob[:4] == b"\x28\xb5\x2f\xfd",
              "artifact bytes hash to its id and are one zstd frame")
        failed_case = next(c for c in stored if c.get("artifact") == sha)
        p = s.ctl("--json", "artifact", sha, "--manifest", token_scope="read")
        check(p.returncode == 0, "numvalctl artifact --manifest loads it (%s)" % p.stderr.strip())
        art = json.loads(p.stdout)
        m = art["manifest"]
        check(m["format"] == "numval-artifact" and m["version"] == 1 and
              str(m["job_id"]) == str(job_id) and m["case_index"] == failed_case["index"],
              "manifest names the job and the case")
        check(m["tolerance"]["max_ulp"] == 0.5 and m["seed"] == failed_case["seed"] and
              m["failure_class"] == failed_case["failure_class"],
              "manifest carries seed, tolerance and failure class of the case")
        numel = 1
        for e in failed_case["shape"]:
            numel *= e
        # exp takes one input; fp32 is dtype id 1, 4 bytes per element (backend ABI).
        want = [("input:0", 1, failed_case["shape"], 4 * numel),
                ("output:0", 1, failed_case["shape"], 4 * numel)]
        got = [(t["name"], t["dtype"], t["shape"], t["nbytes"]) for t in art["tensors"]]
        check(got == want, "artifact holds the exact input and the device output (%s)" % got)
        # The stored bytes are the values the case reports: at the first mismatch
        # the input is the reported input and the output the reported device value.
        vals = {}
        for name in ("input:0", "output:0"):
            p = s.ctl("artifact", sha, "-o", name + ".bin", "--tensor", name, token_scope="read")
            check(p.returncode == 0, "numvalctl artifact --tensor %s (%s)" % (name, p.stderr.strip()))
            with open(os.path.join(d, name + ".bin"), "rb") as f:
                raw = f.read()
            vals[name] = struct.unpack("<%df" % (len(raw) // 4), raw)
        fm = failed_case["first_mismatches"][0]
        lin = 0
        for i, e in zip(fm["index"], failed_case["shape"]):
            lin = lin * e + i
        check(vals["input:0"][lin] == fm["inputs"][0] and vals["output:0"][lin] == fm["got"],
              "at the first mismatch %s: input %r and device output %r match the case" %
              (fm["index"], vals["input:0"][lin], vals["output:0"][lin]))

        s.kill_daemon()
        p = s.ctl("submit", "pass.json", "--wait")
        check(p.returncode == 2 and "cannot reach" in p.stderr,
              "server unreachable: exit 2 (%s)" % p.stderr.strip())


if __name__ == "__main__":
    main(test)
