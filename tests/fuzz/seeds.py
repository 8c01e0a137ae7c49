#!/usr/bin/env python3
"""Write the fuzz targets' seed corpora under tests/fuzz/corpus/ (committed; rerun
when the formats change). Usage: tests/fuzz/seeds.py [BUILD_DIR]

  spec/      every job of suites/*.json, the JSON examples of docs/JOBS.md, and
             specs at the edges of the documented limits (2^27 elements,
             1024 shapes, 100000 cases), valid and just past them
  http/      requests as clients send them (numvalctl, the worker, a browser):
             GET with a query and a token, POST with a job body, chunked, PUT
             with Expect: 100-continue, HEAD with If-None-Match, pipelining,
             keep-alive and Connection: close
  exec/      harness replies as docs/EXEC_PROTOCOL.md shows them: ok with one or
             three tensors, an error reply, a fallback reply
  artifact/  artifacts numval-worker writes for failing cases (an op and a fused
             job on a faulty emu mode; BUILD_DIR/worker/numval-worker, default
             build), each also decompressed (the target compresses inputs that
             are not zstd frames), and the hand-built container of
             tests/unit/common/test-artifact.c
  safetensors/  checkpoints as model jobs read them: a small hand-built file
             (F32, BF16, an empty tensor, metadata, padding), the decoder LM's
             weights as numval-worker export-weights writes them, and one of
             each bad class of tests/unit/common/test-safetensors.c
  regress-*  in each: the inputs that found bugs, replayed by every run
"""
import glob
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fuzz", "corpus")


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def compact(j):
    return json.dumps(j, separators=(",", ":"), sort_keys=True)


def spec_seeds():
    for path in sorted(glob.glob(os.path.join(ROOT, "suites", "*.json"))):
        suite = json.load(open(path))
        if not isinstance(suite, dict) or "jobs" not in suite:
            continue
        base = os.path.basename(path)[:-5]
        for i, job in enumerate(suite["jobs"]):
            what = job.get("op") or job.get("name") or job.get("kind")
            put("spec", "suite-%s-%02d-%s.json" % (base, i, re.sub(r"[^a-z0-9_]", "_", what)),
                compact(job))
    text = open(os.path.join(ROOT, "docs", "JOBS.md")).read()
    n = 0
    for block in re.findall(r"```(?:json)?\n(.*?)```", text, re.S):
        try:
            j = json.loads(block)
        except ValueError:
            continue
        if isinstance(j, dict) and "kind" in j and "verdict" not in j:
            put("spec", "jobs-md-%d-%s.json" % (n, j["kind"]), compact(j))
            n += 1
    # Edges of the limits (docs/JOBS.md): at them and one past.
    edges = {
        "limit-elements-at": {"kind": "op", "op": "exp", "dtypes": ["fp32"],
                              "shapes": [[134217728]]},
        "limit-elements-2d-past": {"kind": "op", "op": "exp", "dtypes": ["fp32"],
                                   "shapes": [[2, 67108865]]},
        "limit-matmul-output-at": {"kind": "op", "op": "matmul", "dtypes": ["fp32"],
                                   "shapes": [[8192, 1, 16384]]},
        "limit-rank-8": {"kind": "op", "op": "add", "dtypes": ["fp32"],
                         "shapes": [[2, 2, 2, 2, 2, 2, 2, 2]]},
        "limit-cases-past": {"kind": "op", "op": "exp", "dtypes": ["fp32", "bf16"],
                             "shapes": [[4]], "samples": 1000,
                             "inputs": ["normal", "uniform", "near_zero", "large", "specials",
                                        "midpoints", "domain_edges", "cancellation"],
                             "layouts": ["contiguous", "transposed", "strided"]},
        "limit-gradient-full-past": {"kind": "gradient", "op": "softmax", "dtypes": ["fp32"],
                                     "shapes": [[4, 4097]], "mode": "full"},
        "limit-gradient-fast-at": {"kind": "gradient", "op": "layer_norm", "dtypes": ["fp32"],
                                   "shapes": [[1024, 131072]], "mode": "fast"},
        "expect-error": {"kind": "op", "op": "add", "dtypes": ["fp32", "fp16"],
                         "shapes": [[3, 5]], "expect_error": {"case": ["shape_mismatch",
                                                                      "wrong_dtype"]}},
        "suite": {"kind": "suite", "device": "gpu0"},
    }
    for name, j in edges.items():
        put("spec", name + ".json", compact(j))


def http_seeds():
    job = compact({"kind": "op", "op": "exp", "dtypes": ["fp32"], "shapes": [[4096]], "seed": 7})
    tok = "Authorization: Bearer nvt_0123456789abcdef0123456789abcdef\r\n"
    reqs = {
        "healthz": "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n",
        "jobs-list": "GET /api/v1/jobs?state=queued&limit=10 HTTP/1.1\r\nHost: x\r\n" + tok +
                     "Accept: application/json\r\n\r\n",
        "submit": "POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\n" + tok +
                  "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(job), job),
        "submit-chunked": "POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\n" + tok +
                          "Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(job), job),
        "artifact-put": "PUT /api/v1/worker/artifacts/" + "ab" * 32 + " HTTP/1.1\r\nHost: x\r\n" +
                        tok + "Expect: 100-continue\r\nContent-Length: 16\r\n\r\n" +
                        "\x28\xb5\x2f\xfd" + "0123456789ab",
        "head-etag": "HEAD /api/v1/jobs/42 HTTP/1.1\r\nHost: x\r\n"
                     "If-None-Match: W/\"0123\", \"abcd\"\r\n\r\n",
        "pipelined": "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                     "GET /api/v1/cases?limit=5%20 HTTP/1.1\r\nHost: x\r\n\r\n"
                     "GET /e/missing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        "http10": "GET /metrics HTTP/1.0\r\n\r\n",
        "percent-path": "GET /api/v1/jobs/%41%42?x=%00 HTTP/1.1\r\nHost: x\r\n\r\n",
        "claim": "POST /api/v1/worker/claim HTTP/1.1\r\nHost: x\r\n" + tok +
                 "Content-Type: application/json\r\nContent-Length: 18\r\n\r\n{\"device\":\"emu0\"}\n",
        "folded-header": "GET / HTTP/1.1\r\nHost: x\r\nX-Long: a\r\n b\r\n\r\n",
        "truncated-body": "POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"kind\"",
        # refused at the end of the headers (the fuzz owner's admit refuses /deny)
        "deny-before-body": "PUT /deny/artifacts/x HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n"
                            "\r\n123456789GET /healthz HTTP/1.1\r\n\r\n",
        "gzip-chunked": "POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked"
                        "\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        "huge-chunk": "POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                      "fffffff\r\nab",
        "bad-header-name": "GET /healthz HTTP/1.1\r\nBad Name: 1\r\n\r\n",
    }
    for name, r in reqs.items():
        put("http", name + ".txt", r.encode("latin-1"))


def frame(header, payload=b""):
    return compact(header).encode() + b"\n" + payload


def exec_seeds():
    f32 = struct.pack("<4f", 1.0, 2.0, -0.5, float("inf"))
    put("exec", "ok-one", frame({"type": "result", "id": 1, "status": "ok", "fallback": False,
                                 "tensors": [{"name": "output:0", "dtype": "fp32", "shape": [2, 2],
                                              "strides": [2, 1], "nbytes": 16}]}, f32))
    bf = struct.pack("<6H", 0x3F80, 0x4000, 0xBF00, 0x7F80, 0x7FC0, 0)
    put("exec", "ok-three", b"3\n" + frame(
        {"type": "result", "id": 1, "status": "ok", "autograd": "builtin",
         "tensors": [{"name": "grad_input:0", "dtype": "bf16", "shape": [3], "nbytes": 6},
                     {"name": "grad_input:1", "dtype": "fp64", "shape": [], "nbytes": 8},
                     {"name": "grad_input:2", "dtype": "int8", "shape": [2, 1], "nbytes": 2}]},
        bf[:6] + struct.pack("<d", 3.25) + b"\x01\xff"))
    put("exec", "error", frame({"type": "result", "id": 1, "status": "error", "code": "dtype",
                                "message": "\"exp\" not implemented for 'Half'"}))
    put("exec", "fallback", frame({"type": "result", "id": 1, "status": "ok", "fallback": True,
                                   "tensors": [{"name": "output:0", "dtype": "fp16", "shape": [2],
                                                "nbytes": 4}]}, b"\x00\x3c\x00\xc0"))
    put("exec", "hello-instead", frame({"type": "hello", "protocol": 1, "describe": {"device": "cpu"}}))


def artifact_from_worker(build):
    worker = os.path.join(build, "worker", "numval-worker")
    if not os.access(worker, os.X_OK):
        sys.exit("seeds.py: %s not built (ninja -C %s)" % (worker, build))
    jobs = {
        "op-exp": ({"kind": "op", "op": "exp", "dtypes": ["fp32"], "shapes": [[16]],
                    "inputs": ["normal", "domain_edges"], "seed": 3}, "emu:transcendental=fast"),
        "fused-mlp": ({"kind": "fused", "name": "mlp_epilogue",
                       "graph": {"inputs": [{"name": "x", "shape": [4, 16]},
                                            {"name": "w", "shape": [16, 8]},
                                            {"name": "bias", "shape": [4, 8]}],
                                 "nodes": [{"name": "mm", "op": "matmul", "inputs": ["x", "w"]},
                                           {"name": "pre", "op": "add", "inputs": ["mm", "bias"]},
                                           {"name": "y", "op": "gelu", "inputs": ["pre"]}],
                                 "outputs": ["y"]},
                       "dtypes": ["bf16"], "inputs": ["normal"]}, "emu:fused_intermediate=bf16"),
    }
    with tempfile.TemporaryDirectory(prefix="nv-seeds-") as tmp:
        for name, (job, backend) in jobs.items():
            jp = os.path.join(tmp, name + ".json")
            ad = os.path.join(tmp, name)
            os.mkdir(ad)
            with open(jp, "w") as f:
                json.dump(job, f)
            subprocess.run([worker, "run", jp, "--backend", backend, "--artifacts", ad],
                           stdout=subprocess.DEVNULL, check=False)
            arts = sorted(glob.glob(os.path.join(ad, "*.nvart")), key=os.path.getsize)
            if not arts:
                sys.exit("seeds.py: %s on %s wrote no artifact" % (name, backend))
            data = open(arts[0], "rb").read()
            put("artifact", name + ".nvart", data)
            raw = subprocess.run(["zstd", "-dc"], input=data, stdout=subprocess.PIPE,
                                 check=True).stdout
            put("artifact", name + ".raw", raw)
    hand = (b"NVARTF01" + struct.pack("<I", 7) + b'{"a":1}' + struct.pack("<I", 1) +
            struct.pack("<H", 1) + b"x" + struct.pack("<ii", 4, 1) + struct.pack("<q", 2) +
            struct.pack("<Q", 4) + b"\x00\x3c\x00\xc0")
    put("artifact", "hand-fp16.raw", hand)


def st_file(header, data=b"", pad=0):
    text = json.dumps(header, separators=(",", ":")).encode() + b" " * pad
    return struct.pack("<Q", len(text)) + text + data


def safetensors_seeds(build):
    good = {"__metadata__": {"format": "pt"},
            "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
            "b": {"dtype": "BF16", "shape": [2], "data_offsets": [8, 12]},
            "e": {"dtype": "I8", "shape": [0, 3], "data_offsets": [12, 12]}}
    data = struct.pack("<2f", 1.0, 2.0) + b"\x80\x3f\x00\x40"
    put("safetensors", "good.st", st_file(good, data, pad=5))
    bad = {
        "truncated.st": st_file(good, data[:6]),
        "size-lie.st": st_file(dict(good, a={"dtype": "F32", "shape": [3],
                                             "data_offsets": [0, 8]}), data),
        "unknown-dtype.st": st_file(dict(good, a={"dtype": "F33", "shape": [2],
                                                  "data_offsets": [0, 8]}), data),
        "overlap.st": st_file(dict(good, b={"dtype": "BF16", "shape": [2],
                                            "data_offsets": [6, 10]}), data),
        "hole.st": st_file(dict(good, b={"dtype": "BF16", "shape": [1],
                                         "data_offsets": [10, 12]}), data),
        "nan.st": st_file({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}},
                          struct.pack("<f", float("nan"))),
    }
    for name, blob in bad.items():
        put("safetensors", name, blob)
    worker = os.path.join(build, "worker", "numval-worker")
    if os.path.exists(worker):
        with open(os.path.join(ROOT, "suites", "model.json")) as f:
            lm = [j for j in json.load(f)["jobs"] if j["name"] == "decoder-lm"][0]
        with tempfile.TemporaryDirectory() as d:
            spec, out = os.path.join(d, "lm.json"), os.path.join(d, "lm.safetensors")
            with open(spec, "w") as f:
                json.dump(lm, f)
            subprocess.run([worker, "export-weights", spec, "-o", out, "--dtype", "bf16"],
                           check=True, capture_output=True)
            with open(out, "rb") as f:
                put("safetensors", "export-lm-bf16.st", f.read())


def regression_seeds():
    """Inputs that found bugs (docs/RELIABILITY.md "Findings"), replayed on every run."""
    # common/artifact.c allocated a frame's declared content size (here 2 GiB) before
    # decompressing: 17 bytes made every reader malloc 2 GiB.
    put("artifact", "regress-declared-2gib.zst",
        bytes.fromhex("28b52ffdc02a00000080000000000100") + b"\x00")
    # worker/backends/exec.c multiplied reply extents (each up to 2^32) unchecked.
    put("exec", "regress-extent-overflow",
        frame({"type": "result", "id": 1, "status": "ok",
               "tensors": [{"name": "output:0", "dtype": "fp32", "shape": [4294967296, 4294967296],
                            "nbytes": 0}]}))
    # daemon/http/http.c counted chunked trailer fields as headers after indexing
    # them: nvd_http_header read past the index (numvald crashed, SIGSEGV).
    put("http", "regress-chunked-trailers.txt",
        "POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        "1\r\na\r\n0\r\nX-Trailer: y\r\nX-T2: z\r\n\r\n")


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
    spec_seeds()
    http_seeds()
    exec_seeds()
    artifact_from_worker(build)
    safetensors_seeds(build)
    regression_seeds()


if __name__ == "__main__":
    main()
