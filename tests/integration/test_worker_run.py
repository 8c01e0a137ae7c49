#!/usr/bin/env python3
"""numval-worker run: the real binary on real job files: op jobs through
the local runner, and the job the README shows users.

usage: test_worker_run.py NUMVAL_WORKER SOURCE_ROOT [MISBEHAVE_PLUGIN]
Prints TAP. Every run has an explicit timeout; job files live in a temp dir that
is always removed."""
import json
import math
import os
import subprocess
import sys
import tempfile
import time

from nvtap import ok, finish, checks

WORKER, ROOT = sys.argv[1], sys.argv[2]
PLUGIN = sys.argv[3] if len(sys.argv) > 3 else None


def run(tmp, job, backend, *extra, timeout=120):
    """Run a job (dict or path); returns (exit status, parsed stdout or None, stderr)."""
    if isinstance(job, dict):
        path = os.path.join(tmp, "job-%d.json" % checks())
        with open(path, "w") as f:
            json.dump(job, f)
    else:
        path = job
    p = subprocess.run([WORKER, "run", path, "--backend", backend, *extra],
                       capture_output=True, text=True, timeout=timeout)
    try:
        out = json.loads(p.stdout) if p.stdout.strip() else None
    except ValueError:
        out = None
    return p.returncode, out, p.stderr + p.stdout[:2000]


# The job the README shows users, verbatim.
CONTRACT = {"kind": "op", "op": "exp", "dtypes": ["fp32", "bf16"], "shapes": [[4096], [64, 257]],
            "inputs": ["normal", "near_zero", "specials"], "seed": 7,
            "tolerance": {"metric": "ulp", "max_ulp": 1, "reason_code": "approximation_error",
                          "reason": "device exp is documented to 1 ulp"}}
CASE_FIELDS = ["verdict", "op", "dtype", "shape", "input", "max_ulp", "max_abs", "max_rel",
               "mismatches", "tolerance"]


def cases_of(res):
    return res.get("cases", []) if res else []


def test_contract(tmp):
    rc, res, err = run(tmp, CONTRACT, "emu:transcendental=exact")
    ok(rc == 0 and res and res["verdict"] == "passed", "contract example passes on exact emu",
       err)
    cs = cases_of(res)
    ok(len(cs) == 12, "2 dtypes x 2 shapes x 3 classes = 12 cases (%d)" % len(cs))
    ok(all(all(k in c for k in CASE_FIELDS) for c in cs), "each case has the contract's fields")
    # Correctly rounded results are within half an ulp of the exact value
    # (IEEE 754-2019 §4.3.1, round to nearest).
    ok(all(isinstance(c["max_ulp"], (int, float)) and c["max_ulp"] <= 0.5 for c in cs),
       "exact mode: max_ulp <= 0.5 in every case",
       [(c["dtype"], c["input"], c["max_ulp"]) for c in cs])
    ok(all(c["tolerance"].get("reason") == "device exp is documented to 1 ulp" and
           c["tolerance"].get("source") == "job" for c in cs), "cases carry the tolerance reason")
    ok(res and all(k in res for k in ("device", "mode", "contract", "build", "summary")),
       "result has device, mode, contract, build, summary")
    # The shipped default applies when the job has no tolerance.
    job = dict(CONTRACT)
    del job["tolerance"]
    rc, res, err = run(tmp, job, "emu:transcendental=exact")
    ok(rc == 0 and all(c["tolerance"].get("source") == "default" and c["tolerance"].get("reason")
                       for c in cases_of(res)), "no tolerance: shipped default with its reason",
       err)


def test_fast(tmp):
    job = dict(CONTRACT, dtypes=["fp32"], shapes=[[4096]], inputs=["normal"])
    rc, res, err = run(tmp, job, "emu:transcendental=fast")
    c = cases_of(res)[0] if cases_of(res) else {}
    ok(rc == 1 and res["verdict"] == "failed" and c.get("max_ulp", 0) > 1,
       "fast exp fails a 1-ulp tolerance with its real error (%s ulp)" % c.get("max_ulp"), err)
    fm = c.get("first_mismatches", [])
    ok(len(fm) > 0 and all(k in fm[0] for k in ("index", "inputs", "got", "exact", "ulp_error")),
       "failed case lists first mismatches with index, input, got, exact", fm[:1])
    # Check the first mismatch independently: got is that far from exact in fp32 ulps.
    if fm:
        m = fm[0]
        e = m["exact"]
        ulp = 2.0 ** (max(math.floor(math.log2(abs(e))), -126) - 23) if e else 2.0 ** -149
        ok(abs(abs(m["got"] - e) / ulp - m["ulp_error"]) < 1e-6 * max(1, m["ulp_error"]),
           "reported ulp_error matches |got - exact| / ulp(exact)")
    # A 2-D transposed view: each first mismatch names its [row, col] and the input
    # there; exp of that input (Python's libm, within 1e-15 relative of the exact
    # value) must be the reported exact value, so indices and inputs line up.
    grid = dict(job, shapes=[[64, 257]], layouts=["transposed"])
    rc, res, err = run(tmp, grid, "emu:transcendental=fast")
    fm = cases_of(res)[0].get("first_mismatches", []) if cases_of(res) else []
    ok(rc == 1 and fm and all(len(m["index"]) == 2 and 0 <= m["index"][0] < 64 and
                              0 <= m["index"][1] < 257 and
                              abs(m["exact"] - math.exp(m["inputs"][0])) <= 1e-15 * m["exact"]
                              for m in fm),
       "transposed [64, 257]: mismatches map to [row, col] with their inputs", fm[:2] or err)
    loose = dict(job, tolerance={"metric": "ulp", "max_ulp": 4096,
                                 "reason_code": "accepted_fast_algorithm",
                                 "reason": "fast exp polynomial, accepted for inference"})
    rc, res, err = run(tmp, loose, "emu:transcendental=fast")
    ok(rc == 0 and res["verdict"] == "passed" and
       cases_of(res)[0]["tolerance"]["reason_code"] == "accepted_fast_algorithm",
       "fast exp passes an accepted_fast_algorithm tolerance", err)


# Accepted-fast tolerances, each derived from the emu's documented fast
# algorithms (worker/backends/emu/emu_fast.c) for inputs with |x| <= 4.
FAST_ACCEPTED = {
    "exp": {"metric": "ulp", "max_ulp": 128, "reason": "emu fast exp bound: |x|/2 + 3 ulp, "
            "stated as 128 ulp over all fp32 with normal results"},
    "log": {"metric": "ulp", "max_ulp": 4, "reason": "emu fast log stated bound, 4 ulp"},
    "tanh": {"metric": "ulp", "max_ulp": 8, "reason": "emu fast tanh stated bound, 8 ulp"},
    "erf": {"metric": "ulp", "max_ulp": 8, "reason": "emu fast erf stated bound, 8 ulp"},
    "sigmoid": {"metric": "ulp", "max_ulp": 8, "reason": "1/(1 + fast exp(-x)): exp's "
                "|x|/2 + 3 <= 5 ulp for |x| <= 4, plus the add and divide roundings"},
    # x/2 (1 + fast erf(x/sqrt 2)): erf's 8 ulp near |erf| = 1 (<= 8 * 2^-23) times
    # |x|/2 <= 2 is <= 1.9e-6 absolute; the cancellation in 1 + erf for x < 0 makes
    # a ulp bound meaningless there.
    "gelu": {"metric": "allclose", "atol": 2e-6, "rtol": 1e-6,
             "reason": "fast erf's 8 ulp scaled by |x|/2 <= 2 for |x| <= 4"},
}


def test_transcendentals(tmp):
    # exact mode is correctly rounded (<= 0.5 ulp,
    # IEEE 754-2019 §4.3.1) in fp32/bf16/fp16; fast mode shows its real error in
    # fp32 (> 1 ulp), fails a faithful (1 ulp) tolerance and passes an
    # accepted_fast_algorithm one.
    for op in ("exp", "log", "tanh", "erf", "sigmoid", "gelu"):
        job = {"kind": "op", "op": op, "dtypes": ["fp32", "bf16", "fp16"], "shapes": [[4096]],
               "inputs": ["normal", "uniform", "domain_edges"], "seed": 1}
        rc, res, err = run(tmp, job, "emu:transcendental=exact")
        worst = max((c.get("max_ulp", 9) for c in cases_of(res)), default=9)
        ok(rc == 0 and worst <= 0.5, "%s exact: passes, max_ulp %s <= 0.5" % (op, worst), err)
        fast = dict(job, dtypes=["fp32"], inputs=["normal", "uniform"],
                    tolerance={"metric": "ulp", "max_ulp": 1, "reason_code": "approximation_error",
                               "reason": "faithful rounding"})
        rc, res, err = run(tmp, fast, "emu:transcendental=fast")
        worst = max((c.get("max_ulp", 0) for c in cases_of(res)), default=0)
        ok(rc == 1 and worst > 1, "%s fast fp32: real error %s ulp fails 1 ulp" % (op, worst),
           err)
        fast["tolerance"] = dict(FAST_ACCEPTED[op], reason_code="accepted_fast_algorithm")
        rc, res, err = run(tmp, fast, "emu:transcendental=fast")
        ok(rc == 0, "%s fast fp32 passes an accepted_fast_algorithm tolerance" % op, err)


def test_errors(tmp):
    job = dict(CONTRACT, dtypes=["fp32", "fp7"])
    rc, res, err = run(tmp, job, "emu")
    ok(rc == 2 and "/dtypes/1: unknown dtype 'fp7'" in err, "bad dtype: exit 2 naming /dtypes/1",
       err)
    rc, res, err = run(tmp, dict(CONTRACT, kind="bogus"), "emu")
    ok(rc == 2 and "/kind" in err and "unknown kind 'bogus'" in err,
       "unknown kind refused naming /kind", err)
    rc, res, err = run(tmp, CONTRACT, "nosuchbackend:x=1")
    ok(rc == 2 and "nosuchbackend" in err, "unknown backend: exit 2 with the loader's message",
       err)
    rc, res, err = run(tmp, CONTRACT, "plugin:/nonexistent/libnope.so")
    ok(rc == 2 and "libnope" in err, "missing plugin: exit 2", err)
    bad = os.path.join(tmp, "broken.json")
    with open(bad, "w") as f:
        f.write("{\"kind\": ")
    p = subprocess.run([WORKER, "run", bad, "--backend", "emu"], capture_output=True, text=True,
                       timeout=30)
    ok(p.returncode == 2 and "broken.json" in p.stderr, "unparsable file: exit 2", p.stderr)
    p = subprocess.run([WORKER, "--help"], capture_output=True, text=True, timeout=30)
    ok(p.returncode == 0 and "numval-worker run JOB.json --backend SPEC" in p.stdout, "--help")
    p = subprocess.run([WORKER, "--version"], capture_output=True, text=True, timeout=30)
    ok(p.returncode == 0 and p.stdout.startswith("numval-worker "), "--version")


def test_threads(tmp):
    job = {"kind": "op", "op": "add", "dtypes": ["fp32", "bf16"], "shapes": [[300], [17, 33]],
           "layouts": ["contiguous", "transposed", "strided"],
           "inputs": ["normal", "specials", "midpoints"], "seed": 11,
           "expect_error": {"case": "shape_mismatch"}}
    outs = []
    for t in ("1", "4"):
        path = os.path.join(tmp, "threads-%s.json" % t)
        rc, res, err = run(tmp, job, "emu", "--threads", t, "--output", path)
        with open(path) as f:
            outs.append(f.read())
        ok(rc == 0 and json.loads(outs[-1])["verdict"] == "passed",
           "add with layouts and expect_error passes (--threads %s)" % t, err)
    ok(outs[0] == outs[1], "--threads 1 and --threads 4 print identical results")
    res = json.loads(outs[0])
    ex = [c for c in res["cases"] if c.get("expect_error")]
    ok(len(ex) == 2 and all(c["verdict"] == "passed" and c["returned_code"] == "NV_E_SHAPE"
                            for c in ex), "shape mismatch refused with NV_E_SHAPE", ex)


def test_determinism(tmp):
    job = {"kind": "op", "op": "sum", "dtypes": ["fp32"], "shapes": [[8, 4096]],
           "inputs": ["normal"], "seed": 3, "repeat": 2}
    rc, res, err = run(tmp, job, "emu:reduce=random")
    cs = cases_of(res)
    ok(res and cs and cs[0].get("deterministic") is False and res.get("deterministic") is False,
       "random reduction order is reported non-deterministic when run twice", err)
    rc, res, err = run(tmp, job, "emu:reduce=sequential")
    ok(rc == 0 and cases_of(res) and cases_of(res)[0].get("deterministic") is True,
       "sequential reduction is deterministic", err)
    rc, res, err = run(tmp, dict(job, deterministic=True), "emu:reduce=random")
    cs = cases_of(res)
    ok(rc == 2 and cs and cs[0]["verdict"] == "error" and
       cs[0].get("failure_class") == "nondeterministic_op" and "sum" in cs[0].get("error", ""),
       "deterministic job: an op in describe's nondeterministic_ops is refused", err)


def test_sum_bound(tmp):
    # fp32 sum of 10^6 normal values with sequential fp32 accumulation stays inside
    # the shipped worst-case bound 2 (n-1) u sum|x_i| (Higham §4.2) and inside the
    # probabilistic bound sqrt(n) u sum|x_i| (Higham and Mary, SIAM J. Sci. Comput.
    # 2019: rounding errors of random sign grow like sqrt(n)). The same data with
    # bf16 accumulation (u = 2^-8 instead of 2^-24) exceeds the latter.
    job = {"kind": "op", "op": "sum", "dtypes": ["fp32"], "shapes": [[1000000]],
           "inputs": ["normal"], "seed": 5}
    rc, res, err = run(tmp, job, "emu:accum=fp32,reduce=sequential")
    ok(rc == 0, "10^6-element fp32 sum, fp32 sequential accumulation: inside the default bound",
       err)
    job["tolerance"] = {"metric": "bound", "c": 1, "growth": "sqrtn", "u_dtype": "fp32",
                        "reason_code": "reduction_length",
                        "reason": "probabilistic bound sqrt(n) u sum|x_i| for fp32 accumulation"}
    rc, res, err = run(tmp, job, "emu:accum=fp32,reduce=sequential")
    ok(rc == 0, "fp32 accumulation: inside the sqrt(n) bound", err)
    rc, res, err = run(tmp, job, "emu:accum=bf16,reduce=sequential")
    c = cases_of(res)[0] if cases_of(res) else {}
    ok(rc == 1 and c.get("failure_class") == "bound_exceeded" and c.get("headroom", 0) > 1,
       "the same data with bf16 accumulation exceeds it (headroom %s)" % c.get("headroom"), err)


def test_fp8_matmul(tmp):
    job = {"kind": "op", "op": "matmul", "dtypes": ["fp8_e4m3"],
           "attrs": {"scale": "block:32", "acc": "fp32"}, "shapes": [[32, 128, 16]],
           "inputs": ["normal"], "seed": 9}
    rc, res, err = run(tmp, job, "emu")
    cs = cases_of(res)
    ok(rc == 0 and cs and cs[0]["out_dtype"] == "fp32",
       "fp8 e4m3 matmul with block:32 e8m0 scales, fp32 accumulation passes", err)


def test_plugin(tmp):
    """The runner's output checks against a device that misbehaves on purpose
    (tests/integration/plugin_misbehave.c)."""
    if not PLUGIN:
        ok(True, "# SKIP misbehaving plugin not given")
        return
    job = {"kind": "op", "op": "add", "dtypes": ["fp32"], "shapes": [[4, 8]],
           "layouts": ["contiguous", "transposed", "strided"], "inputs": ["normal", "specials"],
           "seed": 2, "expect_error": {"case": "shape_mismatch"}}
    spec = "plugin:%s?bad=" % PLUGIN
    rc, res, err = run(tmp, job, spec + "none")
    ok(rc == 0 and res["device"] == "misbehave" and res["mode"] == {"bad": "none"},
       "plugin computing correctly passes, in every layout; describe fields in the result",
       err)
    for bad, cls in (("shape", "bad_output_shape"), ("strides", "bad_output_strides"),
                     ("dtype", "bad_output_dtype"), ("count", "bad_output")):
        rc, res, err = run(tmp, job, spec + bad)
        regular = [c for c in cases_of(res) if not c.get("expect_error")]
        ok(rc == 1 and len(regular) == 6 and
           all(c["verdict"] == "failed" and c["failure_class"] == cls for c in regular),
           "bad=%s: every case fails with %s" % (bad, cls), regular[:1] or err)
    rc, res, err = run(tmp, job, spec + "accept")
    ex = [c for c in cases_of(res) if c.get("expect_error")]
    ok(rc == 1 and len(ex) == 1 and ex[0]["verdict"] == "failed" and
       ex[0]["failure_class"] == "unexpected_success" and ex[0]["returned_code"] == "NV_OK",
       "a device computing add for mismatched shapes fails the invalid-input case", ex or err)
    # Element 13 of a [4, 8] output is [1, 5] (13 = 1 * 8 + 5) in every layout: the
    # device returns a contiguous output whatever the input strides. One ulp away
    # from the correctly rounded sum is more than half an ulp from the exact one.
    rc, res, err = run(tmp, dict(job, inputs=["normal"]), spec + "bit")
    fm = [c["first_mismatches"][0] for c in cases_of(res) if c.get("first_mismatches")]
    ok(rc == 1 and len(fm) == 3 and all(m["index"] == [1, 5] and m["ulp_error"] > 0.5 and
                                        m["got"] != m["exact"] and
                                        abs(m["inputs"][0] + m["inputs"][1] - m["exact"]) <=
                                        abs(m["exact"]) * 2 ** -23 for m in fm),
       "one flipped bit is found at [1, 5] with the inputs there", fm or err)


def test_smoke(tmp):
    t0 = time.time()
    rc, res, err = run(tmp, os.path.join(ROOT, "suites", "smoke.json"), "emu", timeout=240)
    dt = time.time() - t0
    bad = [(r["op"], c["dtype"], c["input"], c.get("failure_class"), c.get("error"))
           for r in (res or {}).get("results", []) for c in r["cases"]
           if c["verdict"] != "passed"]
    ok(rc == 0 and res and res["verdict"] == "passed", "smoke suite passes on emu (%.1f s)" % dt,
       bad or err)
    ok(dt < 60, "smoke suite under a minute")


def main():
    with tempfile.TemporaryDirectory(prefix="nv-worker-run-") as tmp:
        for t in (test_contract, test_fast, test_transcendentals, test_errors, test_threads, test_determinism,
                  test_sum_bound, test_fp8_matmul, test_plugin, test_smoke):
            try:
                t(tmp)
            except Exception as e:  # a crash or timeout fails this test, not the rest
                ok(False, "%s raised %r" % (t.__name__, e))
    return finish()


if __name__ == "__main__":
    sys.exit(main())
