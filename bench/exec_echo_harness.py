#!/usr/bin/python3
"""A harness of the exec protocol (docs/EXEC_PROTOCOL.md) that computes almost
nothing: fp32 neg by flipping sign bits with one big-integer XOR. Benchmarks use it
to isolate the protocol's own cost (pipes, framing, JSON headers, copies) from a
runtime's compute. numpy for the XOR (Debian's /usr/bin/python3)."""
import atexit
import json
import os
import resource
import sys

import numpy as np

inp, out = sys.stdin.buffer, sys.stdout.buffer


AT_HELLO = None


def report_rusage(path):
    r = resource.getrusage(resource.RUSAGE_SELF)
    t0 = AT_HELLO or (0.0, 0.0)  # start-up (imports) is not the protocol's cost
    with open(path, "a") as f:
        f.write(f"{r.ru_utime - t0[0]} {r.ru_stime - t0[1]}\n")


if os.environ.get("NUMVAL_HARNESS_RUSAGE"):  # benchmarks: CPU seconds at exit
    atexit.register(report_rusage, os.environ["NUMVAL_HARNESS_RUSAGE"])


def send(hdr, payload=b""):
    out.write((json.dumps(hdr, separators=(",", ":")) + "\n").encode() + payload)
    out.flush()


hello = json.loads(inp.readline())
send({"type": "hello", "protocol": 1,
      "describe": {"device": "echo", "build": {"name": "exec-echo", "version": "1"},
                   "mode": {}, "contract": {}, "inference_only": True,
                   "nondeterministic_ops": [], "saved": {}}})
_r = resource.getrusage(resource.RUSAGE_SELF)
AT_HELLO = (_r.ru_utime, _r.ru_stime)
while True:
    line = inp.readline()
    if not line:
        break
    msg = json.loads(line)
    if msg["type"] == "bye":
        break
    raws = [inp.read(t["nbytes"]) for t in msg.get("tensors", [])]
    t = msg["tensors"][0] if msg.get("tensors") else None
    if msg["type"] != "forward" or msg["op"] != "neg" or t["dtype"] != "fp32":
        send({"type": "result", "id": msg["id"], "status": "error", "code": "unsupported",
              "message": "the echo harness only does fp32 neg"})
        continue
    n = t["nbytes"]
    raw = (np.frombuffer(raws[0], dtype="<u4") ^ np.uint32(0x80000000)).tobytes()
    send({"type": "result", "id": msg["id"], "status": "ok", "fallback": False,
          "tensors": [{"name": "output:0", "dtype": "fp32", "shape": t["shape"],
                       "strides": [], "nbytes": n}]}, raw)
