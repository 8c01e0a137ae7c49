#!/usr/bin/env python3
"""Byte identity of result JSON between two numval-worker builds.

Runs every shipped op/gradient/fused suite and bench/identity_jobs.json (large
elementwise and reduction cases, every layout and index-dependent class) with
--threads 1 and --threads 2 on emu, and the extra jobs on emu fast with
artifacts, through BEFORE and AFTER; drops wall-clock fields; compares the
JSON byte for byte and the artifacts by sha256. Not a test (minutes of CPU):
a check for changes that must not move a result.

Usage: bench/result_identity.py BEFORE_WORKER AFTER_WORKER [WORKDIR] [--quick]
       bench/result_identity.py --save DIR WORKER [--quick]
       bench/result_identity.py --check DIR WORKER [--quick]
       bench/result_identity.py --save|--check DIR WORKER --suite FILE [--backend SPEC]
(--quick: the smoke suite only; --save writes one worker's stripped results to
DIR, --check compares another worker's against them, so that a series of
changes runs the baseline once; --suite: that job or suite file alone, on emu or
--backend SPEC, without artifacts)
"""
import hashlib, json, os, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMING = {"seconds", "timing_ms", "elapsed", "elapsed_ms", "duration", "duration_ms",
          "wall_s", "wall_ms", "started_at", "finished_at", "time_ms", "steps_per_s"}


def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if k not in TIMING}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return x


def run(worker, job, backend, threads, art=None):
    cmd = [worker, "run", job, "--backend", backend, "--threads", str(threads)]
    if art:
        os.makedirs(art, exist_ok=True)
        cmd += ["--artifacts", art]
    p = subprocess.run(cmd, capture_output=True, text=True)
    out = json.dumps(strip(json.loads(p.stdout)), indent=1) if p.stdout else ""
    arts = {}
    if art:
        for f in sorted(os.listdir(art)):
            arts[f] = hashlib.sha256(open(os.path.join(art, f), "rb").read()).hexdigest()
    return p.returncode, out, arts


def runs_of(quick, suite=None, backend="emu"):
    if suite:
        return [(os.path.abspath(suite), backend, False)]
    extra = os.path.join(ROOT, "bench", "identity_jobs.json")
    runs = [(os.path.join(ROOT, "suites", s + ".json"), "emu", False)
            for s in ("smoke", "gradient", "fused")]
    runs += [(extra, "emu", False), (extra, "emu:transcendental=fast", True)]
    return runs[:1] if quick else runs


def snapshot(mode, where, worker, quick, suite=None, backend="emu"):
    """--save: results into where; --check: against them."""
    bad = 0
    work = tempfile.mkdtemp(prefix="nv-identity-")
    for job, backend, with_art in runs_of(quick, suite, backend):
        for t in (1, 2):
            key = "%s-%s-t%d" % (os.path.basename(job), backend.replace(":", "_"), t)
            art = os.path.join(work, key) if with_art else None
            got = json.dumps(run(worker, job, backend, t, art))
            path = os.path.join(where, key + ".json")
            if mode == "--save":
                os.makedirs(where, exist_ok=True)
                open(path, "w").write(got)
                print("saved: %s" % key)
                continue
            same = os.path.exists(path) and open(path).read() == got
            bad += not same
            print("%s: %s" % ("same" if same else "DIFFERENT", key))
            if not same:
                open(os.path.join(where, key + ".got.json"), "w").write(got)
    if mode == "--check":
        print("%d difference(s)" % bad)
    return 1 if bad else 0


def main():
    quick = "--quick" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--quick"]
    opt = {}
    for k in ("--suite", "--backend"):
        if k in args:
            i = args.index(k)
            opt[k] = args[i + 1]
            del args[i:i + 2]
    if args and args[0] in ("--save", "--check"):
        return snapshot(args[0], args[1], args[2], quick, opt.get("--suite"),
                        opt.get("--backend", "emu"))
    before, after = args[0], args[1]
    work = args[2] if len(args) > 2 else tempfile.mkdtemp(prefix="nv-identity-")
    runs = runs_of(quick)
    bad = 0
    for job, backend, with_art in runs:
        name = os.path.basename(job)
        ref = None
        for who, worker in (("before", before), ("after", after)):
            for t in (1, 2):
                art = os.path.join(work, "%s-%s-t%d" % (who, name, t)) if with_art else None
                got = run(worker, job, backend, t, art)
                if ref is None:
                    ref = got
                    continue
                same = got == ref
                bad += not same
                print("%s: %s on %s, %s --threads %d%s" % (
                    "same" if same else "DIFFERENT", name, backend, who, t,
                    " (%d artifacts)" % len(got[2]) if with_art else ""))
    print("%d difference(s)" % bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
