#!/usr/bin/env python3
"""Long-run qualification with real processes.

Sizes (chosen to fit < 3 min on 2 cores): MLP 16 -> 32 (gelu) -> 4 classes,
batch 32, 120 AdamW steps (cosine, warmup 10), eval every 10 steps on 512
fixed examples, labels from a fixed random teacher network (Bayes loss known);
8 seeds per side. Shown:
- emu bf16 with fp32 master weights under the shipped AMP policy passes over 8
  seeds, bit-identical on repeat (deterministic mode), curves and a zstd series;
- fp16 without gradient scaling fails with "gradient_underflow": the job's
  loss_weight 2^-20 makes gradients small (AdamW's update is invariant to the
  weight, so the fp64 reference trains as without it; eps 1e-16 keeps that
  exact), and fp16's smallest subnormal (2^-24) flushes them; the same job with
  the gradient scaler (init scale 2^16) passes;
- no false failure: 10 qualifications with 10 disjoint seed sets (60 steps each)
  all pass;
- the transformer block trains through the device's backward and passes;
- an inference-only backend is refused with a clear error;
- numvald: AMP policies versioned with author and reason; a longrun job names a
  version and gets it inline; a cron schedule fires its suite once per slot and
  `numvalctl schedules` lists last and next run; a restart does not rerun the slot.
"""
import base64
import json
import os
import subprocess
import sys
import tempfile
import time

from nvservice import SLOW, Service, check, main

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

MLP = {"kind": "longrun", "model": "mlp", "sizes": {"in": 16, "hidden": 32, "classes": 4},
       "steps": 120, "batch": 32, "n_seeds": 8, "seed": 1, "log_every": 10,
       "optimizer": {"name": "adamw", "lr": 0.01},
       "schedule": {"name": "cosine", "warmup": 10}, "amp": {"dtype": "bf16"}}


def run(worker, spec, backend, tmp, name):
    path = os.path.join(tmp, name + ".json")
    with open(path, "w") as f:
        json.dump(spec, f)
    p = subprocess.run([worker, "run", path, "--backend", backend, "--threads", "2"],
                       capture_output=True, text=True, timeout=300)
    res = json.loads(p.stdout) if p.stdout.strip() else None
    return p.returncode, res, p.stderr


def worker_checks(worker, tmp):
    rc, r, err = run(worker, MLP, "emu", tmp, "bf16")
    acc = r["acceptance"] if r else {}
    check(rc == 0 and r["verdict"] == "passed", "bf16 AMP, fp32 masters, 8 seeds passes: %s"
          % acc.get("reason", err))
    check(len(acc["seeds"]) == 8 and acc["final_loss"]["welch"]["alpha"] == 0.01
          and "Welch" in acc["final_loss"]["welch"]["rule"], "verdict names rule, alpha, seeds")
    check(acc["determinism"]["bit_identical"] is True, "deterministic mode: bit-identical repeat")
    # At matched weights emu's bf16 AMP is the declared precision itself: every op
    # rounded once to the policy's dtype, as the declared-precision reference does
    # (measured ratio 1.00 in every layer; 1.5 leaves room for order effects).
    mw = acc["matched_weights"]
    check(mw["checked_steps"] == 8 * 12 and all(
        L["passed"] and L["device_error"] <= 1.5 * L["declared_error"] for L in mw["gradient"])
        and {L["layer"] for L in mw["gradient"]} == {"fc1", "fc2"} and mw["eval_loss"]["passed"],
        "matched weights: gradient per layer and eval loss at the declared precision: %s"
        % [(L["layer"], L["device_error"], L["declared_error"]) for L in mw["gradient"]])
    # Every op output held in fp8 e5m2 (2 significand bits) where the policy
    # declares bf16 (8): the loss curve cannot see it (SGD/AdamW average the noise
    # away), the gradient at matched weights does, from the first logged step.
    rc8, r8, err8 = run(worker, dict(MLP, deterministic=False), "emu:storage=fp8_e5m2", tmp, "fp8")
    a8 = r8["acceptance"] if r8 else {}
    g8 = {L["layer"]: L for L in a8.get("matched_weights", {}).get("gradient", [])}
    check(rc8 == 1 and a8.get("failure_class") == "gradient_error"
          and "layer 'fc1'" in a8["reason"] and "first beyond it at step 0" in a8["reason"]
          and all(not L["passed"] and L["first_beyond"]["step"] == 0 for L in g8.values())
          and not a8["matched_weights"]["eval_loss"]["passed"],
          "fp8 e5m2 storage fails at matched weights naming the layer and step: %s"
          % a8.get("reason", err8))
    d0 = acc["final_loss"]["drift"]
    ref = acc["final_loss"]["reference_final"]
    check(min(ref) > r["data"]["bayes_loss"] - 0.05,
          "reference final losses %.3f..%.3f lie above the Bayes loss %.3f (minus sampling "
          "error of 512 eval labels)" % (min(ref), max(ref), r["data"]["bayes_loss"]))
    curves = r["curves"]
    c0 = curves["device"][0]["points"]
    check(len(curves["reference"]) == 8 and c0[0][0] == 0 and c0[-1][0] == 120
          and c0[-1][1] < c0[0][1] - 0.2, "curves per seed, loss falls %.3f -> %.3f"
          % (c0[0][1], c0[-1][1]))
    with open(os.path.join(ROOT, "suites", "amp_policy_default.json")) as f:
        shipped = json.load(f)
    pol = r["amp"]["policy"]
    check(all(sorted(pol[k]) == sorted(shipped[k]) for k in ("low_precision", "fp32", "promote")),
          "the worker's default AMP policy equals suites/amp_policy_default.json")
    ser = r["series"]
    blob = base64.b64decode(ser["data"])
    check(blob[:4] == b"\x28\xb5\x2f\xfd" and len(blob) == ser["compressed_bytes"] < ser["raw_bytes"],
          "series is a zstd frame (%d -> %d bytes)" % (ser["raw_bytes"], len(blob)))
    raw = subprocess.run(["zstd", "-dc"], input=blob, capture_output=True, timeout=30).stdout
    lines = [json.loads(l) for l in raw.decode().splitlines()]
    check(len(lines) == 2 * 8 * 13 and {"grad_norm", "layer_grad_norms", "scale", "nonfinite",
                                          "skipped"} <= set(lines[0]),
          "series: one line per run and logged step with norms, scale, non-finite, skipped")

    fp16 = dict(MLP, loss_weight=2.0 ** -20, amp={"dtype": "fp16"},
                optimizer={"name": "adamw", "lr": 0.01, "eps": 1e-16})
    rc, r, err = run(worker, fp16, "emu", tmp, "fp16")
    acc = r["acceptance"] if r else {}
    check(rc == 1 and acc.get("failure_class") == "gradient_underflow",
          "fp16 without gradient scaling fails: %s" % acc.get("reason", err))
    fp16s = dict(fp16, grad_scaler={"init_scale": 65536, "growth_interval": 50})
    rc, r, err = run(worker, fp16s, "emu", tmp, "fp16s")
    check(rc == 0 and r["verdict"] == "passed" and r["grad_scaler"]["enabled"],
          "fp16 with dynamic gradient scaling passes: %s" %
          (r["acceptance"]["reason"] if r else err))

    small = dict(MLP, steps=60, deterministic=False)
    passes = 0
    for q in range(10):
        rc, r, err = run(worker, dict(small, seed=1000 + 8 * q), "emu", tmp, "q%d" % q)
        passes += rc == 0 and r["verdict"] == "passed"
    check(passes == 10, "no false failure: %d of 10 qualifications with disjoint seed sets pass"
          % passes)

    tr = {"kind": "longrun", "model": "transformer",
          "sizes": {"in": 8, "hidden": 16, "classes": 4, "seq": 4}, "steps": 60, "batch": 16,
          "n_seeds": 3, "seed": 1, "log_every": 10, "data": {"eval_examples": 128},
          "optimizer": {"name": "adamw", "lr": 0.01}, "amp": {"dtype": "bf16"}}
    rc, r, err = run(worker, tr, "emu", tmp, "tr")
    pts = r["curves"]["device"][0]["points"] if r else [[0, 0], [0, 0]]
    check(rc == 0 and r["verdict"] == "passed" and pts[-1][1] < pts[0][1],
          "transformer block (attention, layer_norm, gelu MLP) passes; loss %.3f -> %.3f"
          % (pts[0][1], pts[-1][1]))

    # Drift (paired by seed, reported, not judged). The correct mode's device runs
    # track their reference seeds: measured |mean gap| 4e-4 of the band; 5% leaves
    # room for other compilers' libm while still far below any real effect.
    check(d0["of"] == 8 and d0["fraction_of_band"] < 0.05,
          "correct bf16 AMP: paired drift %.2g is %.2g of the band" % (d0["mean_gap"],
                                                                        d0["fraction_of_band"]))
    # bf16 master weights: every update is accumulated into a bf16 weight, so an
    # update below half an ulp of the weight is lost (IEEE 754 round to nearest);
    # training ends systematically worse on the same seeds, though still inside
    # the seed band at this size (measured: 7 of 8 seeds worse by 0.0024).
    with open(os.path.join(ROOT, "suites", "amp_policy_default.json")) as f:
        pol = json.load(f)
    rc, r, err = run(worker, dict(MLP, deterministic=False, amp={
        "dtype": "bf16", "policy": dict(pol, master_weights="bf16")}), "emu", tmp, "bf16w")
    d1 = r["acceptance"]["final_loss"]["drift"] if r else {}
    check(r and r["amp"]["master_weights"] == "bf16" and d1["device_worse"] >= 6
          and d1["mean_gap"] > 10 * abs(d0["mean_gap"]),
          "bf16 master weights drift: device worse on %s of 8 seeds, mean gap %s (fp32 masters "
          "%.2g); %s" % (d1.get("device_worse"), d1.get("mean_gap"), d0["mean_gap"],
                         r["acceptance"]["reason"] if r else err))
    rc, r, err = run(worker, dict(MLP, amp={"dtype": "bf16", "policy": dict(
        pol, master_weights="int8")}), "emu", tmp, "badmw")
    check(rc == 2 and "/amp/policy/master_weights" in err and "'int8'" in err,
          "master_weights 'int8' refused naming it: %s" % err.strip())

    rc, r, err = run(worker, dict(MLP, steps=5), "emu:inference_only=on", tmp, "inf")
    check(rc == 2 and "inference-only" in err, "inference-only backend refused: %s" % err.strip())
    rc, r, err = run(worker, dict(MLP, amp={"dtype": "bf16", "policy": {"fp32": ["nope"]}}),
                     "emu", tmp, "badpol")
    check(rc == 2 and "'nope'" in err, "bad AMP policy refused naming the op: %s" % err.strip())


SUITE = {"name": "nightly-it", "jobs": [dict(MLP, steps=5, n_seeds=3)]}


def daemon_checks(bins):
    tmp = tempfile.mkdtemp(prefix="longrun-suite-")
    try:
        daemon_suite_checks(bins, tmp)
    finally:
        subprocess.run(["rm", "-rf", tmp])


def daemon_suite_checks(bins, tmp):
    suite = os.path.join(tmp, "suite.json")
    with open(suite, "w") as f:
        json.dump(SUITE, f)
    conf = "\n[schedule it]\ncron = * * * * *\nsuite = %s\ndevice = nodev\n" % suite
    with Service(bins, devices={"emu0": "emu"}, extra_conf=conf) as s:
        s.start_daemon()
        pol = {"low_precision": ["matmul"], "fp32": ["softmax", "cross_entropy"],
               "promote": ["add"]}
        st, body = s.api("POST", "/api/v1/amp-policies", {"name": "default", "policy": pol})
        check(st == 400 and body["error"]["field"] == "/reason", "policy change without reason: 400")
        st, body = s.api("POST", "/api/v1/amp-policies", {"name": "default", "policy": pol,
                                                          "reason": "first"})
        check(st == 201 and body["amp_policy"]["version"] == 1, "policy version 1")
        pol2 = dict(pol, low_precision=["matmul", "bmm"])
        st, body = s.api("POST", "/api/v1/amp-policies", {"name": "default", "policy": pol2,
                                                          "reason": "bmm too"})
        check(st == 201 and body["amp_policy"]["version"] == 2
              and body["amp_policy"]["author"] == "it-admin", "version 2 with author")
        st, body = s.api("GET", "/api/v1/amp-policies?name=default", scope="read")
        check([p["version"] for p in body["amp_policies"]] == [2, 1]
              and body["amp_policies"][1]["reason"] == "first", "history keeps both versions")
        job = dict(MLP, steps=5, n_seeds=3, device="nodev",
                   amp={"dtype": "bf16", "policy_version": 1})
        st, body = s.api("POST", "/api/v1/jobs", job, scope="submit")
        spec = body["job"]["spec"] if st == 201 else {}
        if isinstance(spec, str):
            spec = json.loads(spec)
        check(st == 201 and spec["amp"]["policy"] == pol and spec["amp"]["policy_version"] == 1,
              "a longrun job names policy version 1 and gets it inline")
        run = dict(job, device="emu0")
        st, body = s.api("POST", "/api/v1/jobs", run, scope="submit")
        jid = body["job"]["id"]
        deadline = time.time() + 120 * SLOW
        while time.time() < deadline and s.job(jid)["state"] in ("queued", "leased", "running"):
            time.sleep(0.5)
        done = s.job(jid)
        res = done.get("result") or {}
        check(done["state"] == "passed" and res.get("amp", {}).get("policy_version") == 1
              and res["amp"]["policy"] == pol,
              "the supervised emu worker ran it under policy version 1: %s" % done["state"])
        st, lst = s.api("GET", "/api/v1/jobs?kind=longrun&limit=50", scope="read")
        lr = [j for j in lst.get("jobs", []) if j["id"] == jid]
        check(st == 200 and len(lr) == 1 and "series" in res and "curves" in res
              and "series" not in lr[0]["result"] and "curves" not in lr[0]["result"]
              and lr[0]["result"]["acceptance"]["verdict"] == "passed",
              "job lists leave out the per-step record and curves; the job keeps them")
        st, body = s.api("POST", "/api/v1/jobs", dict(job, amp={"dtype": "bf16",
                                                                 "policy_version": 9}),
                         scope="submit")
        check(st == 400, "unknown policy version refused")

        deadline = time.time() + 100 * SLOW
        last = None
        while time.time() < deadline:
            st, body = s.api("GET", "/api/v1/schedules", scope="read")
            last = body["schedules"][0]["last_run"]
            if last:
                break
            time.sleep(1)
        check(last and len(last["job_ids"]) == 1, "the cron slot fired its suite: %s" % last)
        p = subprocess.run([bins["ctl"], "--server", s.url, "schedules"], capture_output=True,
                           text=True, timeout=30)
        check(p.returncode == 0 and "it" in p.stdout and "NEXT_RUN" in p.stdout
              and "* * * * *" in p.stdout, "numvalctl schedules lists it:\n" + p.stdout)
        s.kill_daemon()
        s.start_daemon()
        st, body = s.api("GET", "/api/v1/schedules", scope="read")
        again = body["schedules"][0]["last_run"]
        st, jobs = s.api("GET", "/api/v1/jobs?device=nodev&limit=100", scope="read")
        n_sched = len(jobs["jobs"]) - 1  # one nodev job was submitted by hand above
        slots = (again["slot"] - last["slot"]) // 60 + 1
        check(again["slot"] >= last["slot"] and n_sched == slots,
              "after kill -9 and restart: %d scheduled jobs for %d slots, none twice"
              % (n_sched, slots))


def test(bins):
    tmp = tempfile.mkdtemp(prefix="longrun-it-")
    try:
        worker_checks(bins["worker"], tmp)
    finally:
        subprocess.run(["rm", "-rf", tmp])
    daemon_checks(bins)


if __name__ == "__main__":
    main(test)
