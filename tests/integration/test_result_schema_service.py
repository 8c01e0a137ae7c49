#!/usr/bin/env python3
"""The daemon's and the client's side of the result schema, with real processes.

numvalctl submit --wait --junit runs jobs of every kind on agent workers of a
real numvald (op: passing, failing with the agent's gate and minimizer,
refused as non-deterministic, invalid-input cases; gradient and fused: passing
and failing; a long run; a sum on a faulty plugin that is promoted to the
permanent suite), then suite jobs replay the suite. For every job:

- GET /api/v1/jobs/{id} is a valid stored_job (its result: the uploaded result
  without cases);
- every case of GET /api/v1/jobs/{id}/cases is a valid stored_<kind>_case
  (the worker's case plus id, job_id, tolerance_version, build_id, device), and
  GET /api/v1/cases/{id} serves the same object;
- the JUnit file's <testsuite> of the job holds exactly the test cases the
  stored fields call for (docs/CLIENT.md "JUnit XML": an op or suite case each,
  a gradient case's checks, a fused case's outputs and first divergent node, a
  long run's acceptance rules), in order, each passed, failed (with the case's
  failure class as its type) or errored as the case says, and totals that add
  up; numvalctl's exit status follows the jobs' states.

The validator is shown able to fail: mutated stored cases, a case without its
stored fields, a stored result that kept its cases, and an unknown job state are
each rejected.

usage: test_result_schema_service.py NUMVALD NUMVAL-WORKER NUMVALCTL DROPSUM_SO BADGRAD_SO"""
import copy
import json
import os
import sys
import xml.etree.ElementTree as ET

BADGRAD = sys.argv.pop(5) if len(sys.argv) > 5 else ""
DROPSUM = sys.argv.pop(4) if len(sys.argv) > 4 else ""

import nvschema  # noqa: E402 (after the argv the helpers read)
from nvservice import Service, check, main  # noqa: E402

EXP = {"kind": "op", "op": "exp", "dtypes": ["fp32"], "shapes": [[257], [16, 33]],
       "inputs": ["normal", "uniform"], "seed": 11}
TIGHT = {"metric": "ulp", "max_ulp": 0.5, "reason_code": "approximation_error",
         "reason": "schema test: demand correct rounding to expose the fast exp"}
ATTENTION = {"kind": "fused",
             "graph": {"inputs": [{"name": "q", "shape": [64, 32]},
                                  {"name": "kT", "shape": [32, 64]},
                                  {"name": "v", "shape": [64, 32]}],
                       "nodes": [{"name": "s", "op": "matmul", "inputs": ["q", "kT"]},
                                 {"name": "p", "op": "softmax", "inputs": ["s"],
                                  "attrs": {"axis": -1}},
                                 {"name": "o", "op": "matmul", "inputs": ["p", "v"]}],
                       "outputs": ["o"]},
             "dtypes": ["bf16"], "inputs": ["normal"], "seed": 5}
# Higham's pairwise bound: the dropsum plugin's correct sums are far inside it; the
# element it drops (5000 of an axis longer than 4096) exceeds it.
DROPPED_SUM = {"kind": "op", "op": "sum", "dtypes": ["fp32"], "shapes": [[16, 8192]],
               "inputs": ["normal"], "seed": 11, "attrs": {"axis": -1},
               "tolerance": {"metric": "bound", "c": 1, "growth": "log2n",
                             "reason_code": "reduction_length",
                             "reason": "pairwise-or-better fp32 summation, Higham 4.2"}}
JOBS = [
    dict(EXP, name="op passing", device="emu"),
    dict(EXP, name="op failing", device="emu-fast", tolerance=TIGHT),
    {"kind": "op", "op": "sum", "dtypes": ["fp32"], "shapes": [[8, 512]], "seed": 3,
     "deterministic": True, "device": "emu-random", "name": "op refused"},
    {"kind": "op", "op": "add", "dtypes": ["fp32", "bf16"], "shapes": [[17, 33]],
     "layouts": ["contiguous", "transposed"], "expect_error": {"case": "shape_mismatch"},
     "seed": 2, "device": "emu", "name": "op invalid inputs"},
    {"kind": "gradient", "op": "tanh", "dtypes": ["fp32", "bf16"], "shapes": [[4, 8]],
     "seed": 1, "order": 2, "device": "emu"},
    {"kind": "gradient", "op": "sigmoid", "dtypes": ["fp32"], "shapes": [[4, 32]], "seed": 1,
     "device": "badgrad"},
    dict(ATTENTION, device="emu", name="fused passing"),
    dict(ATTENTION, device="emu-bf16", name="fused failing"),
    {"kind": "longrun", "model": "mlp", "sizes": {"in": 8, "hidden": 16, "classes": 4},
     "steps": 5, "batch": 16, "n_seeds": 3, "seed": 1, "log_every": 5,
     "data": {"eval_examples": 64}, "device": "emu"},
    dict(DROPPED_SUM, device="faulty", name="dropped element"),
]
SUITE_JOBS = [{"kind": "suite", "device": "faulty"}, {"kind": "suite", "device": "emu"}]


def validate(v, doc, what):
    errs = nvschema.errors(v, doc)
    check(not errs, "%s is valid%s" % (what, ("; " + "; ".join(errs)) if errs else ""))


def junit_suites(path):
    root = ET.parse(path).getroot()
    check(root.tag == "testsuites", "%s: root is <testsuites>" % os.path.basename(path))
    return root, root.findall("./testsuite")


def check_job(s, v, job_id, ts):
    """Stored job, stored cases and the job's JUnit <testsuite> ts; returns the cases."""
    st, body = s.api("GET", "/api/v1/jobs/%s" % job_id, scope="read")
    check(st == 200, "GET /api/v1/jobs/%s answers" % job_id)
    job = body["job"]
    kind = job["kind"]
    validate(v["stored_job"], job, "job %s (%s, %s) as stored_job" % (job_id, kind, job["state"]))
    cases = s.cases(job_id)
    check(len(cases) == job["cases_total"],
          "job %s: %d cases listed, cases_total %d" % (job_id, len(cases), job["cases_total"]))
    if kind == "longrun":
        check(not cases and job["result"]["acceptance"]["verdict"] == job["state"],
              "long run %s: no cases; its acceptance verdict is the job's state" % job_id)
    bad = []
    for c in cases:
        errs = nvschema.errors(v["stored_%s_case" % kind], c)
        if errs:
            bad.append("case %s: %s" % (c.get("id"), "; ".join(errs)))
        st, one = s.api("GET", "/api/v1/cases/%d" % c["id"], scope="read")
        if st != 200 or one["case"] != c:
            bad.append("GET /api/v1/cases/%d differs from the listed case" % c["id"])
    check(not bad, "job %s: %d stored %s cases valid as stored_%s_case, each also served by "
          "/api/v1/cases/{id}%s" % (job_id, len(cases), kind, kind,
                                    ("; " + "; ".join(bad[:5])) if bad else ""))
    # JUnit: the test cases numvalctl derives from these stored fields.
    want = expected_testcases(job, cases)
    got = [testcase_status(tc) for tc in ts.findall("testcase")]
    n_f = sum(st == "failed" for st, _ in want)
    n_e = sum(st == "error" for st, _ in want)
    check(got == want and ts.get("tests") == str(len(want)) and
          ts.get("failures") == str(n_f) and ts.get("errors") == str(n_e),
          "JUnit suite of job %s (%s): %d testcases for %d cases (%d failures, %d errors), "
          "each as its case says%s" % (job_id, kind, len(got), len(cases), n_f, n_e,
                                       "" if got == want else "; got %s, want %s" % (got, want)))
    return job, cases


def verdict_tc(c):
    v = c["verdict"]
    if v == "passed":
        return ("passed", None)
    if v == "failed":
        return ("failed", c.get("failure_class") or "failed")
    return ("error", None)


def expected_testcases(job, cases):
    """(status, failure type) of each <testcase> numvalctl writes for a job
    (docs/CLIENT.md "JUnit XML"), from the stored job and cases alone: an op or
    suite case each; a gradient case's checks (failed: those in failed_checks);
    a fused case's outputs and its first divergent node; a long run's acceptance
    rules (the matched-weights rule as two: gradient and eval loss); one errored
    test case for a job that ended in error with none."""
    out = []
    if job["kind"] == "longrun":
        acc = job["result"]["acceptance"]
        fin, cls = acc["final_loss"], acc["failure_class"] or "failed"
        for rule in (fin["welch"], fin["trimmed_mean"], acc["envelope"]):
            out.append(("passed", None) if rule["passed"] else ("failed", cls))
        mw = acc["matched_weights"]  # the gradient (every layer) and the eval loss
        out.append(("passed", None) if all(L["passed"] for L in mw["gradient"])
                   else ("failed", "gradient_error"))
        out.append(("passed", None) if mw["eval_loss"]["passed"] else ("failed", "eval_error"))
        det = acc["determinism"]
        if "bit_identical" not in det:
            out.append(("skipped", None))
        else:
            out.append(("passed", None) if det["bit_identical"] else ("failed", "nondeterministic"))
        if acc["verdict"] == "failed" and not any(st == "failed" for st, _ in out):
            out.append(("failed", cls))
    for c in cases:
        if job["kind"] in ("op", "suite") or c["verdict"] not in ("passed", "failed"):
            out.append(verdict_tc(c))
        elif job["kind"] == "gradient":
            for k in [k for k in ("formula", "device", "second_order", "determinism",
                                  "double_backward", "contract") if k in c["checks"]]:
                if k not in c["failed_checks"]:
                    out.append(("passed", None))
                else:
                    cls = (c.get("failure_class")
                           if k in ("device", "determinism", "double_backward", "contract")
                           else None)
                    out.append(("failed", cls or "gradient_check"))
        elif job["kind"] == "fused":
            for node in c.get("nodes", []):
                if node["output"]:
                    out.append(("passed", None) if node["state"] == "within_tolerance"
                               else ("failed", "output_diverged"))
            out.append(verdict_tc(c))
    if not out and job["state"] in ("error", "cancelled"):
        out.append(("error", None))
    return out


def testcase_status(tc):
    f = tc.find("failure")
    if f is not None:
        return ("failed", f.get("type"))
    if tc.find("error") is not None:
        return ("error", None)
    if tc.find("skipped") is not None:
        return ("skipped", None)
    return ("passed", None)


def check_totals(root, jobs_cases):
    tests = sum(len(expected_testcases(j, cs)) for j, cs in jobs_cases)
    check(root.get("tests") == str(tests), "JUnit total tests %s == %d" %
          (root.get("tests"), tests))


def submit(s, name, jobs):
    """numvalctl submit FILE --wait --junit; its exit status must follow the
    jobs' final states (docs/CLIENT.md "Exit status")."""
    with open(os.path.join(s.tmp, name + ".json"), "w") as f:
        json.dump({"name": name, "jobs": jobs}, f)
    p = s.ctl("submit", name + ".json", "--wait", "--junit", name + ".xml", "--timeout", "500",
              timeout=560)
    ids = p.stdout.split()
    check(len(ids) == len(jobs), "numvalctl submit %s --wait --junit: %d job ids (%d: %s)" %
          (name, len(jobs), len(ids), p.stderr[-800:]))
    states = [s.job(i)["state"] for i in ids]
    want_rc = 2 if {"error", "cancelled"} & set(states) else 1 if "failed" in states else 0
    check(p.returncode == want_rc, "numvalctl exit %d for job states %s" % (p.returncode, states))
    root, suites = junit_suites(os.path.join(s.tmp, name + ".xml"))
    check(len(suites) == len(jobs), "%s.xml: one <testsuite> per job" % name)
    return ids, root, suites


def negatives(v, samples, job):
    """The validator rejects what a drifting daemon or worker would serve."""
    missed, total = [], 0
    for kind, c in samples:
        for what, bad in nvschema.mutations(c) + [
                ("without 'id'", {k: x for k, x in c.items() if k != "id"}),
                ("job_id as a string", dict(c, job_id=str(c["job_id"]))),
                ("build_id not a sha256", dict(c, build_id="b1")),
                ("the worker's case alone",
                 {k: x for k, x in c.items()
                  if k not in ("id", "job_id", "tolerance_version", "build_id", "device")})]:
            total += 1
            if not nvschema.errors(v["stored_%s_case" % kind], bad):
                missed.append("%s: %s" % (kind, what))
    check(total > 40 and not missed, "%d mutated stored cases rejected%s" %
          (total - len(missed), ("; accepted: " + ", ".join(missed)) if missed else ""))
    for what, bad in [("a stored result that kept its cases",
                       dict(job, result=dict(job["result"], cases=[]))),
                      ("state 'done'", dict(job, state="done")),
                      ("created_at without milliseconds",
                       dict(job, created_at=job["created_at"][:19] + "Z")),
                      ("an unknown key", dict(job, lease_token="x"))]:
        check(nvschema.errors(v["stored_job"], copy.deepcopy(bad)), "stored_job rejects %s" % what)


def test(bins):
    sv, hv = nvschema.versions()
    check(sv == hv == 1, "schema version %s == NV_RESULT_SCHEMA_VERSION %s" % (sv, hv))
    v = {k: nvschema.validator(k) for k in
         ("stored_job", "stored_op_case", "stored_gradient_case", "stored_fused_case",
          "stored_suite_case")}
    v["stored_longrun_case"] = v["stored_op_case"]  # a long run has none
    agent = ["--minimize-deadline", "20"]
    with Service(bins, lease_ms=4000) as s:
        s.start_daemon()
        for dev, backend in (("emu", "emu"), ("emu-fast", "emu:transcendental=fast"),
                             ("emu-random", "emu:reduce=random"),
                             ("emu-bf16", "emu:fused_intermediate=bf16"),
                             ("badgrad", "plugin:" + BADGRAD),
                             ("faulty", "plugin:%s?fault=drop" % DROPSUM)):
            s.start_worker(dev, backend, extra=agent)

        ids, root, suites = submit(s, "jobs", JOBS)
        done = [check_job(s, v, i, ts) for i, ts in zip(ids, suites)]
        check_totals(root, done)
        states = [j["state"] for j, _ in done]
        check(states == ["passed", "failed", "error", "passed", "passed", "failed", "passed",
                         "failed", "passed", "failed"], "job states %s" % states)
        annotated = [c for _, cs in done for c in cs if c.get("repro_rate")]
        check(annotated and all(c.get("signature") for c in annotated),
              "%d failed cases carry the agent's gate (signature, repro_rate) and were validated"
              % len(annotated))
        # Which failures numvald promotes is its own rule; some of these are.
        st, suite = s.api("GET", "/api/v1/suite", scope="read")
        check(st == 200 and suite["suite"], "failures were promoted to the permanent suite (%d)"
              % len(suite.get("suite", [])))

        # The suite replayed on the faulty device and on emu.
        sids, sroot, ssuites = submit(s, "suite", SUITE_JOBS)
        sdone = [check_job(s, v, i, ts) for i, ts in zip(sids, ssuites)]
        check_totals(sroot, sdone)
        for job, cases in sdone:
            print("# suite job %s on %s: %s" % (job["id"], job["device"], ", ".join(
                "%s %s/%s" % (c.get("kind", "op"), c["verdict"], c.get("failure_class"))
                for c in cases)))
        check(all(len(cs) == len(suite["suite"]) for _, cs in sdone),
              "each suite job replays every suite case (%d)" % len(suite["suite"]))

        samples = {}
        for job, cases in done + sdone:
            for c in cases:
                samples.setdefault((job["kind"], c["verdict"], c.get("failure_class")), c)
        kinds = sorted({k for k, _, _ in samples})
        check(kinds == ["fused", "gradient", "op", "suite"], "stored cases of kinds %s" % kinds)
        negatives(v, [(k, c) for (k, _, _), c in sorted(samples.items(), key=str)], done[1][0])


if __name__ == "__main__":
    main(test)
