"""A minimal client of the exec harness protocol (docs/EXEC_PROTOCOL.md) for tests
and benchmarks that talk to worker/harness/torch_harness.py directly."""
import json
import os
import subprocess

import numpy as np

TORCH_PY = "/usr/bin/python3"
NP = {"fp64": "<f8", "fp32": "<f4", "fp16": "<f2", "bf16": "<i2", "int32": "<i4", "int8": "i1"}


def torch_available():
    try:
        p = subprocess.run([TORCH_PY, "-c", "import torch, numpy"], capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return p.returncode == 0


class Harness:
    def __init__(self, root, *args, stderr=None):
        path = os.path.join(root, "worker/harness/torch_harness.py")
        self.p = subprocess.Popen([TORCH_PY, path] + list(args), stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=stderr or subprocess.DEVNULL)
        self.next_id = 0
        self._send({"type": "hello", "protocol": 2})
        self.hello, _ = self._recv()

    def _send(self, hdr, payloads=()):
        self.p.stdin.write((json.dumps(hdr) + "\n").encode())
        for b in payloads:
            self.p.stdin.write(b)
        self.p.stdin.flush()

    def _recv(self):
        line = self.p.stdout.readline()
        if not line:
            raise EOFError("harness closed its output")
        hdr = json.loads(line)
        arrays = []
        for d in hdr.get("tensors", []):
            raw = self.p.stdout.read(d["nbytes"])
            arrays.append(np.frombuffer(raw, dtype=NP[d["dtype"]]).reshape(d["shape"]))
        return hdr, arrays

    def call(self, hdr, arrays=(), strides=None):
        """Send hdr with arrays (numpy, dtype name from NP) as input:i; returns the
        reply header and its tensors as numpy arrays."""
        self.next_id += 1
        descs, payloads = [], []
        for i, (dt, a) in enumerate(arrays):
            a = np.ascontiguousarray(a, dtype=NP[dt])
            d = {"name": f"input:{i}", "dtype": dt, "shape": list(a.shape), "nbytes": a.nbytes}
            if strides and strides[i] is not None:
                d["strides"] = strides[i]
            descs.append(d)
            payloads.append(a.tobytes())
        self._send(dict(hdr, id=self.next_id, tensors=descs), payloads)
        return self._recv()

    def close(self):
        try:
            self._send({"type": "bye"})
            self.p.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.p.kill()
            self.p.wait()
