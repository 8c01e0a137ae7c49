"""A list of jobs run as one suite by `numval-worker run` in a temp
directory, and the cases of its result: the runner the gradient-kind
integration tests share (test_conv_grad.py, test_layout_grad.py,
test_model.py)."""
import json
import os
import subprocess


def run_suite(worker, tmp, name, jobs, backend, timeout, threads=None):
    """Run jobs as the suite `name` on backend (its file and output in tmp;
    --threads when threads is given); (exit code, result doc or None when
    there is none, stderr)."""
    path = os.path.join(tmp, "suite.json")
    out = os.path.join(tmp, "out.json")
    with open(path, "w") as f:
        json.dump({"name": name, "jobs": jobs}, f)
    if os.path.exists(out):
        os.unlink(out)
    cmd = [worker, "run", path, "--backend", backend]
    if threads is not None:
        cmd += ["--threads", str(threads)]
    p = subprocess.run(cmd + ["--output", out], capture_output=True, text=True, timeout=timeout)
    doc = None
    if os.path.exists(out):
        with open(out) as f:
            doc = json.load(f)
    return p.returncode, doc, p.stderr


def cases(doc):
    """(job result, case) for every case of every job of a suite result."""
    for job in (doc or {}).get("results", []):
        for c in job.get("cases", []):
            yield job, c
