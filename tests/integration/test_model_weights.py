#!/usr/bin/env python3
"""Model jobs with weights from a safetensors checkpoint (docs/MODEL.md
"Checkpoints"), through the real numval-worker:

- a checkpoint written here with struct + json (no safetensors package) runs
  the MLP classifier, and the weights the worker used (the case's
  weights_sha256) are the ones written, recomputed here from the bytes;
- the decoder LM's exported weights renamed here to another naming scheme run
  through "weights.names" with '*' patterns over the repeated blocks, and an
  extra tensor is reported, not ignored;
- export-weights round trip, MLP and LM in fp32 and bf16: the run from the
  exported checkpoint has the seeded run's verdict and the same case, bit for
  bit (weights_sha256 included); one flipped bit in the checkpoint changes it;
- bad checkpoints (truncated, a header that lies about sizes, unknown dtype, a
  dtype that disagrees with the job or the device's contract, a missing
  tensor, a wrong shape, NaN, a duplicate name, overlapping offsets, a wrong
  sha256) exit 2 with an error naming the file and the tensor.

usage: test_model_weights.py NUMVAL_WORKER SOURCE_ROOT
Prints TAP. Temp files live in a temp dir that is always removed."""
import copy
import hashlib
import json
import math
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

import nvschema

from nvtap import ok, finish

WORKER, ROOT = sys.argv[1:3]
RESULT = nvschema.validator("model_result")
results = []  # every result JSON, validated against the schema at the end


SIZES = {"F32": 4, "BF16": 2, "F16": 2, "F64": 8}


def write_st(path, tensors, metadata=None, header=None):
    """tensors: [(name, dtype, shape, bytes)]; header: a replacement header dict."""
    h, at = {}, 0
    if metadata:
        h["__metadata__"] = metadata
    for name, dt, shape, data in tensors:
        h[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [at, at + len(data)]}
        at += len(data)
    text = json.dumps(header if header is not None else h).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(t[3] for t in tensors))


def read_st(path):
    """[(name, dtype, shape, bytes)] in offset order, and the metadata."""
    with open(path, "rb") as f:
        buf = f.read()
    hl = struct.unpack("<Q", buf[:8])[0]
    h = json.loads(buf[8:8 + hl])
    meta = h.pop("__metadata__", None)
    data = buf[8 + hl:]
    out = [(k, v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
           for k, v in sorted(h.items(), key=lambda kv: kv[1]["data_offsets"])]
    return out, meta


def weights_sha(params):
    """The case's weights_sha256 (worker/kinds/model/case.c model_weights_hash):
    per weight in graph order, name, NUL, each element's bits as 8 bytes LE."""
    h = hashlib.sha256()
    for name, dt, data in params:
        h.update(name.encode() + b"\0")
        size = SIZES[dt]
        for k in range(0, len(data), size):
            h.update(int.from_bytes(data[k:k + size], "little").to_bytes(8, "little"))
    return h.hexdigest()


def timeless(case):
    """A case without "seconds", its wall-clock time: the one field runs may differ in."""
    return {k: v for k, v in (case or {}).items() if k != "seconds"}


def run(tmp, job, backend="emu", name="job.json"):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        json.dump(job, f)
    p = subprocess.run([WORKER, "run", path, "--backend", backend], capture_output=True,
                       text=True, timeout=300)
    res = None
    if p.stdout.strip():
        try:
            res = json.loads(p.stdout)
            results.append(res)
        except ValueError:
            pass
    return p, res


def export(tmp, job, out, *args):
    path = os.path.join(tmp, "export.json")
    with open(path, "w") as f:
        json.dump(job, f)
    p = subprocess.run([WORKER, "export-weights", path, "-o", out] + list(args),
                       capture_output=True, text=True, timeout=120)
    return p, (json.loads(p.stdout) if p.returncode == 0 else None)


def suite_job(name, dtype, seed=5):
    with open(os.path.join(ROOT, "suites", "model.json")) as f:
        job = [j for j in json.load(f)["jobs"] if j["name"] == name][0]
    job = copy.deepcopy(job)
    job.update({"dtypes": [dtype], "samples": 1, "seed": seed})
    return job


def with_weights(job, path, **extra):
    job = copy.deepcopy(job)
    job["weights"] = dict({"safetensors": path}, **extra)
    return job


def weight_order(model):
    """Weights in graph input order: the expansion's (core/spec/model_expand.c):
    global parameters, then each layer's (a block's per instance)."""
    out = [p["name"] for p in model.get("params", [])]
    for layer in model["layers"]:
        if "block" in layer:
            for i in range(layer.get("repeat", 1)):
                out += ["%s.%d.%s" % (layer["name"], i, p["name"])
                        for p in model["blocks"][layer["block"]].get("params", [])]
        else:
            out += ["%s.%s" % (layer["name"], p["name"]) for p in layer.get("params", [])]
    return out


def python_checkpoint(tmp, model):
    """The MLP's four weights drawn here (LeCun normal, fp32) and written with
    struct + json; returns the path and the expected weights_sha256."""
    rng = random.Random(20261201)
    shapes = [("w_in", [16, 64]), ("hidden.0.w", [64, 64]), ("hidden.1.w", [64, 64]),
              ("w_out", [64, 10])]
    tensors = []
    for name, shape in shapes:
        std = 1 / math.sqrt(shape[0])
        vals = [rng.gauss(0, std) for _ in range(shape[0] * shape[1])]
        tensors.append((name, "F32", shape, struct.pack("<%df" % len(vals), *vals)))
    path = os.path.join(tmp, "py.safetensors")
    # written in reverse order: offsets, not header order, place the data
    write_st(path, tensors[::-1], metadata={"written_by": "test_model_weights.py"})
    by = {t[0]: t for t in tensors}
    return path, weights_sha([(k, by[k][1], by[k][3]) for k in weight_order(model)])


def test_python_checkpoint(tmp):
    job = suite_job("mlp-classifier", "fp32")
    path, want = python_checkpoint(tmp, job["model"])
    p, res = run(tmp, with_weights(job, path))
    c = res["cases"][0] if res else {}
    ok(p.returncode == 0 and res["verdict"] == "passed",
       "MLP from a checkpoint written by Python: passed (rc %d)" % p.returncode, p.stderr)
    ok(c.get("weights_sha256") == want,
       "the worker used the bytes written, bit for bit (weights_sha256 recomputed here)",
       "%s vs %s" % (c.get("weights_sha256"), want))
    w = (res or {}).get("weights", {})
    ok(w.get("source") == "safetensors" and w.get("tensors_read") == 4 and
       w.get("extra_count") == 0 and w.get("metadata", {}).get("written_by"),
       "the result's weights: source, 4 tensors read, none extra, the file's metadata", w)
    with open(path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    p, res = run(tmp, with_weights(job, path, sha256=sha.upper()))
    ok(p.returncode == 0 and res["weights"]["sha256_checked"] and res["weights"]["sha256"] == sha,
       "the file's sha256 given (upper case): checked and passed", p.stderr)
    seeded_p, seeded = run(tmp, job)
    ok(seeded and seeded["cases"][0]["weights_sha256"] != want and
       seeded["weights"] == {"source": "seed"},
       "the seeded run used other weights (the hash tells them apart)")


def test_names_map(tmp):
    """LM weights exported, renamed to an HF-like scheme, read through names."""
    job = suite_job("decoder-lm", "fp32")
    ck = os.path.join(tmp, "lm.safetensors")
    p, info = export(tmp, job, ck)
    tensors, _ = read_st(ck)

    def rename(name):
        parts = name.split(".")
        if parts[0] == "decoder" and len(parts) == 3:
            return "model.layers.%s.%s" % (parts[1], parts[2])
        return "model." + name

    blocks = [t for t in tensors if t[0].startswith("decoder.")]
    renamed = [(rename(t[0]),) + t[1:] for t in tensors]
    renamed.append(("lm_head.unused_bias", "F32", [4], struct.pack("<4f", 0, 1, 2, 3)))
    path = os.path.join(tmp, "lm-hf.safetensors")
    write_st(path, renamed)
    names = {"decoder.*.%s" % n: "model.layers.*.%s" % n
             for n in sorted({t[0].split(".")[2] for t in blocks})}
    for t in tensors:
        if not t[0].startswith("decoder."):
            names[t[0]] = "model." + t[0]
    p_seed, seeded = run(tmp, job)
    p, res = run(tmp, with_weights(job, path, names=names))
    ok(p.returncode == 0 and len(blocks) > 0 and res and
       timeless(res["cases"][0]) == timeless(seeded["cases"][0]),
       "LM from renamed tensors through \"names\" ('*' over %d block tensors): the seeded "
       "case, bit for bit" % len(blocks), p.stderr)
    w = (res or {}).get("weights", {})
    ok(w.get("extra") == ["lm_head.unused_bias"] and w.get("extra_count") == 1 and
       "read by no parameter" in " ".join(w.get("warnings", [])),
       "the extra tensor is reported with a warning", w)
    del names["decoder.*.%s" % blocks[0][0].split(".")[2]]
    p, _ = run(tmp, with_weights(job, path, names=names))
    ok(p.returncode == 2 and "no tensor '%s'" % blocks[0][0] in p.stderr and
       "'%s'" % blocks[0][0] in p.stderr,
       "a pattern left out: the block's own name is looked up and reported missing",
       p.stderr)


def test_round_trip(tmp):
    for model in ("mlp-classifier", "decoder-lm"):
        for dt in ("fp32", "bf16"):
            job = suite_job(model, dt, seed=11)
            ck = os.path.join(tmp, "%s-%s.safetensors" % (model, dt))
            p, info = export(tmp, job, ck)
            ok(p.returncode == 0 and info["dtype"] == dt, "export %s %s" % (model, dt), p.stderr)
            p1, seeded = run(tmp, job)
            p2, fromck = run(tmp, with_weights(job, ck, sha256=info["sha256"]))
            ok(seeded and fromck and seeded["verdict"] == fromck["verdict"] and
               timeless(seeded["cases"][0]) == timeless(fromck["cases"][0]) and
               fromck["weights"]["sha256_checked"],
               "%s %s: the run from the export has the seeded verdict (%s) and the same case "
               "bit for bit (weights_sha256 %s)" %
               (model, dt, seeded and seeded["verdict"],
                fromck and fromck["cases"][0].get("weights_sha256", "")[:12]),
               p2.stderr)
    # negative control: one bit of one weight flipped
    job = suite_job("mlp-classifier", "fp32", seed=11)
    ck = os.path.join(tmp, "mlp-classifier-fp32.safetensors")
    tensors, meta = read_st(ck)
    name, dt, shape, data = tensors[0]
    tensors[0] = (name, dt, shape, bytes([data[0] ^ 1]) + data[1:])
    flipped = os.path.join(tmp, "flipped.safetensors")
    write_st(flipped, tensors, metadata=meta)
    _, seeded = run(tmp, job)
    _, res = run(tmp, with_weights(job, flipped))
    ok(res and res["cases"][0]["weights_sha256"] != seeded["cases"][0]["weights_sha256"],
       "one flipped bit in '%s' changes weights_sha256 (the comparison can fail)" % name)
    p, info = export(tmp, job, os.path.join(tmp, "x.safetensors"), "--sample", "100")
    ok(p.returncode == 2 and "--sample" in p.stderr, "export: --sample out of range refused",
       p.stderr)


def bad_cases(tmp):
    job = suite_job("mlp-classifier", "fp32")
    path, _ = python_checkpoint(tmp, job["model"])
    tensors, meta = read_st(path)
    by = {t[0]: t for t in tensors}
    cases = []

    def variant(label, tensors=None, header=None, cut=None, job_override=None, backend="emu",
                want=()):
        p = os.path.join(tmp, "bad-%d.safetensors" % len(cases))
        write_st(p, tensors if tensors is not None else by.values(), header=header)
        if cut:
            with open(p, "rb") as f:
                buf = f.read()
            with open(p, "wb") as f:
                f.write(buf[:len(buf) - cut])
        cases.append((label, p, job_override, backend, want))

    order = list(by.values())
    last = order[-1][0]
    variant("truncated (the last 100 bytes cut)", cut=100,
            want=("tensor '%s'" % last, "past the", "truncated"))
    h = {}
    at = 0
    for name, dt, shape, data in order:
        h[name] = {"dtype": dt, "shape": shape, "data_offsets": [at, at + len(data)]}
        at += len(data)
    lie = copy.deepcopy(h)
    lie["w_out"]["shape"] = [64, 11]
    variant("header lies about a size", header=lie,
            want=("tensor 'w_out'", "needs %d" % (64 * 11 * 4), "hold %d" % (64 * 10 * 4)))
    unk = copy.deepcopy(h)
    unk["hidden.0.w"]["dtype"] = "F31"
    variant("unknown dtype", header=unk, want=("tensor 'hidden.0.w'", "unknown dtype 'F31'"))
    ov = copy.deepcopy(h)
    a, b = order[0][0], order[1][0]
    ov[b]["data_offsets"] = [ov[b]["data_offsets"][0] - 4, ov[b]["data_offsets"][1] - 4]
    variant("overlapping offsets", header=ov, want=("tensor '%s'" % b, "overlap", a))
    bf = [(name, "BF16", shape, b"".join(data[k + 2:k + 4] for k in range(0, len(data), 4)))
          for name, dt, shape, data in order]
    variant("BF16 checkpoint, fp32 job", tensors=bf,
            want=("tensor 'w_in'", "BF16", "fp32", "dtype scheme mismatch", "never casts"))
    variant("fp32 checkpoint, fp32 job, device declares bf16 storage", backend="emu:storage=bf16",
            want=("dtype scheme mismatch", "storage bf16", "F32"))
    variant("a weight missing", tensors=[t for t in order if t[0] != "w_in"],
            want=("no tensor 'w_in'", "parameter 'w_in'"))
    shp = [(t[0], t[1], [64, 16] if t[0] == "w_in" else t[2], t[3]) for t in order]
    variant("a weight of the wrong shape", tensors=shp,
            want=("tensor 'w_in'", "shape [64, 16]", "parameter is [16, 64]"))
    nan = [(t[0], t[1], t[2], t[3][:8] + struct.pack("<f", float("nan")) + t[3][12:])
           if t[0] == "hidden.1.w" else t for t in order]
    variant("NaN in a weight", tensors=nan, want=("tensor 'hidden.1.w'", "element 2",
                                                   "Inf or NaN"))
    # a duplicate key cannot be made with a dict: splice the header text
    text = json.dumps(h)
    dup = text[:-1] + ', "w_in": ' + json.dumps(h["w_in"]) + "}"
    p = os.path.join(tmp, "bad-dup.safetensors")
    with open(p, "wb") as f:
        f.write(struct.pack("<Q", len(dup)) + dup.encode() + b"".join(t[3] for t in order))
    cases.append(("a tensor named twice", p, None, "emu", ("twice", '"w_in"')))
    cases.append(("a wrong sha256", path, {"sha256": "0" * 64}, "emu",
                  ("SHA-256", "0" * 64)))
    return job, cases


def test_bad(tmp):
    job, cases = bad_cases(tmp)
    for label, path, extra, backend, want in cases:
        p, res = run(tmp, with_weights(job, path, **(extra or {})), backend=backend)
        missing = [w for w in want if w not in p.stderr]
        ok(p.returncode == 2 and path in p.stderr and not missing and res is None,
           "bad checkpoint, %s: exit 2, the error names the file and %s" %
           (label, want[0]), "rc %d; missing %s; stderr: %s" % (p.returncode, missing, p.stderr))
    # the field itself is checked by the spec parser (numvald runs it too)
    for label, weights, ptr in [
            ("a names key that is no weight", {"safetensors": "x", "names": {"nope": "a"}},
             "/weights/names/nope"),
            ("a pattern with a '*' on one side", {"safetensors": "x",
                                                  "names": {"hidden.*.w": "layers.w"}},
             "/weights/names/hidden.*.w"),
            ("a sha256 that is not 64 hex digits", {"safetensors": "x", "sha256": "abc"},
             "/weights/sha256"),
            ("an unknown key", {"safetensors": "x", "mmap": True}, "/weights/mmap"),
            ("no path", {"sha256": "0" * 64}, "/weights/safetensors")]:
        j = copy.deepcopy(job)
        j["weights"] = weights
        p, _ = run(tmp, j)
        ok(p.returncode == 2 and ptr in p.stderr, "spec: %s refused at %s" % (label, ptr),
           p.stderr)
    p, _ = run(tmp, with_weights(job, os.path.join(tmp, "absent.safetensors")))
    ok(p.returncode == 2 and "absent.safetensors" in p.stderr and "cannot be read" in p.stderr,
       "a checkpoint that is not there: named", p.stderr)


def main():
    tmp = tempfile.mkdtemp(prefix="nv-weights-")
    try:
        test_python_checkpoint(tmp)
        test_names_map(tmp)
        test_round_trip(tmp)
        test_bad(tmp)
        bad = [e for r in results for e in nvschema.errors(RESULT, r)]
        ok(results and not bad, "the %d results (seeded and from checkpoints) are valid "
           "model_result documents (schema/result.schema.json)" % len(results), "\n".join(bad))
        broken = copy.deepcopy(results[0])
        broken["cases"][0]["weights_sha256"] = "not a hash"
        ok(nvschema.errors(RESULT, broken), "a case with a bad weights_sha256 is invalid "
           "(the validation can fail)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
