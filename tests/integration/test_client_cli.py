#!/usr/bin/env python3
"""numvalctl as a CI script and a person use it, against a real numvald with a
supervised emu worker: a build compare that matched no case fails with its own
exit status (3) and says so; `cases` lists the case id that `repro` takes; a job
for an unknown device is refused unless --new-device; a job that any device may
take shows and reports (JUnit job.device) the device it ran on; a bad artifact id,
a missing job file and a missing token each get a message that names the problem
and what to do."""
import xml.etree.ElementTree as ET
import json
import os
import subprocess

from nvservice import Service, check, main

JOB = {"kind": "op", "op": "add", "dtypes": ["fp32"], "shapes": [[64]], "inputs": ["normal"],
       "seed": 3}
# Another op on the other build: nothing of the two builds' cases matches.
OTHER = dict(JOB, op="mul")


def test(bins):
    with Service(bins, devices={"emu0": "emu"}) as s:
        s.start_daemon()
        with open(os.path.join(s.tmp, "a.json"), "w") as f:
            json.dump(JOB, f)
        with open(os.path.join(s.tmp, "b.json"), "w") as f:
            json.dump(OTHER, f)
        ids = []
        for spec, build in (("a.json", "1.0"), ("b.json", "1.1"), ("a.json", "1.2")):
            p = s.ctl("submit", spec, "--wait", "--build-name", "kernels", "--build-version",
                      build, "--timeout", "120")
            check(p.returncode == 0, "job on build %s passed (%d: %s)" % (build, p.returncode,
                                                                         p.stderr[-400:]))
            ids.append(p.stdout.strip().splitlines()[0].split()[0])
        st, body = s.api("GET", "/api/v1/builds", scope="read")
        by_version = {b["identity"]["version"]: b["id"] for b in body["builds"]}

        # Disjoint builds: matched 0. Exit 3, and the reason on stderr.
        p = s.ctl("compare", str(by_version["1.0"]), str(by_version["1.1"]))
        check(p.returncode == 3, "compare that matched nothing exits 3 (got %d)" % p.returncode)
        check("nothing compared" in p.stderr and "1 only in head" in p.stderr,
              "and says nothing was compared, with the counts: %r" % p.stderr)
        check("matched: 0" in p.stdout, "the counts are printed: %r" % p.stdout)
        # The same op on both builds: matched, nothing newly failing, exit 0.
        p = s.ctl("compare", str(by_version["1.0"]), str(by_version["1.2"]))
        check(p.returncode == 0 and "matched: 1 " in p.stdout,
              "compare of matching builds exits 0 with matched: 1 (%d, %r)" %
              (p.returncode, p.stdout))

        # cases: the first column is the case id the API and repro take.
        p = s.ctl("cases", ids[0])
        rows = [l.split() for l in p.stdout.splitlines()]
        check(p.returncode == 0 and rows and rows[0][:2] == ["ID", "INDEX"],
              "cases prints ID then INDEX: %r" % p.stdout[:200])
        st, body = s.api("GET", "/api/v1/jobs/%s/cases" % ids[0], scope="read")
        check(rows[1][0] == str(body["cases"][0]["id"]) and rows[1][1] == "0",
              "the ID column is the stored case id (%s vs %s)" % (rows[1][0],
                                                                  body["cases"][0]["id"]))

        # Unknown device: refused at once, naming the known ones; --new-device submits.
        p = s.ctl("submit", "a.json", "--device", "nosuch")
        check(p.returncode == 2 and "no device 'nosuch'" in p.stderr and "emu0" in p.stderr
              and "--new-device" in p.stderr, "submit --device nosuch refused: %r" % p.stderr)
        st, body = s.api("GET", "/api/v1/jobs?limit=100", scope="read")
        check(len(body["jobs"]) == 3, "and nothing was queued (%d jobs)" % len(body["jobs"]))
        p = s.ctl("submit", "a.json", "--device", "nosuch", "--new-device")
        check(p.returncode == 0, "--new-device submits it (%d: %s)" % (p.returncode, p.stderr))
        s.ctl("cancel", p.stdout.strip())

        # A job for any device: jobs, show and JUnit name the device that ran it.
        p = s.ctl("jobs")
        row = [l for l in p.stdout.splitlines() if l.split()[:1] == [ids[0]]]
        check(row and "any (ran on emu0)" in row[0], "jobs shows 'any (ran on emu0)': %r" % row)
        p = s.ctl("show", ids[0])
        dev = [l for l in p.stdout.splitlines() if l.startswith("device ")]
        check(dev and dev[0].split(None, 1)[1] == "any (ran on emu0)",
              "show says device any (ran on emu0): %r" % dev)
        p = s.ctl("submit", "a.json", "--wait", "--junit", "j.xml", "--timeout", "120")
        props = {e.get("name"): e.get("value")
                 for e in ET.parse(os.path.join(s.tmp, "j.xml")).getroot().iter("property")}
        check(p.returncode == 0 and props.get("job.device") == "emu0",
              "JUnit job.device is the device it ran on: %s" % props)

        # Error messages that name the problem.
        p = s.ctl("artifact", "deadbeef")
        check(p.returncode == 2 and "'deadbeef' is not an artifact id" in p.stderr
              and "usage" not in p.stderr, "artifact deadbeef: not a SHA-256 (%r)" % p.stderr)
        p = s.ctl("submit", "no-such-file.json")
        check(p.returncode == 2 and "no-such-file.json" in p.stderr
              and "line -1" not in p.stderr, "missing job file without line -1: %r" % p.stderr)
        env = dict(os.environ, NUMVAL_SERVER=s.url)
        env.pop("NUMVAL_TOKEN", None)
        p = subprocess.run([bins["ctl"], "submit", "a.json"], capture_output=True, text=True,
                           timeout=60, env=env, cwd=s.tmp)
        check(p.returncode == 2 and "401" in p.stderr and "NUMVAL_TOKEN" in p.stderr,
              "a 401 says to set NUMVAL_TOKEN: %r" % p.stderr)


if __name__ == "__main__":
    main(test)
