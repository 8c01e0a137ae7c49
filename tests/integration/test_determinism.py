#!/usr/bin/env python3
"""A job's demanded determinism reaching the backend (nv_backend.configure,
docs/JOBS.md "Determinism demanded"): op, gradient and fused jobs with
"deterministic": true on emu (honoured: they pass, bitwise repeats), on emu
with a random reduction order (answers false: every case fails
deterministic_not_honoured), on a backend-ABI-4 plugin (no configure: "not
offered", the same failure, saying so); without the field no "determinism"
appears. With --torch, the PyTorch harness answers configure true
(torch.use_deterministic_algorithms, then are_deterministic_algorithms_enabled).

usage: test_determinism.py NUMVAL_WORKER SOURCE_ROOT PLUGIN_ABI_V4 [--torch]
Prints TAP; job files live in a temp dir that is always removed."""
import json
import os
import subprocess
import sys
import tempfile

import nvschema
from nvtap import ok, finish, checks

SCHEMA = nvschema.validator()

WORKER, ROOT, PLUGIN_V4 = sys.argv[1], sys.argv[2], sys.argv[3]
TORCH = "--torch" in sys.argv[4:]

OP = {"kind": "op", "op": "exp", "dtypes": ["fp32"], "shapes": [[257]],
      "inputs": ["normal", "uniform"], "seed": 3, "repeat": 2,
      "tolerance": {"metric": "ulp", "max_ulp": 1, "reason_code": "approximation_error",
                    "reason": "emu's exp is documented to 1 ulp"}}
GRAD = {"kind": "gradient", "op": "tanh", "dtypes": ["fp32"], "shapes": [[64]],
        "inputs": ["normal"], "seed": 5}
FUSED = {"kind": "fused", "graph": {
    "inputs": [{"name": "x", "shape": [16, 32]}, {"name": "w", "shape": [32, 8]}],
    "nodes": [{"name": "mm", "op": "matmul", "inputs": ["x", "w"]},
              {"name": "y", "op": "gelu", "inputs": ["mm"]}], "outputs": ["y"]},
    "dtypes": ["fp32"], "inputs": ["normal"], "seed": 1}


def run(tmp, job, backend, timeout=300):
    path = os.path.join(tmp, "job-%d.json" % checks())
    with open(path, "w") as f:
        json.dump(job, f)
    p = subprocess.run([WORKER, "run", path, "--backend", backend],
                       capture_output=True, text=True, timeout=timeout)
    try:
        out = json.loads(p.stdout) if p.stdout.strip() else None
    except ValueError:
        out = None
    if out is not None:
        errs = nvschema.errors(SCHEMA, out)
        ok(not errs, "the %s result on %s is valid against the result schema" %
           (job.get("kind"), backend.split(" ")[0]), errs)
    return p.returncode, out, p.stderr + p.stdout[:1500]


def det(job, flag=True):
    return dict(job, deterministic=flag)


def all_not_honoured(res, words):
    cs = (res or {}).get("cases", [])
    return bool(cs) and all(c.get("verdict") == "failed" and
                            c.get("failure_class") == "deterministic_not_honoured" and
                            words in c.get("error", "") for c in cs)


def test_honoured(tmp):
    for name, job in (("op", OP), ("gradient", GRAD), ("fused", FUSED)):
        rc, res, err = run(tmp, det(job), "emu")
        ok(rc == 0 and res and res.get("verdict") == "passed" and
           res.get("determinism") == {"demanded": True, "answered": True},
           "%s job demanding determinism passes on emu, which answers true" % name, err)
    rc, res, err = run(tmp, det(OP), "emu")
    ok(rc == 0 and res and res.get("deterministic") is True and
       all(c.get("deterministic") is True for c in res.get("cases", [])),
       "the op job's repeats compare bit for bit and agree", err)


def test_refused(tmp):
    for name, job in (("op", OP), ("gradient", GRAD), ("fused", FUSED)):
        rc, res, err = run(tmp, det(job), "emu:reduce=random")
        ok(rc == 1 and res and res.get("verdict") == "failed" and
           res.get("determinism") == {"demanded": True, "answered": False} and
           all_not_honoured(res, "answers {\"deterministic\": false}"),
           "%s job: emu reduce=random answers false, every case fails "
           "deterministic_not_honoured" % name, err)
        s = (res or {}).get("summary", {})
        if "failed" in s:
            ok(s.get("failed") == len(res["cases"]) and s.get("passed") == 0,
               "%s job: the summary counts every case failed (%s)" % (name, s))
    # An op emu itself lists as non-deterministic keeps its more specific refusal.
    SUM = dict(OP, op="sum", shapes=[[8, 512]], repeat=1)
    del SUM["tolerance"]
    rc, res, err = run(tmp, det(SUM), "emu:reduce=random")
    cs = (res or {}).get("cases", [])
    ok(rc == 2 and res and res.get("verdict") == "error" and cs and
       all(c.get("failure_class") == "nondeterministic_op" for c in cs),
       "sum on reduce=random: its cases stay nondeterministic_op (exit 2)", err)
    # The same job without the demand runs as before: it passes, and carries no record.
    rc, res, err = run(tmp, OP, "emu:reduce=random")
    ok(rc == 0 and res and "determinism" not in res,
       "without \"deterministic\" nothing is configured or recorded", err)
    rc, res, err = run(tmp, det(OP, False), "emu:reduce=random")
    ok(rc == 0 and res and "determinism" not in res,
       "\"deterministic\": false demands nothing", err)


def test_not_offered(tmp):
    rc, res, err = run(tmp, det(OP), "plugin:" + PLUGIN_V4)
    ok(rc == 1 and res and res.get("determinism") == {"demanded": True, "answered": None} and
       all_not_honoured(res, "does not offer configure (backend ABI 4"),
       "an ABI-4 plugin is not offered configure: every case fails deterministic_not_honoured "
       "saying so", err)
    rc, res, err = run(tmp, OP, "plugin:" + PLUGIN_V4)
    ok(rc == 0 and res and res.get("verdict") == "passed" and "determinism" not in res,
       "the ABI-4 plugin still loads and passes the job that demands nothing", err)


def test_schema_can_fail(tmp):
    rc, res, err = run(tmp, det(GRAD), "emu:reduce=random")
    bad = json.loads(json.dumps(res or {}))
    bad["determinism"] = {"demanded": True, "answered": "yes"}
    ok(res and nvschema.errors(SCHEMA, bad), "the schema refuses a non-boolean answer")
    bad = json.loads(json.dumps(res or {}))
    for c in bad.get("cases", []):
        del c["error"]
    ok(res and nvschema.errors(SCHEMA, bad),
       "the schema refuses a not-honoured gradient case without its message")


def test_bad_spec(tmp):
    for name, job in (("op", OP), ("gradient", GRAD), ("fused", FUSED)):
        rc, res, err = run(tmp, det(job, "yes"), "emu")
        ok(rc != 0 and rc != 1 and "deterministic" in err,
           "%s job: a non-boolean \"deterministic\" is refused naming the field" % name, err)


def test_torch(tmp):
    harness = os.path.join(ROOT, "worker", "harness", "torch_harness.py")
    backend = "exec:/usr/bin/python3 %s --device cpu" % harness
    rc, res, err = run(tmp, det(OP), backend, timeout=600)
    ok(res and res.get("determinism") == {"demanded": True, "answered": True} and
       not any(c.get("failure_class") == "deterministic_not_honoured"
               for c in res.get("cases", [])),
       "the torch harness answers configure true (use_deterministic_algorithms)", err)
    rc, res, err = run(tmp, det(OP), backend + " --no-requests", timeout=600)
    ok(res and res.get("determinism") == {"demanded": True, "answered": None} and
       all_not_honoured(res, "does not offer configure"),
       "a harness whose hello lists no configure is not offered", err)


def main():
    with tempfile.TemporaryDirectory(prefix="nvdet-") as tmp:
        if TORCH:
            test_torch(tmp)
        else:
            test_honoured(tmp)
            test_refused(tmp)
            test_not_offered(tmp)
            test_schema_can_fail(tmp)
            test_bad_spec(tmp)
    finish()


if __name__ == "__main__":
    main()
