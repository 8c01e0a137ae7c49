#!/usr/bin/env python3
"""RNG jobs through the service: numvald validates an RNG spec at submit time
(a bad one is a 400 naming the field, and nothing is stored), a supervised emu
worker runs the shipped suite's first job and the daemon stores its result and
cases like any kind's; on a device whose restore reuses the stream
(emu:rng_restore=reuse) the stored job failed and its stored state case names
the failure class and keeps the case's tests.

usage: test_rng_service.py NUMVALD NUMVAL-WORKER NUMVALCTL SOURCE_ROOT"""
import json
import os
import sys

from nvservice import Service, check, main

ROOT = sys.argv[4] if len(sys.argv) > 4 else "."


def test(bins):
    with open(os.path.join(ROOT, "suites", "rng.json")) as f:
        job = json.load(f)["jobs"][0]
    with Service(bins, devices={"emu0": "emu", "reuse0": "emu:rng_restore=reuse"}) as s:
        s.start_daemon()
        st, body = s.api("POST", "/api/v1/jobs", dict(job, device="emu0", streams=1),
                         scope="submit")
        err = body.get("error", {}) if isinstance(body, dict) else {}
        check(st == 400 and err.get("field") == "/streams", "a bad RNG spec: 400 at /streams: %s"
              % body)
        st, lst = s.api("GET", "/api/v1/jobs?limit=10", scope="read")
        check(st == 200 and lst["jobs"] == [], "the refused spec stored nothing")
        ids = {}
        for dev in ("emu0", "reuse0"):
            st, body = s.api("POST", "/api/v1/jobs", dict(job, device=dev), scope="submit")
            check(st == 201, "an RNG job for %s accepted: %s" % (dev, st))
            ids[dev] = body["job"]["id"]
        jobs = s.wait_jobs(list(ids.values()), timeout=240)
        good, broken = jobs[ids["emu0"]], jobs[ids["reuse0"]]
        res = good.get("result") or {}
        check(good["state"] == "passed" and res.get("kind") == "rng"
              and res.get("summary", {}).get("passed") == 7,
              "the emu worker's RNG job passed with 7 cases: %s %s"
              % (good["state"], res.get("summary")))
        cases = s.cases(ids["emu0"])
        check(len(cases) == 7 and all(c.get("verdict") == "passed" for c in cases),
              "its 7 cases are stored: %s" % [c.get("verdict") for c in cases])
        check(broken["state"] == "failed", "the job on the reusing device failed: %s"
              % broken["state"])
        stored = s.cases(ids["reuse0"])
        classes = sorted(c.get("failure_class") or "" for c in stored if c.get("verdict") == "failed")
        check(classes == ["dropout_not_reproducible", "dropout_not_reproducible",
                          "restore_reuses_stream"],
              "the stored failed cases name their classes: %s" % classes)
        st_case = [c for c in stored if c.get("check") == "state"]
        check(st_case and st_case[0]["failure_class"] == "restore_reuses_stream"
              and any(t["name"] == "restore_continues" and not t["passed"]
                      for t in st_case[0]["tests"]),
              "the stored state case keeps its tests, restore_continues failed")


if __name__ == "__main__":
    sys.argv = sys.argv[:4]
    main(test)
