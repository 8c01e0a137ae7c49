#!/usr/bin/env python3
"""RNG jobs (docs/JOBS.md "RNG jobs") through the real worker: the device's
generators driven through the backend's rng entry and judged by the worker.

usage: test_rng.py WORKER SOURCE_ROOT emu RNGLESS_SO
       test_rng.py WORKER SOURCE_ROOT torch          (exit 77: torch absent)

emu: suites/rng.json passes on the correct mode, every test of every case
passed, the same result for 1 and 4 threads; each misbehaving mode fails the
check it breaks and no other: rng_restore=reuse -> state
"restore_reuses_stream" (and the dropout mask restored from a state);
rng_streams=overlap -> seeding "seeds_collide" and streams "streams_overlap"
with the shift of the overlap named; rng_recompute=fresh -> recompute
"recompute_mismatch"; rng_threshold=fp8_e4m3 -> the keep-rate test at
p = 0.1 (0.9 rounds to 0.875). Bad specs are refused naming the field, and
a backend built for ABI version 3 is refused naming the version. Results of
both devices validate against schema/result.schema.json ("rng_result"), and
mutated copies are rejected.
torch: the same suite passes on the PyTorch harness (CPU); --rng-fault
restore_reuse and no_preserve are caught by the state and recompute checks;
a harness listing no optional request gets "not_offered" errors."""
import copy
import json
import os
import subprocess
import sys
import tempfile

import nvschema

n_fail = 0
TESTS = {"seeding": ["same_seed", "same_seed_other_generator", "different_seeds"],
         "state": ["stream_advances", "restore_continues", "restore_other_generator"],
         "streams": ["generators_independent", "no_overlap"],
         "dropout": ["mask_from_seed_offset", "mask_from_state", "mask_advances", "mask_values",
                     "keep_rate"],
         "recompute": ["recompute_replays", "checkpoint_forward", "layers_after",
                       "generator_after_backward", "mask_values", "keep_rate"]}


def check(cond, what):
    global n_fail
    print(("ok - " if cond else "not ok - ") + what, flush=True)
    n_fail += 0 if cond else 1


def run(worker, spec, backend, tmp, threads=2):
    path = os.path.join(tmp, "job.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    p = subprocess.run([worker, "run", path, "--backend", backend, "--threads", str(threads)],
                       capture_output=True, text=True, timeout=600)
    res = json.loads(p.stdout) if p.stdout.strip() else None
    return p.returncode, res, p.stderr


def bad(res):
    """{check or check@p: failure_class} of the cases that did not pass."""
    out = {}
    for c in (res or {}).get("cases", []):
        if c["verdict"] != "passed":
            key = c["check"] + ("@%g" % c["p"] if "p" in c else "")
            out[key] = c.get("failure_class")
    return out


def all_pass(res, what):
    cases = (res or {}).get("cases", [])
    names_ok = all([t["name"] for t in c["tests"]] == TESTS[c["check"]] for c in cases)
    tests_ok = all(t["passed"] and t["why"] for c in cases for t in c["tests"])
    check(res is not None and res["verdict"] == "passed" and cases and names_ok and tests_ok
          and all(c["verdict"] == "passed" for c in cases),
          "%s: %d cases passed, every test passed with its reason (failing: %s)"
          % (what, len(cases), bad(res)))


def schema_ok(res, what):
    v = nvschema.validator()
    errs = nvschema.errors(v, res) if res else ["no result"]
    check(not errs, "%s validates against the result schema %s" % (what, errs))
    return v


def schema_rejects(v, res):
    c = res["cases"][0]
    muts = [("a test without its reason", lambda r: r["cases"][0]["tests"][0].pop("why")),
            ("a case of an unknown check", lambda r: r["cases"][0].__setitem__("check", "x")),
            ("a failure class no check gives",
             lambda r: r["cases"][0].__setitem__("failure_class", "restore_bad")),
            ("a result without its dropout settings", lambda r: r.pop("dropout"))]
    for what, mut in muts:
        bad_res = copy.deepcopy(res)
        mut(bad_res)
        check(nvschema.errors(v, bad_res) != [], "the schema rejects %s" % what)
    return c


def suite_jobs(root):
    with open(os.path.join(root, "suites", "rng.json")) as f:
        return json.load(f)["jobs"]


def emu(worker, root, rngless, tmp):
    jobs = suite_jobs(root)
    for job in jobs:
        rc, res, err = run(worker, job, "emu", tmp)
        check(rc == 0, "%s on emu: exit 0 (%s)" % (job["name"], err.strip()[-300:]))
        all_pass(res, job["name"] + " on emu")
    main = jobs[0]
    _, one, _ = run(worker, main, "emu", tmp, threads=1)
    _, four, _ = run(worker, main, "emu", tmp, threads=4)
    check(one and four and one["cases"] == four["cases"], "the same cases for 1 and 4 threads")

    v = schema_ok(one, "the emu result")
    if one:
        schema_rejects(v, one)
    rc, res, err = run(worker, main, "emu:rng_restore=reuse", tmp)
    schema_ok(res, "the failed result of emu:rng_restore=reuse")
    got = bad(res)
    check(rc == 1 and got == {"state": "restore_reuses_stream",
                              "dropout@0.1": "dropout_not_reproducible",
                              "dropout@0.5": "dropout_not_reproducible"},
          "rng_restore=reuse: the state check names the reused stream, the masks restored from "
          "a state differ; seeding, streams, recompute pass: %s" % got)
    st = [c for c in res["cases"] if c["check"] == "state"][0] if res else {}
    check("repeats the stream's first draw" in st.get("error", ""),
          "the state case says the restored draw repeats numbers already consumed: %s"
          % st.get("error"))

    rc, res, err = run(worker, main, "emu:rng_streams=overlap", tmp)
    got = bad(res)
    check(rc == 1 and got == {"seeding": "seeds_collide", "streams": "streams_overlap"},
          "rng_streams=overlap: seeding and streams fail, nothing else: %s" % got)
    sc = [c for c in res["cases"] if c["check"] == "streams"][0] if res else {"tests": []}
    ov = [t for t in sc["tests"] if t["name"] == "no_overlap"]
    first = ov[0].get("detail", {}).get("first", {}) if ov else {}
    check(abs(first.get("shift", 0)) == 256 and ov[0]["detail"]["false_alarm_bound"] < 1e-9,
          "the overlap is reported with its shift (256 words between adjacent seeds) and the "
          "false-alarm bound: %s" % (ov[0].get("detail") if ov else None))

    rc, res, err = run(worker, main, "emu:rng_recompute=fresh", tmp)
    got = bad(res)
    check(rc == 1 and got == {"recompute@0.1": "recompute_mismatch",
                              "recompute@0.5": "recompute_mismatch"},
          "rng_recompute=fresh: only the recompute cases fail: %s" % got)

    rc, res, err = run(worker, main, "emu:rng_threshold=fp8_e4m3", tmp)
    got = bad(res)
    check(rc == 1 and got == {"dropout@0.1": "keep_rate", "recompute@0.1": "keep_rate"},
          "rng_threshold=fp8_e4m3 (keep 0.875 for 0.9): the keep-rate test fails at p = 0.1, "
          "p = 0.5 (exact in fp8) passes: %s" % got)

    for spec, ptr in [(dict(main, streams=1), "/streams"),
                      (dict(main, dropout={"p": [1.5]}), "/dropout/p/0"),
                      (dict(main, dropout={"p": [0.01], "n": 1024}), "/dropout/p/0"),
                      (dict(main, checks=["seeding", "nope"]), "/checks/1"),
                      (dict(main, streams=64, n=1 << 20), "/streams"),
                      (dict(main, extra=1), "")]:
        rc, res, err = run(worker, spec, "emu", tmp)
        check(rc == 2 and res is None and err.startswith("numval-worker: " + ptr + (": " if ptr else "")),
              "a bad RNG spec is refused at %r: %s" % (ptr, err.strip()))
    rc, res, err = run(worker, main, "plugin:" + rngless, tmp)
    check(rc == 2 and "ABI version 3" in err and "version 4" in err and "rebuild" in err,
          "a version-3 plugin (no rng entry) is refused naming both versions: %s" % err.strip())


def torch(worker, root, tmp):
    ok = subprocess.run(["/usr/bin/python3", "-c", "import torch, numpy"],
                        capture_output=True).returncode == 0
    if not ok:
        print("1..0 # SKIP /usr/bin/python3 cannot import torch and numpy")
        sys.exit(77)
    h = "exec:/usr/bin/python3 " + os.path.join(root, "worker", "harness", "torch_harness.py")
    main = suite_jobs(root)[0]
    for job in suite_jobs(root):
        rc, res, err = run(worker, job, h, tmp)
        check(rc == 0, "%s on torch CPU: exit 0 (%s)" % (job["name"], err.strip()[-300:]))
        all_pass(res, job["name"] + " on torch CPU")
        schema_ok(res, job["name"] + "'s torch result")
    rc, res, err = run(worker, main, h + " --rng-fault restore_reuse", tmp)
    got = bad(res)
    check(rc == 1 and got.get("state") == "restore_reuses_stream"
          and "seeding" not in got and "streams" not in got
          and not any(k.startswith("recompute") for k in got),
          "--rng-fault restore_reuse (set_state reseeds): the state check names the reused "
          "stream: %s" % got)
    rc, res, err = run(worker, main, h + " --rng-fault no_preserve", tmp)
    got = bad(res)
    check(rc == 1 and got == {"recompute@0.1": "recompute_mismatch",
                              "recompute@0.5": "recompute_mismatch"},
          "--rng-fault no_preserve (checkpoint without preserve_rng_state): only the "
          "recompute cases fail: %s" % got)
    rc, res, err = run(worker, dict(main, checks=["seeding"]), h + " --no-requests", tmp)
    schema_ok(res, "the not-offered result")
    got = bad(res)
    check(rc == 2 and got == {"seeding": "not_offered"}
          and "does not list \"rng\"" in res["cases"][0]["error"],
          "a harness that lists no optional request: not_offered, naming the request: %s" % got)


def main():
    worker, root, which = sys.argv[1], sys.argv[2], sys.argv[3]
    with tempfile.TemporaryDirectory(prefix="rng-it-") as tmp:
        if which == "emu":
            emu(worker, root, sys.argv[4], tmp)
        else:
            torch(worker, root, tmp)
    print("# %d failed" % n_fail)
    sys.exit(1 if n_fail else 0)


if __name__ == "__main__":
    main()
