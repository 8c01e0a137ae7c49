#!/usr/bin/env python3
"""Regression bisection over registered builds, with real processes.

One plugin source (plugin_dropsum.c) is built 16 times, build N with
-DNVTEST_BUILD=N: builds 1..10 sum correctly, builds 11..16 drop element 5000 of
a long axis. The 16 builds are registered in order, each naming its plugin
("plugin:/.../bN.so"), and one worker admits plugins from that directory alone
(--build-backend-dir). A failing op job on build 16 promotes the fault into the
suite; `numvalctl bisect CASE --good b1 --bad b16` must name build 11 after at
most 5 probe runs (log2(16) = 4 suffice), every probe a stored suite job whose
verdict agrees with the build number (the oracle: the fault is on from 11).

Also: a build's backend is never changed (409); a plugin outside the allowed
directory, or reached through a symbolic link out of it, is refused by the
worker with an error naming --build-backend-dir; a later build that passes
(b22, the plugin of build 5) is reported as non-monotone evidence (exit 1).
The daemon-side driver (POST /api/v1/bisections, numvalctl bisect --daemon)
finds build 11 too, also across a kill -9 and restart of numvald.

usage: test_bisect.py NUMVALD NUMVAL-WORKER NUMVALCTL PLUGIN_B1 ... PLUGIN_B16"""
import json
import os
import shutil
import sys
import time

from nvservice import Service, check, main

PLUGINS = sys.argv[4:]
del sys.argv[4:]
FAULT_FROM = 11

# As in test_suite_promote.py: the pairwise bound (Higham 4.2) is the stored
# tolerance of sum/fp32, so the dropped element fails it and the failure is
# promoted; a correct fp64-accumulated sum is far inside it. Two rows of 8192:
# the fault needs an axis longer than 4096, and two rows keep the job cheap.
SUM = {"kind": "op", "op": "sum", "dtypes": ["fp32"], "shapes": [[2, 8192]],
       "inputs": ["normal"], "seed": 11, "attrs": {"axis": -1}}
PAIRWISE = {"op": "sum", "dtype": "fp32",
            "tolerance": {"metric": "bound", "c": 1, "growth": "log2n",
                          "reason_code": "reduction_length",
                          "reason": "pairwise-or-better fp32 summation, Higham 4.2"}}


def build(n):
    return {"name": "kernels", "version": "b%d" % n}


def test(bins):
    check(len(PLUGINS) == 16, "16 plugin builds given")
    with Service(bins, lease_ms=4000) as s:
        lab = os.path.join(s.tmp, "lab")
        os.mkdir(lab)
        paths = []
        for n, src in enumerate(PLUGINS, 1):
            paths.append(os.path.join(lab, "b%d.so" % n))
            shutil.copy(src, paths[-1])
        # A device numvald supervises, admitted the same directory by its config.
        with open(s.conf, "a") as f:
            f.write("\n[device sup]\nbackend = emu\nslots = 1\nbuild_backend_dir = %s\n" % lab)
        s.start_daemon()
        s.start_worker("dev", "emu", extra=["--build-backend-dir", lab])
        st, _ = s.api("POST", "/api/v1/tolerances", PAIRWISE)
        check(st == 201, "stored tolerance sum/fp32: the pairwise bound")

        for n in range(1, 17):
            p = s.ctl("builds", "register", "--name", "kernels", "--version", "b%d" % n,
                      "--backend", "plugin:" + paths[n - 1], token_scope="admin")
            if p.returncode != 0:
                check(False, "register b%d: %s" % (n, p.stderr))
        check(True, "16 builds registered with numvalctl builds register")
        st, body = s.api("GET", "/api/v1/builds", scope="read")
        order = [b["identity"]["version"] for b in reversed(body["builds"])]
        check(order == ["b%d" % n for n in range(1, 17)], "registration order kept: %s" % order)
        check(all(b["backend"] == "plugin:" + paths[int(b["identity"]["version"][1:]) - 1]
                  for b in body["builds"]), "GET /api/v1/builds names each build's backend")
        st, body = s.api("POST", "/api/v1/builds", {"build": build(3),
                                                    "backend": "plugin:" + paths[0]})
        check(st == 409 and body["error"]["field"] == "/backend",
              "another backend for a registered build: 409")
        st, body = s.api("POST", "/api/v1/builds", {"build": build(3),
                                                    "backend": "plugin:" + paths[2]})
        check(st == 200, "registering the same backend again: 200")
        st, body = s.api("POST", "/api/v1/builds", {"build": build(99), "backend": "lib.so"})
        check(st == 400 and body["error"]["field"] == "/backend", "a backend without kind: 400")
        st, body = s.api("POST", "/api/v1/builds", {"build": build(99),
                                                    "backend": "plugin:" + paths[0]},
                         scope="submit")
        check(st == 403, "registering a build needs scope admin")

        # The failure that becomes suite case 1, found on the newest build.
        st, body = s.api("POST", "/api/v1/jobs", dict(SUM, device="dev", build=build(16)),
                         scope="submit")
        check(st == 201, "op job on b16 submitted")
        job = s.wait_jobs([body["job"]["id"]], 240)[body["job"]["id"]]
        check(job["state"] == "failed", "the sum job fails on b16 (its plugin has the fault)")
        st, suite = s.api("GET", "/api/v1/suite", scope="read")
        check(st == 200 and len(suite["suite"]) == 1, "promoted: one suite case")
        case_id = suite["suite"][0]["id"]

        p = s.ctl("--json", "bisect", str(case_id), "--good", "b1", "--bad", "b16",
                  "--device", "dev", "--timeout", "240")
        check(p.returncode == 0, "numvalctl bisect exits 0 (%s)" % p.stderr.strip()[-500:])
        res = json.loads(p.stdout)
        ff = res["first_failing_build"]["identity"]["version"]
        check(ff == "b%d" % FAULT_FROM, "first failing build: %s" % ff)
        check(res["last_passing_build"]["identity"]["version"] == "b%d" % (FAULT_FROM - 1),
              "last passing build: b10")
        probes = res["probes"]
        check(1 <= len(probes) <= 5 and res["runs"] == len(probes),
              "%d probe runs (at most 5)" % len(probes))
        check(res["non_monotone"] == [], "no non-monotone evidence")
        seen = set()
        for pr in probes:
            n = int(pr["build"]["identity"]["version"][1:])
            want = "failed" if n >= FAULT_FROM else "passed"
            j = s.job(pr["job_id"])
            check(j["kind"] == "suite" and j["build_id"] == pr["build"]["id"] and
                  j["state"] == pr["verdict"] == want and j["device"] == "dev",
                  "probe b%d: stored suite job %s, %s" % (n, pr["job_id"], j["state"]))
            seen.add(n)
        check(len(seen) == len(probes) and not seen & {1, 16}, "each build probed once, "
              "endpoints not re-run: %s" % sorted(seen))

        # Daemon-side: numvald drives the search, and a kill -9 of numvald in the
        # middle loses nothing (the state is in the store; the timer resumes it).
        st, body = s.api("POST", "/api/v1/bisections", {"suite_case": case_id, "good": "b1",
                                                         "bad": "b16", "device": "dev"},
                         scope="submit")
        check(st == 201 and body["bisection"]["state"] == "running" and
              body["bisection"]["current_job"] is not None,
              "POST /api/v1/bisections: running, first probe submitted")
        bid = body["bisection"]["id"]
        s.kill_daemon()
        s.start_daemon()
        deadline = time.time() + 300
        while time.time() < deadline:
            st, body = s.api("GET", "/api/v1/bisections/%d" % bid, scope="read")
            if body["bisection"]["state"] != "running":
                break
            time.sleep(0.5)
        v = body["bisection"]
        check(v["state"] == "done" and
              v["first_failing_build"]["identity"]["version"] == "b%d" % FAULT_FROM and
              1 <= v["runs"] <= 5 and v["non_monotone"] == [],
              "after kill -9 and restart the daemon-side bisection finished: %s, %s, %d runs"
              % (v["state"], (v["first_failing_build"] or {}).get("identity"), v["runs"]))
        for pr in v["probes"]:
            n = int(pr["build"]["identity"]["version"][1:])
            j = s.job(pr["job_id"])
            if not (j["kind"] == "suite" and j["build_id"] == pr["build"]["id"] and
                    j["state"] == pr["verdict"] == ("failed" if n >= FAULT_FROM else "passed")):
                check(False, "daemon probe b%d: job %s %s" % (n, pr["job_id"], j["state"]))
        check(True, "every daemon-side probe is a stored suite job with its verdict")
        p = s.ctl("--json", "bisect", str(case_id), "--good", "b1", "--bad", "b16",
                  "--device", "dev", "--daemon", "--timeout", "240")
        res = json.loads(p.stdout) if p.returncode == 0 else {}
        check(p.returncode == 0 and res.get("state") == "done" and
              res["first_failing_build"]["identity"]["version"] == "b%d" % FAULT_FROM and
              res["runs"] <= 5,
              "numvalctl bisect --daemon: b11 (%s)" % p.stderr.strip()[-300:])
        st, body = s.api("POST", "/api/v1/bisections", {"suite_case": case_id, "good": "b16",
                                                         "bad": "b1"}, scope="submit")
        check(st == 400 and body["error"]["field"] == "/bad", "good after bad: 400")
        st, body = s.api("POST", "/api/v1/bisections", {"suite_case": case_id, "good": "b1",
                                                         "bad": "nosuch"}, scope="submit")
        check(st == 404 and body["error"]["field"] == "/bad", "unknown build: 404")

        # The worker decides what it loads: outside its directory, or through a
        # link out of it, a build's plugin is refused with the fix named.
        link = os.path.join(lab, "escape.so")
        os.symlink(PLUGINS[0], link)
        for n, spec in ((20, "plugin:" + PLUGINS[0]), (21, "plugin:" + link)):
            st, _ = s.api("POST", "/api/v1/builds", {"build": build(n), "backend": spec})
            check(st == 200, "b%d registered with %s" % (n, spec))
            st, body = s.api("POST", "/api/v1/jobs", {"kind": "suite", "device": "dev",
                                                      "build": build(n)}, scope="submit")
            j = s.wait_jobs([body["job"]["id"]], 120)[body["job"]["id"]]
            err = (j.get("result") or {}).get("error") or j.get("error") or ""
            check(j["state"] == "error" and "--build-backend-dir" in err,
                  "b%d refused by the worker: %s" % (n, err[:160]))

        # Non-monotone evidence: b22 (the plugin of build 5, correct) passes after
        # failing builds; bisecting b1..b22 reports it instead of hiding it.
        st, _ = s.api("POST", "/api/v1/builds", {"build": build(22),
                                                 "backend": "plugin:" + paths[4]})
        st, body = s.api("POST", "/api/v1/jobs", {"kind": "suite", "device": "dev",
                                                  "build": build(22)}, scope="submit")
        j = s.wait_jobs([body["job"]["id"]], 120)[body["job"]["id"]]
        check(j["state"] == "passed", "suite replay on b22 passes")
        p = s.ctl("bisect", str(case_id), "--good", "b1", "--bad", "b22", "--device", "dev",
                  "--timeout", "240")
        check(p.returncode == 1 and "non-monotone" in p.stdout and
              "passes on later kernels b22" in p.stdout,
              "bisect b1..b22: exit 1, non-monotone evidence printed (%s)" %
              p.stdout.strip()[-400:])
        check("first failing build: kernels b11" in p.stdout,
              "and the first failing build it found is still printed")

        # [device sup] build_backend_dir: numvald's own worker loads the builds' plugins.
        got = {}
        for n in (8, 11):
            st, body = s.api("POST", "/api/v1/jobs", {"kind": "suite", "device": "sup",
                                                      "build": build(n)}, scope="submit")
            got[n] = s.wait_jobs([body["job"]["id"]], 120)[body["job"]["id"]]["state"]
        check(got == {8: "passed", 11: "failed"},
              "the supervised device runs each build's plugin (build_backend_dir): %s" % got)


if __name__ == "__main__":
    main(test)
