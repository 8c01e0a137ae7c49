#!/usr/bin/env python3
"""Contract jobs through the service: numvalctl submit --wait of a contract job
to a real numvald, run by the worker it supervises (emu, truthful: exit 0,
stored as passed) and by a standalone worker on a lying device (plugin_liar.c
computing with FTZ, declaring none: exit 1, stored as failed with the
contract.fp32.ftz mismatch and its evidence); the stored result is valid under
schema/result.schema.json, numvalctl show prints it, --junit gives one test case
per judged field (failed exactly for the mismatches), numvalctl contract DEVICE
[--build B] shows the newest one's declared and measured contract (clear errors
for an unknown device or build, or none yet), a [schedule] running the shipped
nightly suite's contract job runs it on the schedule's device, build compare
reports a device's changed measured contract as a regression (exit 1), and a
bad contract spec is
refused at submit time with its JSON pointer (numvald validates with core/spec).

usage: test_contract_service.py NUMVALD NUMVAL-WORKER NUMVALCTL LIAR_SO"""
import json
import os
import signal
import sys
import time
import xml.etree.ElementTree as ET

import nvschema
from nvservice import SLOW, Service, check, main

LIAR = sys.argv.pop(4) if len(sys.argv) > 4 else ""
SPEC = {"kind": "contract", "dtypes": ["fp32", "bf16"], "fp32_sweep": 256}
NIGHTLY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "suites",
                       "nightly.json")
# Every minute: the slot after the daemon starts fires within 60 s.
SCHEDULE = "\n".join(["", "[schedule nightly]", "cron = * * * * *", "suite = %s",
                      "device = emu-night", ""])


def text(v):
    """A value as numvalctl writes it: strings bare, booleans lower case."""
    return v if isinstance(v, str) else json.dumps(v)


def junit_cases(path):
    """The test cases of the one testsuite of a JUnit file, by name."""
    suites = ET.parse(path).getroot().findall("testsuite")
    check(len(suites) == 1, "one testsuite in %s (got %d)" % (path, len(suites)))
    return {tc.get("name"): tc for tc in suites[0].findall("testcase")}


def junit_checks(path, result):
    """One test case per judged field, named as the field; failed exactly for a
    mismatch, with its type, declared and measured values and evidence."""
    cases = junit_cases(path)
    judged = [j["field"] for j in result.get("judged", [])]
    check(len(judged) == result["summary"]["cases"] and sorted(cases) == sorted(judged),
          "%s: a test case per judged field (%d cases, %d judged, summary %d)" %
          (path, len(cases), len(judged), result["summary"]["cases"]))
    check(all(n.startswith("contract.") for n in cases), "%s: names contract.DTYPE.FIELD" % path)
    failed = {n for n, tc in cases.items() if tc.find("failure") is not None}
    mism = {m["field"]: m for m in result["mismatches"]}
    check(failed == set(mism), "%s: failed test cases %s are the mismatches %s" %
          (path, sorted(failed), sorted(mism)))
    for name in failed:
        f = cases[name].find("failure")
        m = mism[name]
        body = f.text or ""
        check(f.get("type") == "contract_mismatch" and
              "measured " + text(m["measured"]) in f.get("message", "") and
              "field: " + name in body and "declared: " in body and "evidence: " in body,
              "%s: %s failed with type, measured value and evidence (%s / %s)" %
              (path, name, f.attrib, body[:300]))
    return cases


def cases_passed(tc):
    return tc.tag == "testcase" and all(tc.find(t) is None for t in ("failure", "error", "skipped"))


def row(out, dtype, field):
    """The cells of numvalctl contract's table row for dtype and field."""
    for line in out.splitlines():
        cells = line.split()
        if cells[:2] == [dtype, field]:
            return cells
    return []


def contract_checks(s, ok_id, liar_job):
    """numvalctl contract: the newest finished contract job of the device (and
    build), declared beside measured, mismatches marked."""
    r = liar_job["result"]
    p = s.ctl("--json", "contract", "liar", token_scope="read")
    got = json.loads(p.stdout) if p.returncode == 0 else {}
    check(got.get("job_id") == liar_job["id"] and got.get("state") == "failed" and
          got.get("measured") == r["measured"]["contract"] and
          got.get("declared") == r["contract"] and got.get("judged") == r["judged"] and
          [m["field"] for m in got.get("mismatches", [])] ==
          [m["field"] for m in r["mismatches"]],
          "contract --json liar: the stored job's declared and measured contract (%s)" %
          p.stderr.strip())
    p = s.ctl("contract", "liar", token_scope="read")
    ftz = row(p.stdout, "fp32", "ftz")
    order = row(p.stdout, "fp32", "reduction_order")
    check(p.returncode == 0 and ftz[-2:] == ["true", "MISMATCH"] and "kept" in ftz and
          order[-1:] == ["agrees"] and
          row(p.stdout, "fp32", "matmul_deterministic")[-1:] == ["agrees"] and
          row(p.stdout, "fp32", "accumulator_bits")[-2:] == ["not", "judged"],
          "contract liar: fp32 ftz declared kept, measured true, a mismatch; the order agrees "
          "(%s | %s)\n%s" % (ftz, order, p.stdout))
    p = s.ctl("contract", "emu-sup", token_scope="read")
    check(p.returncode == 0 and ("contract job %d (passed)" % ok_id) in p.stdout and
          row(p.stdout, "fp32", "ftz")[-2:] == ["false", "agrees"] and "MISMATCH" not in p.stdout,
          "contract emu-sup: the passing job, ftz agrees, no mismatch\n%s" % p.stdout)
    p = s.ctl("--json", "contract", "liar", "--build", "b7", token_scope="read")
    got = json.loads(p.stdout) if p.returncode == 0 else {}
    check(got.get("job_id") == liar_job["id"], "contract liar --build b7: that build's job")
    p = s.ctl("contract", "emu-sup", "--build", "b7", token_scope="read")
    check(p.returncode == 2 and "no finished contract job of build 'b7'" in p.stderr,
          "contract emu-sup --build b7: none of that build (%s)" % p.stderr.strip())
    p = s.ctl("contract", "liar", "--build", "b8", token_scope="read")
    check(p.returncode == 2 and "no build 'b8'" in p.stderr,
          "contract --build of an unknown build: a clear error (%s)" % p.stderr.strip())


def compare_checks(s):
    """Build compare: a device whose measured contract changed between two
    builds is a regression (exit 1) although no case exists to fail; the same
    contract twice is not."""
    for build, backend in (("b5", "plugin:%s?|" % LIAR), ("b6", "plugin:%s?|" % LIAR),
                           ("b8", "plugin:%s?ftz=on|" % LIAR)):
        w = s.start_worker("flip", backend)
        # --new-device: the worker just started may not have polled yet (the
        # device is known to numvald from its first claim).
        p = s.ctl("submit", "c.json", "--device", "flip", "--new-device", "--wait", "--timeout",
                  "240", "--build-name", "kernels", "--build-version", build)
        check(p.returncode in (0, 1), "flip build %s: a contract job ran (%d: %s)" %
              (build, p.returncode, p.stderr[-300:]))
        s.kill_worker(w, signal.SIGTERM)
    p = s.ctl("compare", "b5", "b6", token_scope="read")
    check(p.returncode == 0 and "contract_changes: 0 (devices compared: 1)" in p.stdout,
          "compare b5 b6: the same contract, exit 0 (%d)\n%s%s" %
          (p.returncode, p.stdout, p.stderr))
    p = s.ctl("--json", "compare", "b6", "b8", token_scope="read")
    got = json.loads(p.stdout) if p.stdout.strip() else {}
    changes = {(c["device"], c["dtype"], c["field"]): (c["base"], c["head"])
               for c in got.get("contract_changes", [])}
    check(p.returncode == 1 and changes.get(("flip", "fp32", "ftz")) == (False, True) and
          got["counts"]["contract_devices"] == 1 and got["counts"]["matched"] == 0 and
          all(d == "flip" for d, _, _ in changes),
          "compare b6 b8: flip's fp32 ftz false -> true is a regression, exit 1 (%d, %s)" %
          (p.returncode, sorted(changes)))
    p = s.ctl("compare", "b6", "b8", "--kind", "contract", token_scope="read")
    check(p.returncode == 1 and "flip fp32 ftz: false -> true" in p.stdout,
          "compare --kind contract prints the change\n%s" % p.stdout)
    p = s.ctl("compare", "b6", "b8", "--kind", "op", token_scope="read")
    check(p.returncode == 3, "compare --kind op leaves contracts out: nothing matched, exit 3 "
          "(%d)" % p.returncode)


def nightly_checks(s):
    """The schedule's contract job: run on the schedule's device, and what
    numvalctl contract of that device shows."""
    deadline = time.time() + 150 * SLOW
    ids = []
    while not ids and time.time() < deadline:
        st, body = s.api("GET", "/api/v1/schedules", scope="read")
        last = (body or {}).get("schedules", [{}])[0].get("last_run") or {}
        ids = last.get("job_ids") or []
        if not ids:
            time.sleep(0.5)
    check(len(ids) == 1, "the every-minute schedule fired and submitted one job (%s)" % ids)
    job = s.wait_jobs(ids, 240)[ids[0]]
    r = job.get("result") or {}
    check(job["kind"] == "contract" and job["device"] == "emu-night" and
          job["state"] == "passed" and r.get("summary", {}).get("cases", 0) > 0,
          "the scheduled contract job ran on emu-night and passed (%s on %s, %s judged)" %
          (job["state"], job["device"], r.get("summary", {}).get("cases")))
    p = s.ctl("--json", "contract", "emu-night", token_scope="read")
    got = json.loads(p.stdout) if p.returncode == 0 else {}
    check(got.get("job_id") == job["id"] and sorted(got.get("measured", {})) ==
          sorted(r["measured"]["contract"]) and len(got["measured"]) >= 4,
          "numvalctl contract emu-night: the scheduled job, every float dtype (%s)" %
          sorted(got.get("measured", {})))


def test(bins):
    whole = nvschema.validator("job_result")
    with open(NIGHTLY) as f:
        nightly = json.load(f)
    contract_jobs = [j for j in nightly["jobs"] if j.get("kind") == "contract"]
    check(len(contract_jobs) == 1, "the shipped nightly suite has a contract job (%d)" %
          len(contract_jobs))
    with Service(bins, lease_ms=3000, devices={"emu-sup": "emu", "emu-night": "emu"},
                 extra_conf=SCHEDULE) as s:
        # The schedule runs the shipped nightly's contract job (its long runs
        # take minutes; the scheduler submits every job of a suite alike).
        suite = os.path.join(s.tmp, "nightly-contract.json")
        with open(suite, "w") as f:
            json.dump(dict(nightly, jobs=contract_jobs), f)
        with open(s.conf) as f:
            text = f.read()
        with open(s.conf, "w") as f:
            f.write(text.replace("suite = %s", "suite = " + suite))
        s.start_daemon()
        s.start_worker("liar", "plugin:%s?ftz=on|" % LIAR)
        for name, spec in (("c.json", SPEC), ("bad.json", dict(SPEC, dtypes=["int32"]))):
            with open(os.path.join(s.tmp, name), "w") as f:
                json.dump(spec, f)

        p = s.ctl("contract", "emu-sup", token_scope="read")
        check(p.returncode == 2 and "no finished contract job yet" in p.stderr,
              "numvalctl contract before any contract job: a clear error (%s)" % p.stderr.strip())
        p = s.ctl("contract", "nosuch", token_scope="read")
        check(p.returncode == 2 and "device 'nosuch' not found" in p.stderr,
              "numvalctl contract of an unknown device: a clear error (%s)" % p.stderr.strip())

        p = s.ctl("submit", "c.json", "--device", "emu-sup", "--wait", "--timeout", "240",
                  "--junit", "ok.xml")
        check(p.returncode == 0, "truthful emu: numvalctl exits 0 (got %d: %s)" %
              (p.returncode, p.stderr[-500:]))
        job = s.job(p.stdout.strip())
        r = job.get("result") or {}
        check(job["state"] == "passed" and r.get("kind") == "contract" and
              r.get("mismatches") == [] and r["summary"]["cases"] > 0,
              "stored as passed, a contract result with %s judged fields and no mismatch" %
              r.get("summary", {}).get("cases"))
        errs = nvschema.errors(whole, r)
        check(not errs, "the stored passing result is valid (%s)" % errs)
        ok_cases = junit_checks(os.path.join(s.tmp, "ok.xml"), r)
        check("contract.fp32.ftz" in ok_cases and
              cases_passed(ok_cases["contract.fp32.ftz"]),
              "truthful emu: contract.fp32.ftz is a passed test case")

        ok_id = job["id"]
        p = s.ctl("submit", "c.json", "--device", "liar", "--new-device", "--wait", "--timeout",
                  "240", "--junit", "liar.xml", "--build-name", "kernels", "--build-version", "b7")
        check(p.returncode == 1, "lying device: numvalctl exits 1 (got %d: %s)" %
              (p.returncode, p.stderr[-500:]))
        job_id = p.stdout.strip()
        job = s.job(job_id)
        r = job.get("result") or {}
        fields = {m["field"]: m for m in r.get("mismatches", [])}
        m = fields.get("contract.fp32.ftz", {})
        check(job["state"] == "failed" and m.get("measured") is True and m.get("evidence"),
              "stored as failed with contract.fp32.ftz (measured FTZ) and its evidence (%s)" %
              sorted(fields))
        errs = nvschema.errors(whole, r)
        check(not errs, "the stored failing result is valid (%s)" % errs)
        liar_cases = junit_checks(os.path.join(s.tmp, "liar.xml"), r)
        check(not cases_passed(liar_cases.get("contract.fp32.ftz", ET.Element("x"))) and
              cases_passed(liar_cases.get("contract.fp32.reduction_order", ET.Element("x"))),
              "lying device: contract.fp32.ftz failed, contract.fp32.reduction_order passed")
        contract_checks(s, ok_id, job)
        p = s.ctl("show", job_id, token_scope="read")
        check(p.returncode == 0 and "contract.fp32.ftz" in p.stdout,
              "numvalctl show prints the mismatch")

        compare_checks(s)
        nightly_checks(s)

        p = s.ctl("submit", "bad.json", "--wait")
        check(p.returncode == 2 and "/dtypes/0" in p.stderr and "int32" in p.stderr,
              "bad contract spec refused at submit: %s" % p.stderr.strip())


if __name__ == "__main__":
    main(test)
