#!/usr/bin/env python3
"""Gradient reproducers without a daemon (gradient kind).

The badgrad test plugin's sigmoid backward uses x where the saved output y
belongs (gy x (1 - x) instead of gy y (1 - y)); its layer_norm backward drops
the - mean(g) term. A gradient job on it fails the device check and
`numval-worker run --artifacts` writes the case's artifact; `repro` replays it
bit for bit on the plugin and passes on emu; `minimize` shrinks it with the
signature (op, dtype, mode, check, failure class) fixed; the minimized
artifact fails the same way on the plugin and passes on emu; an artifact
without its cotangent is refused naming it; a determinism failure (a random
summation order the backend does not declare) is reproduced as such.

Hand-derived bounds for the minimizer:
- sigmoid: at x = 0 the plugin gives gy * 0 * (1 - 0) = 0 and the reference
  gy * s(0) * (1 - s(0)) = gy / 4, so one element (x = 0, the input's neutral
  value, and gy = 1 after value simplification) shows the fault: shape [1, 1],
  2 elements in all (x and gy), 1 non-neutral (gy).
- layer_norm over a line of 1: x - mean = 0, so the correct x-gradient is
  rstd (g w - mean(g w) - 0) = 0 while the plugin's is rstd g w != 0; it needs
  g != 0 and w != 0: x [1, 1], w [1], b [1], gy [1, 1] = 4 elements, 2 non-neutral,
  and no reproducer can have fewer (every tensor has >= 1 element, both factors
  must be non-zero).

usage: test_minimize_grad.py NUMVAL_WORKER BADGRAD_PLUGIN_SO"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

from nvartifact import decode as decode_artifact, encode

WORKER, PLUGIN = sys.argv[1], sys.argv[2]
FAILS = 0


def decode(path):
    return decode_artifact(path=path)


def ok(cond, what):
    global FAILS
    print(("ok - " if cond else "not ok - ") + what, flush=True)
    if not cond:
        FAILS += 1


def run(args, timeout=120):
    p = subprocess.run([WORKER] + args, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def f32(data):
    return list(struct.unpack("<%df" % (len(data) // 4), data))


def job(tmp, spec, backend, adir):
    path = os.path.join(tmp, "job.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    os.makedirs(adir, exist_ok=True)
    rc, out, err = run(["run", path, "--backend", backend, "--artifacts", adir])
    return rc, (json.loads(out) if out.strip() else None), err


def sigmoid(tmp, bad):
    rc, res, err = job(tmp, {"kind": "gradient", "op": "sigmoid", "dtypes": ["fp32"],
                             "shapes": [[4, 32]], "seed": 1}, bad, os.path.join(tmp, "a1"))
    case = res["cases"][0] if res else {}
    ok(rc == 1 and case.get("failure_class") == "gradient_mismatch"
       and case.get("failed_check") == "device", "sigmoid job fails: gradient_mismatch in the "
       "device check (rc %d) %s" % (rc, err.strip()[:200]))
    art = os.path.join(tmp, "a1", case.get("artifact", "none") + ".nvart")
    ok(os.path.exists(art), "run --artifacts wrote the gradient case's artifact")
    man, t = decode(art)
    ok(man.get("check") == "device" and man.get("failure_class") == "gradient_mismatch"
       and man["tolerance"]["x"]["metric"] == "gradient_bound" and man["tolerance"]["x"]["reason"]
       and man.get("seed") == 1 and man.get("grad_mode") == "full"
       and man["first_mismatches"]["x"], "manifest: check, class, tolerance with reason, seed, "
       "mode, first mismatches")
    ok(sorted(t) == ["grad_input:0", "grad_output:0", "input:0", "output:0"],
       "tensors: inputs, cotangent, device output and gradient: %s" % sorted(t))
    # Independent oracle: the plugin computes gy x (1 - x) in double and rounds
    # once to fp32 (RNE, as struct's 'f' does), so the stored gradient's bits
    # follow from the stored input and cotangent.
    x, gy, g = f32(t["input:0"][2]), f32(t["grad_output:0"][2]), f32(t["grad_input:0"][2])
    want = [struct.unpack("<f", struct.pack("<f", b * a * (1 - a)))[0] for a, b in zip(x, gy)]
    ok(g == want, "stored device gradient = the plugin's gy x (1 - x), bit for bit")

    only = os.path.join(tmp, "only")
    os.makedirs(only)
    shutil.copy(art, os.path.join(only, "case.nvart"))
    rc, out, err = run(["repro", os.path.join(only, "case.nvart"), "--backend", bad])
    rj = json.loads(out)
    ok(rc == 1 and rj["failed"] == 5 and rj["bit_identical"] == 5 and rj["check"] == "device",
       "repro on the plugin: fails 5/5, gradients bit-identical 5/5: %s" % err.strip())
    rc, out, _ = run(["repro", art, "--backend", "emu"])
    ok(rc == 0 and json.loads(out)["failed"] == 0, "repro on emu: passes")

    mpath = os.path.join(tmp, "min.nvart")
    rc, out, err = run(["minimize", art, "--backend", bad, "-o", mpath])
    print("# " + err.strip().replace("\n", "\n# "))
    mj = json.loads(out)
    ok(rc == 1 and mj["verified"] and not mj["flaky"] and mj["repro_rate"]["failed"] == 5,
       "minimize: gate 5/5, verified reproducer")
    ok(mj["elements_after"] <= 2 and mj["non_neutral_after"] <= 1,
       "minimized to %d elements (<= 2), %d non-neutral (<= 1)"
       % (mj["elements_after"], mj["non_neutral_after"]))
    man2, t2 = decode(mpath)
    ok(t2["input:0"][1] == [1, 1] and f32(t2["input:0"][2]) == [0.0]
       and f32(t2["grad_output:0"][2]) == [1.0] and f32(t2["grad_input:0"][2]) == [0.0],
       "minimized: x = 0, gy = 1, device gradient 0 (the reference's is 1/4)")
    exp = man2["first_mismatches"]["x"][0]["expected"]
    ok(exp == 0.25, "minimized manifest: expected gradient 0.25 (got %s)" % exp)
    ok(man2["signature"]["id"] == rj["signature"]["id"]
       and man2["minimized_from"] == case["artifact"], "minimized: same signature, minimized_from")
    rc, out, _ = run(["repro", mpath, "--backend", bad])
    ok(rc == 1 and json.loads(out)["bit_identical"] == 5, "minimized replays bit for bit")
    rc, out, _ = run(["repro", mpath, "--backend", "emu"])
    ok(rc == 0, "minimized passes on emu")

    # No cotangent: refused, naming it.
    del t["grad_output:0"]
    broken = os.path.join(tmp, "broken.nvart")
    encode(man, t, broken, tmp)
    rc, _, err = run(["repro", broken, "--backend", bad])
    ok(rc == 2 and "grad_output:0" in err, "no cotangent: refused naming it: %s" % err.strip())
    rc, _, err = run(["minimize", broken, "--backend", bad])
    ok(rc == 2 and "grad_output:0" in err, "minimize refuses it the same way")


def layer_norm(tmp, bad):
    rc, res, _ = job(tmp, {"kind": "gradient", "op": "layer_norm", "dtypes": ["fp32"],
                           "shapes": [[4, 32]], "seed": 1}, bad, os.path.join(tmp, "a2"))
    case = res["cases"][0] if res else {}
    art = os.path.join(tmp, "a2", case.get("artifact", "none") + ".nvart")
    ok(rc == 1 and os.path.exists(art), "layer_norm job fails and writes its artifact")
    mpath = os.path.join(tmp, "ln.nvart")
    rc, out, err = run(["minimize", art, "--backend", bad, "-o", mpath, "--quiet"])
    mj = json.loads(out)
    ok(rc == 1 and mj["verified"] and mj["elements_after"] == 4 and mj["non_neutral_after"] == 2,
       "layer_norm minimized to 4 elements, 2 non-neutral (got %d, %d)"
       % (mj["elements_after"], mj["non_neutral_after"]))
    rc, _, _ = run(["repro", mpath, "--backend", "emu"])
    ok(rc == 0, "minimized layer_norm passes on emu")


def determinism(tmp):
    rand = "plugin:%s?undeclared_random" % PLUGIN
    rc, res, _ = job(tmp, {"kind": "gradient", "op": "softmax", "dtypes": ["fp32"],
                           "shapes": [[4, 4096]], "mode": "fast", "repeat": 2, "seed": 5},
                     rand, os.path.join(tmp, "a3"))
    case = res["cases"][0] if res else {}
    art = os.path.join(tmp, "a3", case.get("artifact", "none") + ".nvart")
    ok(rc == 1 and case.get("failure_class") == "nondeterminism" and os.path.exists(art),
       "undeclared random order: failure class nondeterminism, artifact written")
    _, t = decode(art)
    ok("grad_input_rerun:0" in t and t["grad_input_rerun:0"][2] != t["grad_input:0"][2],
       "both runs' gradients kept, and they differ")
    rc, out, _ = run(["repro", art, "--backend", rand, "--runs", "3"])
    rj = json.loads(out)
    ok(rc == 1 and rj["failed"] == 3 and rj["check"] == "determinism",
       "repro: nondeterminism in the determinism check 3/3")
    rc, out, _ = run(["repro", art, "--backend", "emu", "--runs", "2"])
    ok(rc == 0, "repro on the sequential emu: deterministic, passes")


def main():
    tmp = tempfile.mkdtemp(prefix="nv-minimize-grad-")
    try:
        bad = "plugin:" + PLUGIN
        sigmoid(tmp, bad)
        layer_norm(tmp, bad)
        determinism(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("# %d failed" % FAILS)
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
