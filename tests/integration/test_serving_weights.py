#!/usr/bin/env python3
"""Serving jobs with weights from a safetensors checkpoint (docs/SERVING.md
"Weights"), on emu: the checkpoint numval-worker export-weights writes for the
model kind's decoder-lm (same sizes, seed 1) gives a serving job exactly the
seeded job's results (bit for bit: the same weights under the same names); the
same checkpoint under another seed's job replaces that seed's weights (the
results differ from the seeded ones); one weight changed in the file changes
the results; a wrong sha256, a missing tensor, a wrong shape and a dtype the
job does not declare are refused before any case runs, naming the file and the
tensor; a bad "weights" field is refused with its JSON pointer.

usage: test_serving_weights.py NUMVAL_WORKER SOURCE_ROOT
Prints TAP. Temp files live in a temp dir that is always removed."""
import copy
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

from nvtap import ok, finish

WORKER, ROOT = sys.argv[1:3]


def read_st(path):
    """{name: (dtype, shape, bytes)} of a safetensors file."""
    with open(path, "rb") as f:
        b = f.read()
    hl = struct.unpack("<Q", b[:8])[0]
    hdr = json.loads(b[8:8 + hl])
    base = 8 + hl
    return {k: (v["dtype"], v["shape"], b[base + v["data_offsets"][0]:base + v["data_offsets"][1]])
            for k, v in hdr.items() if k != "__metadata__"}


def write_st(path, tensors):
    hdr, at, blob = {}, 0, b""
    for k, (dt, shape, raw) in tensors.items():
        hdr[k] = {"dtype": dt, "shape": shape, "data_offsets": [at, at + len(raw)]}
        at += len(raw)
        blob += raw
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + blob)


def run(tmp, job, name="job"):
    path, out = os.path.join(tmp, name + ".json"), os.path.join(tmp, name + "-out.json")
    with open(path, "w") as f:
        json.dump(job, f)
    p = subprocess.run([WORKER, "run", path, "--backend", "emu", "--output", out],
                       capture_output=True, text=True, timeout=300)
    doc = None
    if os.path.exists(out):
        with open(out) as f:
            doc = json.load(f)
    return p.returncode, doc, p.stderr


def positions(doc):
    c = (doc or {}).get("cases", [{}])[0]
    return [(p["e_prefill"], p["e_decode"], p["e_dtype_ref"], p["d"])
            for p in c.get("criteria", {}).get("prefill_decode", {}).get("per_position", [])]


def main(tmp):
    with open(os.path.join(ROOT, "suites", "model.json")) as f:
        lm = next(j for j in json.load(f)["jobs"] if j["name"] == "decoder-lm")
    lm = dict(copy.deepcopy(lm), dtypes=["fp32"], seed=1)
    lm_path, ck = os.path.join(tmp, "lm.json"), os.path.join(tmp, "lm.safetensors")
    with open(lm_path, "w") as f:
        json.dump(lm, f)
    p = subprocess.run([WORKER, "export-weights", lm_path, "-o", ck, "--dtype", "fp32"],
                       capture_output=True, text=True, timeout=120)
    ok(p.returncode == 0 and os.path.exists(ck), "export-weights wrote the decoder-lm checkpoint",
       p.stderr)
    with open(os.path.join(ROOT, "suites", "serving.json")) as f:
        job = next(j for j in json.load(f)["jobs"] if j["name"] == "prefill-decode")
    job = dict(copy.deepcopy(job), dtypes=["fp32"], prompt=8, seed=1)
    sha = hashlib.sha256(open(ck, "rb").read()).hexdigest()
    with_ck = dict(job, weights={"safetensors": ck, "sha256": sha})

    rc, seeded, err = run(tmp, job, "seeded")
    rc2, loaded, err2 = run(tmp, with_ck, "loaded")
    ok(rc == 0 and rc2 == 0 and seeded["verdict"] == loaded["verdict"] == "passed" and
       len(positions(seeded)) == 8 and positions(seeded) == positions(loaded),
       "the exported checkpoint gives the seeded job's results bit for bit (8 positions)",
       (err, err2))

    rc, seeded2, _ = run(tmp, dict(job, seed=2), "seeded2")
    rc2, loaded2, err = run(tmp, dict(with_ck, seed=2), "loaded2")
    ok(rc2 == 0 and loaded2["verdict"] == "passed" and
       positions(loaded2) != positions(seeded2),
       "under seed 2 the checkpoint's weights replace the seeded ones (the results differ)", err)

    t = read_st(ck)
    dt, shape, raw = t["decoder.1.wv"]
    x = struct.unpack_from("<f", raw, 0)[0]
    t["decoder.1.wv"] = (dt, shape, struct.pack("<f", x * 1.5) + raw[4:])
    changed = os.path.join(tmp, "changed.safetensors")
    write_st(changed, t)
    rc, doc, err = run(tmp, dict(job, weights={"safetensors": changed}), "changed")
    ok(rc == 0 and positions(doc) and positions(doc) != positions(loaded),
       "one weight changed in the file changes the results", err)

    rc, doc, err = run(tmp, dict(with_ck, weights={"safetensors": changed, "sha256": sha}), "sha")
    ok(rc != 0 and "its SHA-256 is" in err and sha in err,
       "a checkpoint whose SHA-256 differs from weights.sha256 is refused naming both", err)

    t = read_st(ck)
    del t["decoder.1.w_down"]
    missing = os.path.join(tmp, "missing.safetensors")
    write_st(missing, t)
    rc, doc, err = run(tmp, dict(job, weights={"safetensors": missing}), "missing")
    ok(rc != 0 and "no tensor 'decoder.1.w_down'" in err and missing in err,
       "a checkpoint without a weight is refused naming the file and the tensor", err)

    rc, doc, err = run(tmp, dict(with_ck, decoder=dict(job["decoder"], ffn=32)), "shape")
    ok(rc != 0 and "tensor 'decoder.0.w_gate' is not [32, 32]" in err,
       "a weight of another shape than the decoder's sizes make it is refused naming it", err)

    rc, doc, err = run(tmp, dict(with_ck, dtypes=["fp32", "bf16"]), "dtype")
    ok(rc != 0 and "tensor 'wte' is stored in F32, the job's /dtypes/1 is bf16" in err,
       "a dtype the checkpoint does not store is refused: numval never casts it", err)

    for bad, ptr in (({"safetensors": ""}, "/weights/safetensors"),
                     ({"safetensors": ck, "sha256": "xyz"}, "/weights/sha256"),
                     ({"safetensors": ck, "names": {}}, "/weights/names"),
                     ("lm.safetensors", "/weights")):
        rc, doc, err = run(tmp, dict(job, weights=bad), "bad")
        ok(rc != 0 and ptr in err, "a bad weights field is refused at %s" % ptr, err)


if __name__ == "__main__":
    tmp = tempfile.mkdtemp(prefix="nvtest-serving-weights-")
    try:
        main(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(finish())
