#!/usr/bin/env python3
"""Repeated sampling (docs/SERVING.md "Repeated sampling"): the sampling job of
suites/serving.json passes on emu's correct mode for NUMVAL_SAMPLING_SEEDS seeds
(default 10), and its figures are recomputed here independently: the expected
counts from the reported logits by a softmax of our own (temperature, then
top-k, then top-p, ties by index), G with the pooling rule and Williams'
correction, and the p-value from the closed forms of the chi-square survival
function (Abramowitz & Stegun 26.4.4, 26.4.5). Each emu sampling misbehaviour
fails the part that is about it, naming what changed:
- emu:sample_stream=reuse (one uniform per batch): sampling_bias, naming how
  often adjacent draws repeat against chance;
- emu:sample_stream=per_call (a stream that advances across calls):
  sampling_not_reproducible, naming draw 0;
- emu:sample_topp=before_temperature: sampling_support, naming a token whose
  reference probability (recomputed here) is 0;
- emu:sample_draw=untempered (the nucleus right, the draw from softmax(x)):
  sampling_bias with every draw inside the support, reproducible.
Op jobs of argmax and sample pass on emu and sample's fail under those modes;
too few draws is an error naming the draws needed; bad specs are refused with
their JSON pointer.

usage: test_serving_sampling.py NUMVAL_WORKER SOURCE_ROOT
Prints TAP. Temp files live in a temp dir that is always removed."""
import copy
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import nvschema

from nvtap import ok, finish

WORKER, ROOT = sys.argv[1:3]
VALIDATOR = nvschema.validator()
SEEDS = int(os.environ.get("NUMVAL_SAMPLING_SEEDS", "10"))


def sampling_job():
    with open(os.path.join(ROOT, "suites", "serving.json")) as f:
        return next(j for j in json.load(f)["jobs"] if j["check"] == "sampling")


def run(tmp, job, backend):
    path = os.path.join(tmp, "job.json")
    with open(path, "w") as f:
        json.dump(job, f)
    p = subprocess.run([WORKER, "run", path, "--backend", backend, "--threads", "2"],
                       capture_output=True, text=True, timeout=600)
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        return p.returncode, None, p.stderr + p.stdout
    errs = nvschema.errors(VALIDATOR, doc)
    ok(not errs, "%s on %s: the result is valid against schema/result.schema.json" %
       (job.get("check", job.get("op")), backend), errs)
    return p.returncode, doc, p.stderr


def probs(logits, t, top_k, top_p):
    """Our own reading of docs/TOLERANCES.md "Selections", in float64."""
    order = sorted(range(len(logits)), key=lambda i: (-logits[i], i))
    if 0 < top_k < len(order):
        order = order[:top_k]
    zmax = logits[order[0]] / t
    e = [math.exp(logits[i] / t - zmax) for i in order]
    s = sum(e)
    keep = len(order)
    if top_p < 1:
        c = 0
        for j, v in enumerate(e):
            c += v / s
            if c >= top_p:
                keep = j + 1
                break
    s = sum(e[:keep])
    p = [0.0] * len(logits)
    for j in range(keep):
        p[order[j]] = e[j] / s
    return p


def chi2_sf(x, k):
    """Closed forms: A&S 26.4.4 (odd k) and 26.4.5 (even k)."""
    if x <= 0:
        return 1.0
    if k % 2 == 0:
        term, total = 1.0, 1.0
        for i in range(1, k // 2):
            term *= (x / 2) / i
            total += term
        return math.exp(-x / 2) * total
    total = math.erfc(math.sqrt(x / 2))
    term = math.sqrt(2 * x / math.pi) * math.exp(-x / 2)
    for i in range(1, (k + 1) // 2):
        total += term
        term *= x / (2 * i + 1)
    return total


def gtest(obs, exp, min_expected):
    cats = sorted([(e, i) for i, e in enumerate(exp) if e > 0], key=lambda c: (-c[0], c[1]))
    kept = [c for c in cats if c[0] >= min_expected]
    small = [c for c in cats if c[0] < min_expected]
    groups = [[c[1]] for c in kept]
    if small:
        if sum(c[0] for c in small) < min_expected and groups:
            groups[-1] += [c[1] for c in small]
        else:
            groups.append([c[1] for c in small])
    N = sum(obs[i] for c in cats for i in [c[1]])
    g = 0
    for grp in groups:
        o = sum(obs[i] for i in grp)
        e = sum(exp[i] for i in grp)
        if o > 0:
            g += o * math.log(o / e)
    g *= 2
    k = len(groups)
    q = 1 + (k * k - 1) / (6 * N * (k - 1))
    return g / q, k - 1


def check_case(c, job):
    s = c["criteria"]["sampling"]
    p = probs(s["logits"], job["temperature"], job["top_k"], job["top_p"])
    hist = {h["token"]: h for h in s["histogram"]}
    N = s["samples"]
    exp_ok = all(abs(hist[i]["expected"] - N * p[i]) <= 1e-9 * N * p[i]
                 for i in range(len(p)) if p[i] > 0) and \
        all(p[h["token"]] > 0 or h["expected"] == 0 for h in s["histogram"])
    obs = [hist[i]["observed"] if i in hist else 0 for i in range(len(p))]
    g, df = gtest(obs, [N * x for x in p], s["min_expected"])
    return exp_ok, sum(obs) == N, abs(g - s["g"]) <= 1e-9 * g, df == s["df"], \
        abs(chi2_sf(g, df) - s["p"]) <= 1e-9 * max(s["p"], 1e-300), p


def main():
    tmp = tempfile.mkdtemp(prefix="nvtest-sampling-")
    try:
        job = sampling_job()
        ok(job["draws"] >= 20000 and job["temperature"] < 1 and job["top_k"] > 0 and
           job["top_p"] < 1, "suites/serving.json: the sampling job truncates by top-k and top-p")
        worst_p = 1
        for seed in range(1, SEEDS + 1):
            j = dict(job, seed=seed)
            rc, doc, err = run(tmp, j, "emu")
            cases = (doc or {}).get("cases", [])
            ok(rc == 0 and len(cases) == 2 and all(c["verdict"] == "passed" for c in cases),
               "seed %d: the sampling cases pass on emu" % seed,
               (err, [(c["dtype"], c["verdict"], c.get("error")) for c in cases]))
            for c in cases:
                s = c["criteria"]["sampling"]
                worst_p = min(worst_p, s["p"])
                parts = check_case(c, job)
                ok(all(parts[:5]) and s["reproducible"] and s["generation"]["reproducible"] and
                   s["power"] >= 0.99 and s["p"] >= s["alpha"] == 1e-5,
                   "seed %d %s: expected counts, G (%.2f on %d df) and p (%.3g) recomputed; "
                   "reproducible, power %.4f" % (seed, c["dtype"], s["g"], s["df"], s["p"],
                                                 s["power"]),
                   (parts[:5], {k: v for k, v in s.items() if k not in ("histogram", "logits")}))
        print("# smallest p over %d seeds x 2 dtypes: %.4g" % (SEEDS, worst_p))

        rc, doc, err = run(tmp, job, "emu:sample_stream=reuse")
        c = (doc or {}).get("cases", [{}])[0]
        ok(rc != 0 and c.get("verdict") == "failed" and c.get("failure_class") == "sampling_bias"
           and "adjacent draws" in c.get("error", "") and c["criteria"]["sampling"]["p"] < 1e-5 and
           c["criteria"]["sampling"]["adjacent_repeats"] > 10 * c["criteria"]["sampling"]["expected_adjacent_repeats"] and
           c["criteria"]["sampling"]["reproducible"],
           "sample_stream=reuse: the G-test fails; adjacent draws repeat far more than chance", c.get("error"))
        rc, doc, err = run(tmp, job, "emu:sample_stream=per_call")
        c = (doc or {}).get("cases", [{}])[0]
        ok(rc != 0 and c.get("verdict") == "failed" and
           c.get("failure_class") == "sampling_not_reproducible" and
           c.get("error", "").startswith("the same seed did not reproduce the draws: draw 0 ") and
           not c["criteria"]["sampling"]["reproducible"],
           "sample_stream=per_call: not reproducible, naming draw 0", c.get("error"))
        rc, doc, err = run(tmp, job, "emu:sample_topp=before_temperature")
        c = (doc or {}).get("cases", [{}])[0]
        tok = int(c.get("error", "token -1").split()[1]) if c.get("error") else -1
        p = check_case(c, job)[5] if c.get("criteria", {}).get("sampling") else []
        ok(rc != 0 and c.get("failure_class") == "sampling_support" and 0 <= tok < len(p) and
           p[tok] == 0 and c["criteria"]["sampling"]["outside_support"] > 0,
           "sample_topp=before_temperature: a draw outside the support, the token named has "
           "probability 0 here too", c.get("error"))

        rc, doc, err = run(tmp, job, "emu:sample_draw=untempered")
        c = (doc or {}).get("cases", [{}])[0]
        s = c.get("criteria", {}).get("sampling", {})
        tv = 0.5 * sum(abs(h["observed"] - h["expected"]) for h in s.get("histogram", [])) / \
            s.get("samples", 1)
        ok(rc != 0 and c.get("failure_class") == "sampling_bias" and s["outside_support"] == 0 and
           s["reproducible"] and "adjacent draws" not in c.get("error", "") and tv > 0.05 and
           s["p"] < 1e-5,
           "sample_draw=untempered: a bias inside the support (observed TV %.3f) fails the "
           "G-test, the draws reproducible and independent" % tv, c.get("error"))

        rc, doc, err = run(tmp, dict(job, draws=300), "emu")
        c = (doc or {}).get("cases", [{}])[0]
        ok(c.get("verdict") == "error" and c.get("failure_class") == "underpowered" and
           'raise "draws" to at least ' in c.get("error", ""),
           "300 draws: an error naming the draws the power needs, not a pass", c.get("error"))

        ops = [({"op": "argmax", "shapes": [[64, 50], [7]]}, "emu", "passed"),
               ({"op": "sample", "shapes": [[256, 50]],
                 "attrs": {"temperature": 0.7, "top_k": 20, "top_p": 0.9, "seed": 5}},
                "emu", "passed"),
               ({"op": "sample", "shapes": [[256, 50]], "inputs": ["normal"],
                 "attrs": {"temperature": 0.7, "top_k": 20, "top_p": 0.9, "seed": 5}},
                "emu:sample_stream=reuse", "failed"),
               ({"op": "sample", "shapes": [[256, 50]], "inputs": ["normal"],
                 "attrs": {"temperature": 0.7, "top_k": 20, "top_p": 0.9, "seed": 5}},
                "emu:sample_topp=before_temperature", "failed"),
               ({"op": "sample", "shapes": [[256, 50]], "inputs": ["normal"],
                 "attrs": {"temperature": 0.7, "top_k": 20, "top_p": 0.9, "seed": 5}},
                "emu:sample_draw=untempered", "failed"),
               ({"op": "sample", "shapes": [[64, 50]], "inputs": ["normal"], "repeat": 2,
                 "deterministic": True}, "emu:sample_stream=per_call", "failed")]
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import nvschema
        op_case = nvschema.validator("op_case")
        for patch, be, want in ops:
            spec = dict({"kind": "op", "dtypes": ["fp32", "bf16", "fp64"],
                         "inputs": ["normal", "specials", "large"], "seed": 1}, **patch)
            rc, doc, err = run(tmp, spec, be)
            got = [(c["dtype"], c["input"], c["verdict"], c.get("failure_class"))
                   for c in (doc or {}).get("cases", [])]
            errs = [e for c in (doc or {}).get("cases", []) for e in nvschema.errors(op_case, c)]
            ok(got and not errs and all(c["out_dtype"] == "int32" and "justified" in c
                                        for c in doc["cases"]) and
               (all(g[2] == want for g in got) if want == "passed"
                else any(g[2] == want for g in got)),
               "op %s on %s: %s; int32 outputs, the cases valid against the op case schema" %
               (patch["op"], be, want), (err, got, errs))

        bad = [({"draws": 10}, "/draws"), ({"top_p": 0}, "/top_p"),
               ({"temperature": 0}, "/temperature"), ({"top_k": -1}, "/top_k")]
        for patch, ptr in bad:
            rc, doc, err = run(tmp, dict(job, **patch), "emu")
            ok(rc != 0 and ptr in err, "refused: %s at %s" % (patch, ptr), err)
        rc, doc, err = run(tmp, {"kind": "op", "op": "sample", "dtypes": ["fp32"],
                                 "shapes": [[4, 8]], "attrs": {"temperature": 0}}, "emu")
        ok(rc != 0 and "temperature" in err, "op sample: temperature 0 refused, named", err)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
