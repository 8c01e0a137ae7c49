#!/usr/bin/env python3
"""Random malformed requests for a fixed time (seeded, so a failure can be
replayed with NVD_FUZZ_SEED): mutated JSON bodies on every write route, odd
query strings and paths, and byte-mutated raw HTTP. numvald must answer or
close, never die, and exit cleanly afterwards (in the sanitizer build: with no
report)."""
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvdaemon import Daemon, check, main  # noqa: E402

SEED = int(os.environ.get("NVD_FUZZ_SEED", "1"))
SECONDS = float(os.environ.get("NVD_FUZZ_SECONDS", "15"))

GOOD = {"kind": "op", "op": "exp", "dtypes": ["fp32"], "shapes": [[8]], "inputs": ["normal"],
        "seed": 3}
ROUTES = [
    ("POST", "/api/v1/jobs", GOOD, "submit"),
    ("POST", "/api/v1/tolerances",
     {"op": "exp", "dtype": "bf16", "mode": "a=b",
      "tolerance": {"metric": "ulp", "max_ulp": 1, "reason_code": "stochastic", "reason": "r"}},
     "admin"),
    ("POST", "/api/v1/worker/claim",
     {"device": "d", "wait_ms": 10, "describe": {"mode": {"a": "b"}}}, "worker"),
    ("POST", "/api/v1/worker/heartbeat", {"job_id": 1, "lease_token": "x", "cases_done": 1},
     "worker"),
    ("POST", "/api/v1/worker/result",
     {"job_id": 1, "lease_token": "x",
      "result": {"verdict": "passed", "cases": [{"index": 0, "verdict": "passed",
                                                  "tolerance": {"version": 1}, "shape": [1]}]}},
     "worker"),
    ("POST", "/api/v1/jobs/1/cancel", None, "submit"),
]
GETS = ["/api/v1/jobs?state=queued&limit=5&cursor=", "/api/v1/jobs/1/cases?verdict=failed&cursor=",
        "/api/v1/tolerances?op=", "/api/v1/devices/", "/api/v1/cases/", "/api/v1/artifacts/",
        "/js/", "/", "/metrics"]
TAILS = ["", "1", "-1", "%", "%zz", "..", "a" * 100, "%2e%2e/", "9" * 30, "&limit=0",
         "&limit=99999"]
RAW = [b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
       b"POST /api/v1/jobs HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello",
       b"PUT /api/v1/worker/artifacts/abc HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
       b"5\r\nhello\r\n0\r\n\r\n"]
ODD = [None, True, 1, -1, 1e308, [], {}, "\u0000", "../..", 2 ** 63]


def mutate(v):
    if random.random() < 0.1:
        return random.choice(ODD + ["x" * random.randint(0, 300)])
    if isinstance(v, dict):
        v = dict(v)
        for k in list(v):
            if random.random() < 0.3:
                v[k] = mutate(v[k])
            if random.random() < 0.05:
                del v[k]
        if random.random() < 0.1:
            v[random.choice(["device", "priority", "build", "tolerance", "zz", "cases"])] = \
                mutate(1)
        return v
    if isinstance(v, list):
        return [mutate(x) for x in v] + ([mutate(1)] if random.random() < 0.1 else [])
    return v


def mutate_bytes(b):
    ba = bytearray(b)
    for _ in range(random.randint(1, 5)):
        i = random.randrange(len(ba))
        op = random.random()
        if op < 0.4:
            ba[i] = random.randrange(256)
        elif op < 0.7:
            del ba[i]
        else:
            ba[i:i] = bytes(random.randrange(256) for _ in range(random.randint(1, 20)))
    return bytes(ba)


def one(d):
    k = random.random()
    if k < 0.5:
        method, path, body, scope = random.choice(ROUTES)
        d.request(method, path, body=mutate(body) if body is not None else None, scope=scope,
                  timeout=5)
    elif k < 0.7:
        d.request("GET", random.choice(GETS) + random.choice(TAILS), timeout=5)
    else:
        d.raw(mutate_bytes(random.choice(RAW)), timeout=1)


def test(numvald):
    random.seed(SEED)
    with Daemon(numvald, limits={"header_timeout_ms": 500, "body_timeout_ms": 500}) as d:
        d.start()
        for s in ("admin", "worker", "submit"):
            d.token(s)
        d.request("POST", "/api/v1/jobs", body=GOOD, scope="submit")
        n = 0
        end = time.time() + SECONDS
        while time.time() < end:
            n += 1
            try:
                one(d)
            except (OSError, ValueError):
                pass  # refused or reset is fine, as long as the daemon lives
            if not d.alive():
                check(False, "numvald died at request %d (seed %d)" % (n, SEED))
        st, _, _ = d.request("GET", "/healthz")
        check(st == 200, "%d random requests (seed %d): /healthz still 200" % (n, SEED))
        rc, reports = d.stop()
        check(rc == 0 and not reports, "clean exit, no sanitizer report (%s %s)" %
              (rc, reports[:3]))


if __name__ == "__main__":
    main(test)
