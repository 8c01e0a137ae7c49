#!/usr/bin/env python3
"""Model jobs (docs/MODEL.md): the shipped suites/model.json passes on emu's
correct modes (fp32; bf16 with fp32 accumulation) for 10 seeds, and fails with
every op output held in fp8 e5m2 (emu:storage=fp8_e5m2), naming the first
divergent layer and op (the MLP at fc_in / matmul, the CNN at conv1 /
conv2d, the LM at embed / embedding); a variant whose first layer is itself fp8-exact
(a cast round trip) moves the first divergent layer to the next one. The
reported figures are checked against independent recomputation: the band
formula from its parts, and the accuracies' Wilson intervals from the counts
(Python's statistics.NormalDist as the quantile oracle). Bad model specs are
refused with the JSON pointer of the model field.

usage: test_model.py NUMVAL_WORKER SOURCE_ROOT
Prints TAP. Temp files live in a temp dir that is always removed.
NUMVAL_MODEL_SEEDS=N runs N seeds (default 10)."""
import copy
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from nvtap import ok, finish
from nvsuite import run_suite, cases

WORKER, ROOT = sys.argv[1:3]
SEEDS = int(os.environ.get("NUMVAL_MODEL_SEEDS", "10"))


def suite_jobs():
    with open(os.path.join(ROOT, "suites", "model.json")) as f:
        return json.load(f)["jobs"]


def run(tmp, jobs, backend, seed, threads=2):
    """Run jobs as a suite with the seed; (exit code, result doc, stderr)."""
    jobs = copy.deepcopy(jobs)
    for j in jobs:
        j["seed"] = seed
    return run_suite(WORKER, tmp, "model-test", jobs, backend, timeout=300, threads=threads)


def unit_roundoff(dt):
    return {"fp32": 2.0 ** -24, "bf16": 2.0 ** -8, "fp64": 2.0 ** -53}[dt]


def band_consistent(c):
    """Every node's band is F (e_dtype_ref + K u_acc) + u and its state follows it."""
    ua = unit_roundoff(c["accumulator"])
    for nd in c["nodes"]:
        want = c["band_factor"] * (nd["e_dtype_ref"] + nd["reduction_len"] * ua) + \
            unit_roundoff(nd["dtype"])
        if not math.isclose(nd["band"], want, rel_tol=1e-12):
            return "node %s band %r != %r" % (nd["name"], nd["band"], want)
        if (nd["state"] == "in_band") != (nd["e_dev"] <= nd["band"]):
            return "node %s state %s" % (nd["name"], nd["state"])
    return None


def wilson(x, n_, z):
    p = x / n_
    centre = (p + z * z / (2 * n_)) / (1 + z * z / n_)
    half = z / (1 + z * z / n_) * math.sqrt(p * (1 - p) / n_ + z * z / (4 * n_ * n_))
    return max(0.0, centre - half), min(1.0, centre + half)


def wilson_consistent(c):
    if "accuracy" not in c["criteria"]:
        return None  # a language model: no labels
    a = c["criteria"]["accuracy"]
    z = statistics.NormalDist().inv_cdf(1 - a["alpha"] / 2)
    for key, acc in (("acc_ref_ci", a["acc_ref"]), ("acc_dev_ci", a["acc_dev"])):
        lo, hi = wilson(round(acc * a["n"]), a["n"], z)
        if not (math.isclose(lo, a[key][0], abs_tol=1e-9) and
                math.isclose(hi, a[key][1], abs_tol=1e-9)):
            return "%s %r != [%r, %r]" % (key, a[key], lo, hi)
    blo, _ = wilson(a["ref_right_dev_wrong"], a["n"], z)
    _, chi = wilson(a["ref_wrong_dev_right"], a["n"], z)
    if not math.isclose(a["gap_ci"][0], blo - chi, abs_tol=1e-9):
        return "gap_lo %r != %r" % (a["gap_ci"][0], blo - chi)
    return None


def check_correct(tmp, jobs):
    bad, checked, dts = [], 0, set()
    for seed in range(1, SEEDS + 1):
        rc, doc, err = run(tmp, jobs, "emu", seed)
        if rc != 0 or doc is None:
            bad.append("seed %d: exit %d %s" % (seed, rc, err[-300:]))
            continue
        for job, c in cases(doc):
            checked += 1
            dts.add(c["dtype"])
            if c["verdict"] != "passed":
                bad.append("seed %d %s: %s" % (seed, c["dtype"], c.get("error")))
            problem = band_consistent(c) or wilson_consistent(c)
            if c["accumulator"] != "fp32":
                problem = "accumulator %s" % c["accumulator"]
            if problem:
                bad.append("seed %d %s: %s" % (seed, c["dtype"], problem))
    ok(not bad and checked > 0 and dts == {"fp32", "bf16"},
       "emu (fp32, bf16 with fp32 accumulation): %d cases over %d seeds pass, bands and Wilson "
       "intervals as documented" % (checked, SEEDS), "\n".join(bad))


# Where every op output held in fp8 e5m2 first leaves the band: the first op
# whose output the model-dtype reference keeps exact or rounded finer.
EXPECT = {"mlp-classifier": ("fc_in", "fc_in.h", "matmul"),
          "cnn-classifier": ("conv1", "conv1.c", "conv2d"),
          "decoder-lm": ("embed", "embed.x", "embedding")}


def check_fp8(tmp, jobs, what, backend="emu:storage=fp8_e5m2"):
    bad, checked = [], 0
    for seed in range(1, SEEDS + 1):
        rc, doc, err = run(tmp, jobs, backend, seed)
        if rc != 1 or doc is None:
            bad.append("seed %d: exit %d (want 1) %s" % (seed, rc, err[-300:]))
            continue
        for job, c in cases(doc):
            checked += 1
            layer, node, op = EXPECT[job["name"]]
            fd = c.get("first_divergent") or {}
            if c["verdict"] != "failed" or c.get("failure_class") != "out_of_band":
                bad.append("seed %d %s: verdict %s" % (seed, c["dtype"], c["verdict"]))
            elif (fd.get("layer"), fd.get("node"), fd.get("op")) != (layer, node, op):
                bad.append("seed %d %s: first divergent %s" % (seed, c["dtype"], fd))
            elif ("layer '%s'" % layer) not in c["error"] or ("op '%s'" % op) not in c["error"]:
                bad.append("seed %d: message %r" % (seed, c["error"]))
            elif fd["local"].get("verdict") != "outside_tolerance":
                bad.append("seed %d: the op's local check %s" % (seed, fd["local"]))
    ok(not bad and checked > 0,
       "%s %s: %d cases over %d seeds fail at the expected layer and op (%s)" %
       (backend, what, checked, SEEDS, sorted({EXPECT[j["name"]] for j in jobs})), "\n".join(bad))


def quantized_variant(jobs):
    """The first layer casts x to fp8 e5m2 and back: exact in every mode, so
    it stays within its band under fp8 storage and the next layer diverges."""
    jobs = copy.deepcopy([j for j in jobs if j["name"] == "mlp-classifier"])
    for j in jobs:
        m = j["model"]
        m["layers"].insert(0, {"name": "quant", "nodes": [
            {"name": "q", "op": "cast", "inputs": ["x"], "attrs": {"to": "fp8_e5m2"}},
            {"name": "back", "op": "cast", "inputs": ["q"], "attrs": {"to": "fp32"}}]})
        first = m["layers"][1]["nodes"][0]
        first["inputs"] = ["@in" if i == "x" else i for i in first["inputs"]]
        j["dtypes"] = ["fp32"]
    return jobs


def check_graph(tmp, jobs):
    """"execution": "graph": the whole model in one call of emu's graph entry
    with capture passes on the correct mode and fails where intermediates are
    held in fp8 e5m2, at the same layers and ops."""
    gjobs = copy.deepcopy(jobs)
    for j in gjobs:
        j["execution"] = "graph"
    bad = []
    for seed in range(1, SEEDS + 1):
        rc, doc, err = run(tmp, gjobs, "emu", seed)
        if rc != 0 or doc is None or any(j.get("execution") != "graph" for j in doc["results"]):
            bad.append("seed %d: exit %d %s" % (seed, rc, err[-300:]))
        elif any(c["verdict"] != "passed" for _, c in cases(doc)):
            bad.append("seed %d: %s" % (seed, [c.get("error") for _, c in cases(doc)]))
    ok(not bad, "execution graph on emu: every case passes over %d seeds" % SEEDS, "\n".join(bad))
    check_fp8(tmp, gjobs, "graph execution", "emu:fused_intermediate=fp8_e5m2")


def check_decode(tmp, jobs):
    """The language model's decode is reported in full and, on the correct
    mode, a greedy decode of the fp64 model that the device follows or
    leaves only where the fp64 margin is within the band."""
    bad = []
    for seed in range(1, SEEDS + 1):
        rc, doc, err = run(tmp, jobs, "emu", seed)
        for job, c in cases(doc):
            d = c["criteria"].get("decode") or {}
            steps = jobs[0]["task"]["decode"]
            if len(d.get("tokens_ref", [])) != steps or len(d.get("tokens_dev", [])) != steps:
                bad.append("seed %d: decode %s" % (seed, d))
                continue
            same = [a == b for a, b in zip(d["tokens_ref"], d["tokens_dev"])]
            first = same.index(False) if False in same else None
            if d["first_divergent"] != first or \
                    not math.isclose(d["agreement"], sum(same) / steps) or not d["passed"]:
                bad.append("seed %d: decode %s" % (seed, d))
    ok(not bad, "decoder-lm on emu: %d greedy tokens per case, first divergence and agreement "
       "as the token lists say, judged passed" % (jobs[0]["task"]["decode"] if jobs else 0),
       "\n".join(bad))


# Op jobs of the four data-movement ops the transformer added (docs/JOBS.md
# "Attributes"): exact, so they pass on emu in every dtype, layout and class,
# and fail (ulp_exceeded) the moment emu rounds their outputs to bf16.
LAYOUT_JOBS = [
    {"kind": "op", "op": "transpose", "dtypes": ["fp32", "bf16", "fp8_e5m2"],
     "shapes": [[3, 5], [2, 4, 7]], "inputs": ["normal", "specials"],
     "layouts": ["contiguous", "transposed", "strided"]},
    {"kind": "op", "op": "embedding", "dtypes": ["fp32", "bf16"],
     "shapes": [[[50, 8], [12]], [[7, 3], [2, 5]]], "inputs": ["normal", "specials"]},
    {"kind": "op", "op": "split_heads", "attrs": {"heads": 4}, "dtypes": ["fp32", "bf16"],
     "shapes": [[6, 32]], "inputs": ["normal", "specials"], "layouts": ["contiguous", "strided"]},
    {"kind": "op", "op": "merge_heads", "dtypes": ["fp32", "bf16"], "shapes": [[4, 6, 8]],
     "inputs": ["normal", "specials"], "layouts": ["contiguous", "transposed"]},
]


def check_layout_ops(tmp):
    bad = []
    for seed in (1, 2):
        rc, doc, err = run(tmp, LAYOUT_JOBS, "emu", seed)
        if rc != 0 or any(c["verdict"] != "passed" for _, c in cases(doc)):
            bad.append("emu seed %d: exit %d %s" % (seed, rc, err[-300:]))
        rc, doc, err = run(tmp, LAYOUT_JOBS, "emu:storage=bf16", seed)
        fails = {(j["op"], c["dtype"]) for j, c in cases(doc) if c["verdict"] == "failed"
                 and c.get("failure_class") == "ulp_exceeded"}
        # fp32 outputs rounded to bf16 storage differ; bf16 and fp8 ones are exact
        if rc != 1 or fails != {(op, "fp32") for op in ("transpose", "embedding", "split_heads",
                                                       "merge_heads")}:
            bad.append("bf16 storage seed %d: exit %d, failed %s" % (seed, rc, sorted(fails)))
    ok(not bad, "transpose, embedding, split_heads and merge_heads op jobs pass on emu and fail "
       "with bf16 storage in fp32",
       "\n".join(bad))


# Op jobs of the CNN's ops (docs/JOBS.md "Attributes"): conv2d is a dot
# product of K = C kh kw terms per output, judged by the probabilistic bound
# with fp32 accumulation, so it passes on emu and fails when emu accumulates
# in bf16; max_pool2d and flatten are exact (0 ulp) and fail when fp32
# outputs are rounded to bf16.
CNN_OP_JOBS = [
    {"kind": "op", "op": "conv2d", "dtypes": ["fp32", "bf16"],
     "shapes": [[[2, 3, 8, 8], [4, 3, 3, 3]]], "inputs": ["normal", "uniform"]},
    {"kind": "op", "op": "conv2d", "attrs": {"stride": 2, "padding": 1, "dilation": 2},
     "dtypes": ["fp32"], "shapes": [[[1, 16, 9, 7], [5, 16, 3, 2]]], "inputs": ["normal"]},
    {"kind": "op", "op": "max_pool2d", "dtypes": ["fp32", "bf16"], "shapes": [[2, 3, 8, 8]],
     "inputs": ["normal", "specials"], "layouts": ["contiguous", "strided"]},
    {"kind": "op", "op": "max_pool2d", "attrs": {"kernel": 3, "stride": 2, "padding": 1},
     "dtypes": ["fp32", "bf16"], "shapes": [[1, 2, 7, 9]], "inputs": ["normal", "specials"]},
    {"kind": "op", "op": "flatten", "dtypes": ["fp32", "bf16"], "shapes": [[2, 3, 4, 5]],
     "inputs": ["normal", "specials"], "layouts": ["contiguous", "transposed"]},
]


def check_cnn_ops(tmp):
    bad = []
    for seed in (1, 2):
        rc, doc, err = run(tmp, CNN_OP_JOBS, "emu", seed)
        if rc != 0 or any(c["verdict"] != "passed" for _, c in cases(doc)):
            bad.append("emu seed %d: exit %d %s" % (seed, rc, err[-300:]))
        rc, doc, err = run(tmp, CNN_OP_JOBS, "emu:accum=bf16", seed)
        conv = [c for j, c in cases(doc) if j["op"] == "conv2d"]
        if rc != 1 or not conv or any(c["verdict"] != "failed" for c in conv) or \
                any(c["verdict"] != "passed" for j, c in cases(doc) if j["op"] != "conv2d"):
            bad.append("bf16 accumulation seed %d: exit %d" % (seed, rc))
        rc, doc, err = run(tmp, CNN_OP_JOBS, "emu:storage=bf16", seed)
        fails = {(j["op"], c["dtype"]) for j, c in cases(doc) if c["verdict"] == "failed"}
        if not {("max_pool2d", "fp32"), ("flatten", "fp32")} <= fails or \
                any(dt == "bf16" and op != "conv2d" for op, dt in fails):
            bad.append("bf16 storage seed %d: failed %s" % (seed, sorted(fails)))
    ok(not bad, "conv2d, max_pool2d and flatten op jobs pass on emu; conv2d fails with bf16 "
       "accumulation, the exact ops with bf16 storage in fp32", "\n".join(bad))


def check_determinism(tmp, jobs):
    """Weights, data and labels are a pure function of the seed, the sample and
    the name (docs/MODEL.md "Deterministic init"): the same job on 1 and on 2
    threads gives the same cases bit for bit, and another seed other figures."""
    jobs = copy.deepcopy(jobs)
    for j in jobs:
        j["samples"] = 2
    docs = [run(tmp, jobs, "emu", 5, threads)[1] for threads in (1, 2)]
    other = run(tmp, jobs, "emu", 6)[1]
    for d in docs:  # a case's "seconds" is wall-clock time, the one field that may differ
        for _, c in cases(d):
            c.pop("seconds", None)
    same = docs[0] is not None and docs[0]["results"] == docs[1]["results"]
    differs = other is not None and [c["nodes"] for _, c in cases(other)] != \
        [c["nodes"] for _, c in cases(docs[0])]
    ok(same and differs, "the same seed gives the same cases on 1 and 2 threads, another seed "
       "other ones")


def check_refusals(tmp, jobs):
    base = [j for j in jobs if j["name"] == "mlp-classifier"][0]
    bad_specs = [
        (lambda m: m["layers"][1].update(block="nope"), "/model/layers/1/block"),
        (lambda m: m["layers"][0]["nodes"][0].update(inputs=["x", "w_nope"]),
         "/model/layers/0/nodes/0/inputs/1"),
        (lambda m: m["blocks"]["hidden"]["nodes"][0].update(op="matmull"),
         "/model/blocks/hidden/nodes/0/op"),
        (lambda m: m["layers"][1].update(repeat=0), "/model/layers/1/repeat"),
        (lambda m: m["params"][0].pop("init"), "/model/params/0/init"),
        (lambda m: m["layers"][0]["nodes"][0].update(inputs=["@in", "w_in"]),
         "/model/layers/0/nodes/0/inputs/0"),
    ]
    bad = []
    for mutate, ptr in bad_specs:
        job = copy.deepcopy(base)
        mutate(job["model"])
        path = os.path.join(tmp, "bad.json")
        with open(path, "w") as f:
            json.dump(job, f)
        p = subprocess.run([WORKER, "run", path, "--backend", "emu"], capture_output=True,
                           text=True, timeout=60)
        if p.returncode != 2 or ptr not in p.stderr:
            bad.append("%s: exit %d, %r" % (ptr, p.returncode, p.stderr[-300:]))
    ok(not bad, "%d bad model specs refused at the model field's JSON pointer" % len(bad_specs),
       "\n".join(bad))


def main():
    tmp = tempfile.mkdtemp(prefix="nv-model-")
    try:
        jobs = suite_jobs()
        ok(jobs and all(j["kind"] == "model" for j in jobs), "suites/model.json holds model jobs")
        check_correct(tmp, jobs)
        names = sorted(j.get("name", "") for j in jobs)
        ok(names == sorted(EXPECT), "the suite's jobs are %s" % sorted(EXPECT), names)
        check_fp8(tmp, jobs, "suite")
        check_fp8(tmp, quantized_variant(jobs), "MLP after an fp8-exact layer")
        check_decode(tmp, [j for j in jobs if j["name"] == "decoder-lm"])
        check_graph(tmp, jobs)
        check_determinism(tmp, jobs)
        check_refusals(tmp, jobs)
        check_layout_ops(tmp)
        check_cnn_ops(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
