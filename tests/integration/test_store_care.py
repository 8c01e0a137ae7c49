#!/usr/bin/env python3
"""Store care with real processes: `numvald backup` while numvald serves a stream of
submissions and a worker's results, and `numvald prune` beside a serving numvald.

Backup: each copy passes PRAGMA integrity_check and holds every job whose submission
was answered (2xx with synchronous=full: committed) before the backup began; the last
one, taken when the stream has stopped, holds every job and case of the live store.
A backup never overwrites a file.

Prune: jobs and artifacts are aged in the database (numvald stopped; the test
writes finished_at / created_at 40 days back), one old case is made a suite origin
(a suite_cases row naming it, its artifact as reproducer and another as origin
artifact) and one old artifact is named by a young case. With [retention]
case_days = artifact_days = 30: --dry-run deletes nothing and counts what a real
run deletes; the run deletes exactly the old jobs' other cases and the old
artifacts no suite case nor kept case names; jobs stay; the store passes
integrity_check; /metrics reports the store's sizes.

usage: test_store_care.py NUMVALD NUMVAL-WORKER NUMVALCTL"""
import json
import os
import re
import shutil
import sqlite3
import subprocess
import threading
import time
import urllib.request

from nvservice import Service, check, main

DAY_MS = 86400000
# Passing: exp on a correctly rounding emu. Failing: the fast exp under a
# 0.5-ulp (correctly rounded) tolerance, so cases fail and upload artifacts; the
# tolerance is the test's demand, not a claim about the device.
PASSING = {"kind": "op", "op": "exp", "dtypes": ["fp32"], "shapes": [[257]],
           "layouts": ["contiguous"], "inputs": ["normal", "uniform"], "seed": 3}
FAILING = dict(PASSING, tolerance={
    "metric": "ulp", "max_ulp": 0.5, "reason_code": "approximation_error",
    "reason": "integration test: correct rounding exposes the fast exp"})


def db_rows(path, sql, args=()):
    c = sqlite3.connect("file:%s?mode=ro" % path, uri=True, timeout=30)
    try:
        return c.execute(sql, args).fetchall()
    finally:
        c.close()


def integrity(path):
    return db_rows(path, "PRAGMA integrity_check")[0][0]


def test(bins):
    # Two local devices; no gating or minimizing (minimize_deadline 0): the failing
    # cases' artifacts are uploaded all the same, and quickly.
    conf_extra = ("\n[device emu-ok]\nbackend = emu\nslots = 1\nminimize_deadline = 0\n"
                  "\n[device emu-fast]\nbackend = emu:transcendental=fast\nslots = 1\n"
                  "minimize_deadline = 0\n"
                  "\n[retention]\ncase_days = 30\nartifact_days = 30\n")
    with Service(bins, lease_ms=3000, extra_conf=conf_extra) as s:
        s.start_daemon()
        db = os.path.join(s.data, "numvald.db")

        def nvd(*args, timeout=120):
            return subprocess.run([bins["numvald"], "--config", s.conf] + list(args),
                                  capture_output=True, text=True, timeout=timeout)

        # ---- backup while serving --------------------------------------------
        acked, stop, errors = [], threading.Event(), []

        def submit_stream():
            i = 0
            while not stop.is_set():
                spec = dict(FAILING, device="emu-fast") if i % 3 == 0 else \
                    dict(PASSING, device="emu-ok")
                spec["seed"] = 100 + i
                st, body = s.api("POST", "/api/v1/jobs", spec, scope="submit")
                if st != 201:
                    errors.append((st, body))
                    return
                acked.append(body["job"]["id"])
                i += 1

        t = threading.Thread(target=submit_stream, daemon=True)
        t.start()
        try:
            for k in range(3):
                while len(acked) < 10 * (k + 1) and t.is_alive():
                    time.sleep(0.05)
                before = list(acked)
                out = os.path.join(s.tmp, "backup-%d.db" % k)
                p = nvd("backup", out)
                check(p.returncode == 0 and re.match(r"backup: .*: \d+ pages, \d+ bytes", p.stdout),
                      "backup %d while serving exits 0 (%s%s)" % (k, p.stdout, p.stderr[-300:]))
                check(not os.path.exists(out + "-wal") and not os.path.exists(out + ".tmp"),
                      "backup %d is one self-contained file" % k)
                check(integrity(out) == "ok", "backup %d passes PRAGMA integrity_check" % k)
                ids = {r[0] for r in db_rows(out, "SELECT id FROM jobs")}
                lost = [i for i in before if i not in ids]
                check(not lost, "backup %d holds all %d jobs acknowledged before it began "
                      "(missing %s)" % (k, len(before), lost[:5]))
        finally:
            stop.set()
            t.join(timeout=60)
        check(not errors, "every submission of the stream was accepted (%s)" % errors[:2])
        jobs = s.wait_jobs(acked, timeout=300)
        check(any(j["state"] == "failed" for j in jobs.values()) and
              any(j["state"] == "passed" for j in jobs.values()),
              "the stream's jobs finished, some failed, some passed")
        out = os.path.join(s.tmp, "backup-final.db")
        p = nvd("backup", out)
        check(p.returncode == 0, "final backup exits 0 (%s)" % p.stderr[-300:])
        live = db_rows(db, "SELECT id, state, cases_total FROM jobs ORDER BY id")
        copy = db_rows(out, "SELECT id, state, cases_total FROM jobs ORDER BY id")
        check(copy == live and len(copy) == len(acked),
              "final backup holds every job with its state (%d jobs)" % len(copy))
        lc = db_rows(db, "SELECT COUNT(*), COUNT(DISTINCT job_id) FROM cases")[0]
        cc = db_rows(out, "SELECT COUNT(*), COUNT(DISTINCT job_id) FROM cases")[0]
        check(cc == lc and lc[0] > 0, "final backup holds every case (%s)" % (cc,))
        la = db_rows(db, "SELECT COUNT(*) FROM artifacts")[0][0]
        check(la > 0 and db_rows(out, "SELECT COUNT(*) FROM artifacts")[0][0] == la,
              "final backup holds every artifact (%d)" % la)
        size = os.path.getsize(out)
        p = nvd("backup", out)
        check(p.returncode == 2 and "exists" in p.stderr and os.path.getsize(out) == size,
              "backup refuses an existing file and leaves it alone (%s)" % p.stderr.strip())
        p = subprocess.run([bins["numvald"], "--data-dir", os.path.join(s.tmp, "nowhere"),
                            "backup", os.path.join(s.tmp, "x.db")], capture_output=True,
                           text=True, timeout=60)
        check(p.returncode == 1 and "no database" in p.stderr and
              not os.path.exists(os.path.join(s.tmp, "nowhere")),
              "backup of a data dir without a store names it and creates nothing")

        # ---- prune --------------------------------------------------------------
        s.kill_daemon(sig=15)
        now = int(time.time() * 1000)
        c = sqlite3.connect(db, timeout=30)
        ids = [r[0] for r in c.execute("SELECT id FROM jobs ORDER BY id")]
        old, young = ids[:len(ids) // 2], ids[len(ids) // 2:]
        q = ",".join("?" * len(old))
        c.execute("UPDATE jobs SET finished_at = finished_at - ?, created_at = created_at - ? "
                  "WHERE id IN (%s)" % q, [40 * DAY_MS, 40 * DAY_MS] + old)
        art = lambda where, args=(): [r[0] for r in c.execute(  # noqa: E731
            "SELECT DISTINCT json_extract(data, '$.artifact') FROM cases WHERE "
            "json_extract(data, '$.artifact') IS NOT NULL AND " + where, args)]
        old_arts = art("job_id IN (%s)" % q, old)
        young_arts = art("job_id IN (%s)" % ",".join("?" * len(young)), young)
        check(len(old_arts) >= 3 and young_arts, "old jobs name %d artifacts, young %d" %
              (len(old_arts), len(young_arts)))
        # Age the old jobs' artifacts and one only a young case names.
        shared = [a for a in young_arts if a not in old_arts][:1]
        aged = old_arts + shared
        c.execute("UPDATE artifacts SET created_at = created_at - ? WHERE sha256 IN (%s)" %
                  ",".join("?" * len(aged)), [40 * DAY_MS] + aged)
        # A suite case whose origin is an old failing case; its reproducer and origin
        # artifacts are old ones of other cases.
        oj, oidx, oart = c.execute(
            "SELECT job_id, idx, json_extract(data, '$.artifact') FROM cases WHERE job_id IN "
            "(%s) AND json_extract(data, '$.artifact') IS NOT NULL ORDER BY id LIMIT 1" % q,
            old).fetchone()
        repro = [a for a in old_arts if a != oart][0]
        c.execute("INSERT INTO suite_cases (signature, signature_json, op, dtype, failure_class, "
                  "artifact, origin_artifact, origin_job, origin_case, created_at, last_seen_at) "
                  "VALUES ('it-sig', '{}', 'exp', 'fp32', 'ulp', ?, ?, ?, ?, ?, ?)",
                  (repro, oart, oj, oidx, now - 40 * DAY_MS, now - 40 * DAY_MS))
        c.commit()
        want_cases = c.execute("SELECT COUNT(*), COALESCE(SUM(length(data)), 0) FROM cases "
                               "WHERE job_id IN (%s) AND NOT (job_id = ? AND idx = ?)" % q,
                               old + [oj, oidx]).fetchone()
        want_jobs = c.execute("SELECT COUNT(DISTINCT job_id) FROM cases WHERE job_id IN (%s) "
                              "AND NOT (job_id = ? AND idx = ?)" % q, old + [oj, oidx]).fetchone()[0]
        keep_arts = {repro, oart} | set(shared)
        go_arts = sorted(set(old_arts) - keep_arts)
        want_art_bytes = c.execute("SELECT COALESCE(SUM(size), 0) FROM artifacts WHERE sha256 IN "
                                   "(%s)" % ",".join("?" * len(go_arts)), go_arts).fetchone()[0]
        n_cases_before = c.execute("SELECT COUNT(*) FROM cases").fetchone()[0]
        n_arts_before = c.execute("SELECT COUNT(*) FROM artifacts").fetchone()[0]
        c.close()
        check(go_arts, "%d old artifacts are free to go" % len(go_arts))

        s.start_daemon()
        p = nvd("prune", "--dry-run")
        m = re.search(r"would delete: cases (\d+) \((\d+) bytes\) of (\d+) jobs", p.stdout)
        check(p.returncode == 0 and m and [int(x) for x in m.groups()] ==
              [want_cases[0], want_cases[1], want_jobs],
              "prune --dry-run counts the old jobs' cases but the suite origin (%s; want %s, %d "
              "jobs)" % (p.stdout.strip(), want_cases, want_jobs))
        check(db_rows(db, "SELECT COUNT(*) FROM cases")[0][0] == n_cases_before and
              db_rows(db, "SELECT COUNT(*) FROM artifacts")[0][0] == n_arts_before,
              "prune --dry-run deletes nothing")
        # Load while pruning: submissions keep being answered.
        stop.clear()
        acked.clear()
        t = threading.Thread(target=submit_stream, daemon=True)
        t.start()
        while len(acked) < 5 and t.is_alive():
            time.sleep(0.02)
        p = nvd("prune")
        n_at_end = len(acked)
        while len(acked) < n_at_end + 5 and t.is_alive():
            time.sleep(0.02)
        stop.set()
        t.join(timeout=60)
        check(not errors and len(acked) >= 10, "submissions before, during and after the prune "
              "were all accepted (%d)" % len(acked))
        m = re.search(r"deleted: cases (\d+) \((\d+) bytes\) of (\d+) jobs, artifacts (\d+) "
                      r"\((\d+) bytes\)", p.stdout)
        check(p.returncode == 0 and m and [int(x) for x in m.groups()] ==
              [want_cases[0], want_cases[1], want_jobs, len(go_arts), want_art_bytes],
              "prune reports what it deleted (%s%s; want cases %s, artifacts %d / %d bytes)" %
              (p.stdout.strip(), p.stderr.strip()[:400], want_cases, len(go_arts),
               want_art_bytes))
        left = db_rows(db, "SELECT job_id, idx FROM cases WHERE job_id IN (%s)" % q, old)
        check(left == [(oj, oidx)], "of the old jobs only the suite origin case is left (%s)" % left)
        yc = db_rows(db, "SELECT COUNT(*) FROM cases WHERE job_id IN (%s)" %
                     ",".join("?" * len(young)), young)[0][0]
        check(yc + 1 == n_cases_before - want_cases[0],
              "the young jobs keep every case (%d)" % yc)
        have = {r[0] for r in db_rows(db, "SELECT sha256 FROM artifacts")}
        check(keep_arts <= have, "the suite's reproducer and origin artifacts and the aged one "
              "a young case names are kept")
        check(not (set(go_arts) & have), "every other old artifact is gone")
        check(db_rows(db, "SELECT COUNT(*) FROM jobs WHERE id IN (%s)" % q, old)[0][0] == len(old),
              "the jobs themselves stay")
        check(integrity(db) == "ok", "the pruned store passes PRAGMA integrity_check")
        st, _ = s.api("GET", "/api/v1/jobs/%d" % old[0], scope="read")
        check(st == 200, "a pruned job is still served")
        # Quiet store (every job finished), then /metrics against SQLite's own numbers.
        s.wait_jobs(acked, timeout=300)

        def store_metrics():
            with urllib.request.urlopen(s.url + "/metrics", timeout=10) as r:
                text = r.read().decode()
            return {k: int(v) for k, v in re.findall(r"^(numvald_store_\w+) (\d+)$", text, re.M)}

        # The idle workers' claims may still write (device last_seen): take SQLite's
        # numbers between two equal /metrics readings.
        for _ in range(20):
            sizes = store_metrics()
            pc, ps, fl = [db_rows(db, "PRAGMA " + x)[0][0]
                          for x in ("page_count", "page_size", "freelist_count")]
            wal = os.path.getsize(db + "-wal")
            if store_metrics() == sizes:
                break
            time.sleep(0.2)
        check(sizes.get("numvald_store_bytes") == pc * ps and
              sizes.get("numvald_store_free_bytes") == fl * ps and
              sizes.get("numvald_store_wal_bytes") == wal,
              "/metrics reports the store's sizes as SQLite and the file system see them (%s; "
              "pages %d x %d, free %d)" % (sizes, pc, ps, fl))
        p = nvd("prune")
        m = re.search(r"deleted: cases (\d+) .* artifacts (\d+)", p.stdout)
        check(p.returncode == 0 and m and m.groups() == ("0", "0"),
              "a second prune finds nothing more (%s)" % p.stdout.strip())

        # Stopped numvald (no -shm): a backup by another user than the store's owner
        # is refused, since the WAL files its reader would create could not be removed.
        s.kill_daemon(sig=15)
        runuser = shutil.which("runuser")
        if os.geteuid() == 0 and runuser and not os.path.exists(db + "-shm"):
            os.chmod(s.tmp, 0o755)
            os.chmod(s.data, 0o755)
            p = subprocess.run([runuser, "-u", "nobody", "--", bins["numvald"], "--data-dir",
                                s.data, "backup", "/tmp/numval-it-nobody-%d.db" % os.getpid()],
                               capture_output=True, text=True, timeout=60)
            check(p.returncode == 2 and "belongs to root" in p.stderr and
                  not os.path.exists(db + "-shm") and
                  not os.path.exists("/tmp/numval-it-nobody-%d.db" % os.getpid()),
                  "backup as another user than the stopped store's owner is refused, nothing "
                  "created (%s)" % p.stderr.strip()[-300:])
        else:
            print("# not root, no runuser or a -shm left: owner check not exercised")


if __name__ == "__main__":
    main(test)
