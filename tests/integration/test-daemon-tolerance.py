#!/usr/bin/env python3
"""Tolerances: a change without a reason is refused; with one it becomes a new
version (the old one kept unchanged), claims carry it, and the cases judged
by it record its version. The worker is played over the API here; the
end-to-end run with a real worker is in the agent's tests."""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvdaemon import Daemon, check, main  # noqa: E402


def tol(max_ulp, code="approximation_error", reason="device exp documented to N ulp"):
    t = {"metric": "ulp", "max_ulp": max_ulp}
    if code is not None:
        t["reason_code"] = code
    if reason is not None:
        t["reason"] = reason
    return {"op": "exp", "dtype": "bf16", "tolerance": t}


def test(numvald):
    with Daemon(numvald) as d:
        d.start()
        post = lambda body: d.request("POST", "/api/v1/tolerances", body=body, scope="admin")
        st, b, _ = post(tol(1, reason=None))
        check(st == 400 and b["error"]["field"] == "/tolerance/reason",
              "no reason -> 400 naming /tolerance/reason (%s)" % b)
        st, b, _ = post(tol(1, reason="   "))
        check(st == 400 and b["error"]["field"] == "/tolerance/reason", "blank reason -> 400")
        st, b, _ = post(tol(1, code=None))
        check(st == 400 and b["error"]["field"] == "/tolerance/reason_code",
              "no reason_code -> 400 naming /tolerance/reason_code")
        st, b, _ = post(tol(1, code="because"))
        check(st == 400 and "because" in b["error"]["message"], "unknown reason_code named")
        st, b, _ = d.request("GET", "/api/v1/tolerances/history?op=exp")
        check(st == 200 and b["tolerances"] == [], "nothing stored by refused changes")

        st, b, _ = post(tol(1, reason="exp is 1 ulp on this device"))
        check(st == 201 and b["tolerance"]["version"] == 1, "first change -> version 1")
        v1 = b["tolerance"]
        check(v1["author"] == "it-admin", "author is the token's name")
        st, b, _ = post(tol(2, reason="firmware 2.1 exp is 2 ulp (vendor note 17)"))
        check(st == 201 and b["tolerance"]["version"] == 2, "second change -> version 2")
        st, b, _ = d.request("GET", "/api/v1/tolerances/history?op=exp&dtype=bf16")
        rows = b["tolerances"]
        check([r["version"] for r in rows] == [2, 1], "history: versions 2 and 1")
        check(rows[1] == v1, "version 1 unchanged")
        st, b, _ = d.request("GET", "/api/v1/tolerances?op=exp")
        check(len(b["tolerances"]) == 1 and b["tolerances"][0]["version"] == 2,
              "current tolerance is version 2")

        # A worker already waiting in a long poll gets the job as soon as it is
        # submitted (the poll would last 10 s).
        got = {}

        def poll():
            t = time.time()
            got["resp"] = d.request("POST", "/api/v1/worker/claim", scope="worker",
                                    body={"device": "emu0", "wait_ms": 10000})
            got["secs"] = time.time() - t
        th = threading.Thread(target=poll)
        th.start()
        time.sleep(0.5)
        spec = {"kind": "op", "op": "exp", "dtypes": ["bf16"], "shapes": [[8]], "seed": 1}
        st, b, _ = d.request("POST", "/api/v1/jobs", body=spec, scope="submit")
        jid = b["job"]["id"]
        th.join(15)
        st, b, _ = got["resp"]
        check(st == 200 and b["job"]["id"] == jid and got["secs"] < 3,
              "the waiting claim woke on submit (%.2f s)" % got["secs"])
        job = b["job"]
        t = job["spec"]["tolerance_by_dtype"]["bf16"]
        check(st == 200 and t["version"] == 2 and t["max_ulp"] == 2 and t["reason"],
              "the claimed spec carries version 2 with its reason")
        case = {"index": 0, "verdict": "passed", "op": "exp", "dtype": "bf16", "max_ulp": 1.5,
                "tolerance": dict(t)}
        st, b, _ = d.request("POST", "/api/v1/worker/result", scope="worker",
                             body={"job_id": jid, "lease_token": job["lease_token"],
                                   "result": {"verdict": "passed", "cases": [case]}})
        check(st == 200 and b["job"]["state"] == "passed", "result stored")
        st, b, _ = d.request("GET", "/api/v1/jobs/%d/cases" % jid)
        check(b["cases"][0]["tolerance_version"] == 2, "the case records tolerance version 2")


if __name__ == "__main__":
    main(test)
