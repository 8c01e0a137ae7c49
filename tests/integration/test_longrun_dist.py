#!/usr/bin/env python3
"""Distributed gradient reduction and the per-job deterministic flag of
device-driven training (docs/JOBS.md "Distributed gradient reduction",
"Device-driven training") through the real worker.

usage: test_longrun_dist.py WORKER SOURCE_ROOT emu|torch   (exit 77: torch absent)

Job: the MLP 8 -> 16 -> 4 of test_longrun_driven.py (batch 16, 12 AdamW steps,
bf16 autocast, dropout, clipping, a scaler that overflows and backs off,
checkpoint after 6 steps) with the batch split across R ranks whose gradients
the device all-reduces. Shown:
- emu: R = 4, ring and tree in fp32, pass with every reduced element within
  the declared bound; emu's allreduce=bf16 (partial sums in bf16 where fp32 is
  declared) fails "allreduce_bound" naming gamma_{R-1} (ring) or
  gamma_{ceil log2 R} (tree) and Higham; the same bf16 reduction declared as
  bf16 passes (the bound follows the declaration); R that does not divide the
  batch is refused naming the field; a ring whose order follows the ranks'
  arrival (allreduce=arrival) stays within the bound and fails the
  deterministic repeat ("nondeterministic");
- the deterministic flag reaches the device: a device that answers it did not
  honour a demanded determinism fails "deterministic_not_honoured"; not
  demanded, the same device passes;
- a non-deterministic job's checkpoint is judged (seed band, the resumed run's
  own step checks): emu passes; a checkpoint without the weights fails
  "checkpoint_state", without the scaler "checkpoint_scaler";
- torch: R = 2 and R = 4 gloo processes on 127.0.0.1 pass, and no rank
  process outlives the run (found by an environment tag every process the
  worker starts inherits).
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid

JOB = {"kind": "longrun", "model": "mlp", "sizes": {"in": 8, "hidden": 16, "classes": 4},
       "data": {"eval_examples": 128}, "steps": 12, "batch": 16, "n_seeds": 3,
       "log_every": 4, "amp": {"dtype": "bf16"}, "loss_weight": 64,
       "grad_scaler": {"init_scale": 1.3e36, "growth_interval": 2},
       "device_training": {"clip_grad_norm": 1.0, "dropout": 0.1, "checkpoint_at": 6}}

n_fail = 0
TAG = "numval-dist-test-" + uuid.uuid4().hex


def check(cond, what):
    global n_fail
    print(("ok - " if cond else "not ok - ") + what, flush=True)
    n_fail += 0 if cond else 1


def job(ranks=None, deterministic=True, **dist):
    j = json.loads(json.dumps(JOB))
    j["deterministic"] = deterministic
    if ranks:
        j["device_training"]["distributed"] = dict(dist, ranks=ranks)
    return j


def run(worker, spec, backend, tmp):
    path = os.path.join(tmp, "job.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    # gloo's ranks start inside a train request: give the reply time to
    # import torch in R processes on a loaded machine
    env = dict(os.environ, NUMVAL_EXEC_TIMEOUT="600", NUMVAL_DIST_TEST_TAG=TAG)
    p = subprocess.run([worker, "run", path, "--backend", backend, "--threads", "2"],
                       capture_output=True, text=True, timeout=1500, env=env)
    res = json.loads(p.stdout) if p.stdout.strip() else None
    acc = res["acceptance"] if res else {}
    return p.returncode, acc, p.stderr


def tagged_processes():
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                if TAG.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def emu_checks(worker, tmp):
    for alg, k in (("ring", 3), ("tree", 2)):
        rc, acc, err = run(worker, job(4, algorithm=alg), "emu", tmp)
        ar = (acc.get("device_steps") or {}).get("allreduce") or {}
        check(rc == 0 and ar.get("elements", 0) > 0 and ar.get("worst_error_to_bound", 9) <= 1
              and ar.get("gamma_k") == k,
              "emu: 4 ranks, %s in fp32, pass: %d reduced elements, worst error %.3g of "
              "gamma_%d sum|g_r|: %s" % (alg, ar.get("elements", 0),
                                          ar.get("worst_error_to_bound", -1), k,
                                          acc.get("reason", err)[:200]))
        rc, acc, err = run(worker, job(4, algorithm=alg), "emu:allreduce=bf16", tmp)
        why = acc.get("reason", err)
        check(rc == 1 and acc.get("failure_class") == "allreduce_bound" and
              ("gamma_%d" % k) in why and "Higham" in why,
              "emu: allreduce=bf16 where fp32 is declared (%s) fails naming the bound: %s"
              % (alg, why[:400]))
    rc, acc, err = run(worker, job(4, dtype="bf16"), "emu:allreduce=bf16", tmp)
    ar = (acc.get("device_steps") or {}).get("allreduce") or {}
    check(rc == 0 and ar.get("gamma_k") == 4,
          "emu: the bf16 reduction declared bf16 passes, within gamma_4(2^-8) sum|g_r| "
          "(worst %.3g of it): %s" % (ar.get("worst_error_to_bound", -1),
                                      acc.get("reason", err)[:200]))
    # rank-order dependence: the ring's order set by arrival changes the bits
    # run to run; each sum stays within the bound, only the repeat sees it
    arrival = job(4)
    del arrival["device_training"]["checkpoint_at"]
    rc, acc, err = run(worker, arrival, "emu:allreduce=arrival", tmp)
    ar = (acc.get("device_steps") or {}).get("allreduce") or {}
    check(rc == 1 and acc.get("failure_class") == "nondeterministic" and
          ar.get("worst_error_to_bound", 9) <= 1,
          "emu: allreduce=arrival within the bound (worst %.3g) but not bit-identical on "
          "repeat: %s" % (ar.get("worst_error_to_bound", -1), acc.get("reason", err)[:200]))
    rc, acc, err = run(worker, job(3), "emu", tmp)
    check(rc == 2 and "/device_training/distributed/ranks" in err,
          "3 ranks for a batch of 16 refused naming the field: %s" % err.strip()[:200])

    rc, acc, err = run(worker, job(), "emu:train_fault=ignore_deterministic", tmp)
    check(rc == 1 and acc.get("failure_class") == "deterministic_not_honoured",
          "a device that does not honour a demanded determinism fails: %s"
          % acc.get("reason", err)[:300])
    rc, acc, err = run(worker, job(deterministic=False), "emu:train_fault=ignore_deterministic",
                       tmp)
    det = (acc.get("device_steps") or {}).get("deterministic") or {}
    check(rc == 0 and det == {"demanded": False, "ran_deterministic": True},
          "not demanded, the flag reaches the device as false and the job passes: %s" % det)

    rc, acc, err = run(worker, job(deterministic=False), "emu", tmp)
    ck = (acc.get("device_steps") or {}).get("checkpoint") or {}
    check(rc == 0 and ck.get("judged") is True and ck.get("judged_by") == "seed_band" and
          ck.get("passed") is True and abs(ck.get("final_loss_gap", 9)) <= ck.get("band", 0),
          "non-deterministic checkpoint judged in the seed band and passes: gap %s, band %s"
          % (ck.get("final_loss_gap"), ck.get("band")))
    for knob, cls in (("weights", "checkpoint_state"), ("scaler", "checkpoint_scaler")):
        rc, acc, err = run(worker, job(deterministic=False), "emu:ckpt_drop=" + knob, tmp)
        check(rc == 1 and acc.get("failure_class") == cls,
              "non-deterministic checkpoint without the %s caught as %s: %s"
              % (knob, cls, acc.get("reason", err)[:300]))


def torch_checks(worker, root, tmp):
    harness = os.path.join(root, "worker", "harness", "torch_harness.py")
    base = "exec:/usr/bin/python3 %s --device cpu" % harness
    for ranks in (2, 4):
        rc, acc, err = run(worker, job(ranks), base, tmp)
        ds = acc.get("device_steps") or {}
        ar = ds.get("allreduce") or {}
        check(rc == 0 and ar.get("elements", 0) > 0 and ar.get("worst_error_to_bound", 9) <= 1
              and ds.get("checkpoint", {}).get("bit_identical") is True and
              ds.get("deterministic", {}).get("ran_deterministic") is True,
              "torch: %d gloo processes on loopback pass: %d reduced elements, %d exactly "
              "rounded, worst error %.3g of gamma_%d sum|g_r|: %s"
              % (ranks, ar.get("elements", 0), ar.get("exactly_rounded", 0),
                 ar.get("worst_error_to_bound", -1), ranks - 1,
                 acc.get("reason", err[-600:])[:300]))
        left = tagged_processes()
        for _ in range(60):  # harnesses exit on EOF, their ranks on "quit"
            if not left:
                break
            time.sleep(1)
            left = tagged_processes()
        check(not left, "torch: no harness or rank process left after the run: %s" % left)
        for pid in left:  # ours (the tag): do not leak them into the next test
            try:
                os.kill(pid, 9)
            except OSError:
                pass


def main():
    worker, root, which = sys.argv[1], sys.argv[2], sys.argv[3]
    if which == "torch":
        ok = subprocess.run(["/usr/bin/python3", "-c", "import torch.distributed as d; "
                             "assert d.is_available() and d.is_gloo_available()"],
                            capture_output=True).returncode == 0
        if not ok:
            print("1..0 # SKIP /usr/bin/python3 has no torch with gloo")
            return 77
    with tempfile.TemporaryDirectory(prefix="numval-dist-") as tmp:
        if which == "torch":
            torch_checks(worker, root, tmp)
        else:
            emu_checks(worker, tmp)
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main())
