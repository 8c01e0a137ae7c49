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
- the JUnit file has, per job, one <testcase> per stored case, in order, with a
  <failure type=FAILURE_CLASS> exactly for the failed cases and an <error> for
  the errored ones, and totals that add up.

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
    # JUnit: one testcase per stored case, in order, failure <=> failed, error <=> error.
    tcs = ts.findall("testcase")
    job_error = job["state"] in ("error", "cancelled") and not cases
    check(len(tcs) == len(cases) + job_error and ts.get("tests") == str(len(tcs)),
          "JUnit suite of job %s: %d testcases for %d cases" % (job_id, len(tcs), len(cases)))
    mism = []
    for tc, c in zip(tcs, cases):
        f, e = tc.find("failure"), tc.find("error")
        want_type = c.get("failure_class") or "failed"
        if (f is not None) != (c["verdict"] == "failed") or \
                (e is not None) != (c["verdict"] == "error") or \
                (f is not None and f.get("type") != want_type):
            mism.append("case %d (%s, %s): failure %s error %s" %
                        (c["index"], c["verdict"], c.get("failure_class"),
                         None if f is None else f.get("type"), e is not None))
    n_f = sum(c["verdict"] == "failed" for c in cases)
    n_e = sum(c["verdict"] == "error" for c in cases) + job_error
    check(not mism and ts.get("failures") == str(n_f) and ts.get("errors") == str(n_e),
          "JUnit suite of job %s: %d failures, %d errors, matching the cases%s" %
          (job_id, n_f, n_e, ("; " + "; ".join(mism[:5])) if mism else ""))
    return job, cases


def check_totals(root, jobs_cases):
    tests = sum(len(cs) + (j["state"] in ("error", "cancelled") and not cs)
                for j, cs in jobs_cases)
    check(root.get("tests") == str(tests), "JUnit total tests %s == %d" %
          (root.get("tests"), tests))


def submit(s, name, jobs, want_rc):
    with open(os.path.join(s.tmp, name + ".json"), "w") as f:
        json.dump({"name": name, "jobs": jobs}, f)
    p = s.ctl("submit", name + ".json", "--wait", "--junit", name + ".xml", "--timeout", "500",
              timeout=560)
    ids = p.stdout.split()
    check(p.returncode == want_rc and len(ids) == len(jobs),
          "numvalctl submit %s --wait --junit: exit %d, %d job ids (got %d, %d: %s)" %
          (name, want_rc, len(jobs), p.returncode, len(ids), p.stderr[-800:]))
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

        # A job ended in error (the refused op): exit 2.
        ids, root, suites = submit(s, "jobs", JOBS, 2)
        done = [check_job(s, v, i, ts) for i, ts in zip(ids, suites)]
        check_totals(root, done)
        states = [j["state"] for j, _ in done]
        check(states == ["passed", "failed", "error", "passed", "passed", "failed", "passed",
                         "failed", "passed", "failed"], "job states %s" % states)
        annotated = [c for _, cs in done for c in cs if c.get("repro_rate")]
        check(annotated and all(c.get("signature") for c in annotated),
              "%d failed cases carry the agent's gate (signature, repro_rate) and were validated"
              % len(annotated))
        st, suite = s.api("GET", "/api/v1/suite", scope="read")
        check(st == 200 and suite["suite"], "failures were promoted to the permanent suite (%d)"
              % len(suite.get("suite", [])))

        # The suite replayed on the faulty device and on emu.
        sids, sroot, ssuites = submit(s, "suite", SUITE_JOBS, 1)
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
