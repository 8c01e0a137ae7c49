#!/usr/bin/env python3
"""False-failure sweep: a correct device against every shipped suite.

Runs every job of the shipped suites (suites/*.json) on numval-worker, widened:
each op, fused and gradient job once per dtype (its own plus fp64 where the op
takes it) and per input class (every class of schema/result.schema.json that the
job's kind accepts), for SEEDS seeds (the job's seed + 1000 k) and each backend
MODE, and counts the cases that do not pass. On a correct device every one of
them is a false failure of the shipped default tolerances (docs/TOLERANCES.md
"False failures, measured"). Candidates the job-spec validator refuses (a dtype
the op does not take, a class the kind refuses) are counted apart, not run.

    bench/truth_sweep.py build/worker/numval-worker              # 20 seeds, all modes
    bench/truth_sweep.py WORKER --seeds 2 --suites smoke         # a sample
    bench/truth_sweep.py WORKER --modes plugin:/x.so --expect fail --ops sum,matmul
        --classes normal                                        # a faulty device

With --expect fail the question is the reverse: every case must fail (a fault
plugin caught on every seed). Exit status 0 when the expectation holds, 1 when
it does not, 2 on an infrastructure error. --json FILE writes the counts, the
failures and the largest headrooms (default and worst case) per op and dtype.
Uses the Python standard library only.
"""
import argparse
import concurrent.futures
import copy
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# emu's correct modes (docs/BACKEND_ABI.md): every reduction order. fma=off is not
# one: its fma op multiplies and adds in two roundings, which the fma default
# rightly fails.
CORRECT_MODES = ["emu:", "emu:reduce=pairwise", "emu:reduce=tree:32", "emu:reduce=splitk:8",
                 "emu:reduce=random"]
SPLIT_KINDS = ("op", "fused", "gradient")


def input_classes():
    with open(os.path.join(ROOT, "schema", "result.schema.json")) as f:
        return json.load(f)["$defs"]["input_class"]["enum"]


def load_suites(names):
    out = []
    for n in names:
        with open(os.path.join(ROOT, "suites", n + ".json")) as f:
            d = json.load(f)
        if d.get("jobs"):
            out.append((n, d["jobs"]))
    return out


def candidates(job, classes, fp64, ops):
    """The widened jobs of one shipped job: one per dtype and input class."""
    if job.get("kind", "op") not in SPLIT_KINDS:
        return [job]
    if ops and job.get("op") not in ops and job.get("name") not in ops:
        return []
    dtypes = list(job.get("dtypes", []))
    if fp64 and "fp64" not in dtypes:
        dtypes.append("fp64")
    out = []
    for dt in dtypes:
        for cls in classes:
            j = copy.deepcopy(job)
            j["dtypes"] = [dt]
            j["inputs"] = [cls]
            out.append(j)
    return out


def valid(worker, job):
    """Whether the job-spec validator accepts job: the worker validates before it
    loads the backend, so a backend that cannot open tells the two apart."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(job, f)
        path = f.name
    try:
        p = subprocess.run([worker, "run", path, "--backend", "emu:truth_sweep_validate=1"],
                           capture_output=True, text=True, timeout=60)
        return "failed to open" in p.stderr, p.stderr.strip()
    finally:
        os.unlink(path)


def reseed(job, k):
    j = copy.deepcopy(job)
    j["seed"] = int(job.get("seed", 0)) + 1000 * k
    return j


def _run(worker, jobs, mode, timeout):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"name": "truth-sweep", "jobs": jobs}, f)
        path = f.name
    try:
        return subprocess.run([worker, "run", path, "--backend", mode, "--threads", "1"],
                              capture_output=True, text=True, timeout=timeout)
    finally:
        os.unlink(path)


def run_suite(worker, jobs, mode, timeout):
    """The suite's result; a job the worker refuses for this mode as a whole (e.g.
    "deterministic": true on a mode that declares the op non-deterministic) is
    run alone and listed under "refused" with the worker's message."""
    p = _run(worker, jobs, mode, timeout)
    if p.returncode in (0, 1, 2) and p.stdout.strip():
        return json.loads(p.stdout)
    if p.returncode != 2:
        raise RuntimeError("numval-worker exited %d: %s" % (p.returncode, p.stderr.strip()[-400:]))
    res = {"results": [], "refused": []}
    for job in jobs:
        q = _run(worker, [job], mode, timeout)
        if q.stdout.strip():
            res["results"] += json.loads(q.stdout).get("results", [])
        elif q.returncode == 2:
            res["refused"].append({"job": job.get("name") or job.get("op"),
                                   "error": q.stderr.strip()[-300:]})
        else:
            raise RuntimeError("numval-worker exited %d: %s" % (q.returncode,
                                                                q.stderr.strip()[-400:]))
    return res


def case_rows(res):
    """(kind, op, dtype, input, shape, verdict, class, headroom, worst, case) per case."""
    for j in res.get("results", []):
        kind = j.get("kind")
        for c in j.get("cases", []):
            yield {"kind": kind, "op": c.get("op") or j.get("op") or j.get("name"),
                   "job": j.get("name") or j.get("op"), "dtype": c.get("dtype"),
                   "input": c.get("input"), "shape": c.get("shape"), "layout": c.get("layout"),
                   "seed": c.get("seed", j.get("seed")), "verdict": c.get("verdict"),
                   "failure_class": c.get("failure_class"), "headroom": c.get("headroom"),
                   "headroom_worst_case": c.get("headroom_worst_case"),
                   "intermediate_overflow": (c.get("intermediate_overflow") or {}).get("outputs", 0),
                   "error": c.get("error")}
        if not j.get("cases") and j.get("verdict") != "passed":
            yield {"kind": kind, "op": j.get("op") or j.get("name"), "job": j.get("name"),
                   "verdict": j.get("verdict"), "failure_class": "job", "error": j.get("error")}


def num(v):
    return v if isinstance(v, (int, float)) else (float("inf") if v == "inf" else 0.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("worker", nargs="?", default=os.path.join(ROOT, "build", "worker",
                                                              "numval-worker"))
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=0,
                    help="seed index k to start at (a sweep continued over sessions)")
    ap.add_argument("--modes", default=",".join(CORRECT_MODES),
                    help="backend specs separated by ';' or ',' between emu modes")
    ap.add_argument("--suites", default="smoke,fused,gradient,nightly")
    ap.add_argument("--classes", default="", help="input classes (default: all)")
    ap.add_argument("--ops", default="", help="only these ops / fused job names")
    ap.add_argument("--no-fp64", action="store_true")
    ap.add_argument("--expect", choices=["pass", "fail"], default="pass")
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=3600)
    ap.add_argument("--json", default="")
    a = ap.parse_args()

    modes = [m for m in (a.modes.split(";") if ";" in a.modes else
                         _split_modes(a.modes)) if m]
    classes = [c for c in a.classes.split(",") if c] or input_classes()
    ops = set(o for o in a.ops.split(",") if o)
    runs, refused = [], 0
    for name, jobs in load_suites([s for s in a.suites.split(",") if s]):
        ok = []
        for job in jobs:
            for cand in candidates(job, classes, not a.no_fp64, ops):
                good, why = valid(a.worker, cand)
                if good:
                    ok.append(cand)
                else:
                    refused += 1
        if ok:
            runs.append((name, ok))
    tasks = [(name, mode, k, [reseed(j, k) for j in jobs])
             for name, jobs in runs for mode in modes
             for k in range(a.first_seed, a.first_seed + a.seeds)]
    counts, failures, heads, refused_by_mode = {}, [], {}, []
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.parallel) as ex:
        futs = {ex.submit(run_suite, a.worker, jobs, mode, a.timeout): (name, mode, k)
                for name, mode, k, jobs in tasks}
        for done, fut in enumerate(concurrent.futures.as_completed(futs), 1):
            name, mode, k = futs[fut]
            res = fut.result()
            print("[%d/%d] %s %s seed %d" % (done, len(futs), name, mode, k), file=sys.stderr,
                  flush=True)
            for ref in res.get("refused", []):
                refused_by_mode.append(dict(ref, mode=mode, suite=name, seed_index=k))
            for row in case_rows(res):
                key = (mode, name)
                cnt = counts.setdefault(key, {"cases": 0, "passed": 0, "failed": 0, "errors": 0,
                                              "intermediate_overflow_cases": 0})
                cnt["cases"] += 1
                v = row["verdict"]
                cnt["passed" if v == "passed" else "failed" if v == "failed" else "errors"] += 1
                if row.get("intermediate_overflow"):
                    cnt["intermediate_overflow_cases"] += 1
                bad = (v != "passed") if a.expect == "pass" else (v != "failed")
                if bad:
                    failures.append(dict(row, mode=mode, suite=name, seed_index=k))
                if row.get("headroom_worst_case") is not None:
                    h = heads.setdefault((row["op"], row["dtype"]), [0.0, 0.0, 0])
                    h[0] = max(h[0], num(row["headroom"]))
                    h[1] = max(h[1], num(row["headroom_worst_case"]))
                    h[2] += 1
    total = {"cases": 0, "passed": 0, "failed": 0, "errors": 0}
    print("%-24s %-9s %8s %8s %7s %7s %9s" % ("mode", "suite", "cases", "passed", "failed",
                                             "errors", "int.ovfl"))
    for (mode, name), c in sorted(counts.items()):
        print("%-24s %-9s %8d %8d %7d %7d %9d" % (mode, name, c["cases"], c["passed"],
                                                 c["failed"], c["errors"],
                                                 c["intermediate_overflow_cases"]))
        for key in total:
            total[key] += c[key]
    print("total: %d cases, %d passed, %d failed, %d errors; %d candidates refused by the "
          "validator; seeds %d, modes %d" % (total["cases"], total["passed"], total["failed"],
                                             total["errors"], refused, a.seeds, len(modes)))
    if refused_by_mode:
        print("%d jobs refused by the worker for a mode (not run): %s" % (
            len(refused_by_mode), "; ".join(sorted({"%s on %s" % (r["job"], r["mode"])
                                                    for r in refused_by_mode}))))
    if heads:
        print("largest headroom per op and dtype (probabilistic default / worst case):")
        for (op, dt), (h, w, n) in sorted(heads.items()):
            print("  %-12s %-6s %8.3g %10.3g  (%d cases)" % (op, dt, h, w, n))
    for f in failures[:40]:
        print("%s: %s %s %s %s %s seed %s: %s %s %s" % (
            "NOT FAILED" if a.expect == "fail" else "FAILED", f["mode"], f["suite"], f["op"],
            f.get("dtype"), f.get("input"), f.get("seed"), f.get("verdict"),
            f.get("failure_class") or "", (f.get("error") or "")[:160]))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"expect": a.expect, "seeds": a.seeds, "modes": modes, "classes": classes,
                       "refused": refused, "refused_by_mode": refused_by_mode,
                       "total": total,
                       "counts": {"%s %s" % k: v for k, v in counts.items()},
                       "headroom": {"%s %s" % k: {"default": v[0], "worst_case": v[1],
                                                  "cases": v[2]} for k, v in heads.items()},
                       "failures": failures}, fh, indent=1)
    return 0 if not failures else 1


def _split_modes(text):
    """'emu:,emu:reduce=pairwise,plugin:/x.so' -> specs; a comma inside one emu
    spec (emu:a=1,b=2) continues it when the next piece has no ':' prefix."""
    out = []
    for piece in text.split(","):
        if out and "=" in piece and ":" not in piece.split("=")[0]:
            out[-1] += "," + piece
        else:
            out.append(piece)
    return out


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, subprocess.TimeoutExpired, OSError) as e:
        print("truth_sweep: %s" % e, file=sys.stderr)
        sys.exit(2)
