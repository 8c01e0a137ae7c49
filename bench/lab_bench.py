#!/usr/bin/python3
"""Lab-scale benchmark: one real numvald on 127.0.0.1 (temp data dir on the real
disk, synchronous=full as packaged) against the need of a 100-device lab
(docs/DEPLOY.md "A 100-device lab" derives the need; the same assumptions are
the NEED_* constants below).

Phases, one run:
  submit   JOBS small op jobs through POST /api/v1/jobs (SUBMITTERS threads)
  claim    CLIENTS worker-token clients (one token per device, bound to it, as
           `numvald token create NAME --scope worker --device DEV` makes them),
           all long-polling POST /api/v1/worker/claim until the queue is empty
  upload   the same clients upload one result of CASES cases per claimed job
           (cases copied from a real `numval-worker run` on the emu backend, so
           their fields and sizes are what a worker sends), and ARTIFACTS
           artifact uploads of ARTIFACT_BYTES each (one zstd frame)
  store    numvald is stopped; the database and artifact directory sizes are
           divided by the stored cases and extrapolated LINEARLY to 10^6 cases
           (an assumption: B-tree pages and indexes grow about linearly)

Rates are wall-clock over each phase on a shared machine; numvald's own CPU
seconds per request (from /proc) are printed too, because they do not depend
on what else the machine runs. The clients are Python threads on the same
cores: they compete with numvald, so the rates are lower bounds.

Usage: bench/lab_bench.py NUMVALD NUMVAL_WORKER
Env: JOBS=2000 CLIENTS=100 CASES=100 ARTIFACTS=500 ARTIFACT_BYTES=20480 SUBMITTERS=4
Never run by the test suite."""
import hashlib
import http.client
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time

JOBS = int(os.environ.get("JOBS", 2000))
CLIENTS = int(os.environ.get("CLIENTS", 100))
CASES = int(os.environ.get("CASES", 100))
ARTIFACTS = int(os.environ.get("ARTIFACTS", 500))
ARTIFACT_BYTES = int(os.environ.get("ARTIFACT_BYTES", 20480))
SUBMITTERS = int(os.environ.get("SUBMITTERS", 4))
WAKE_JOBS = int(os.environ.get("WAKE_JOBS", 500))

# The need of a 100-device lab (docs/DEPLOY.md "A 100-device lab"): every
# device busy around the clock, one job of 100 cases finished every 10 s per
# device, one job in five failing with 5 artifact uploads.
NEED_DEVICES = 100
NEED_JOB_S = 10.0
NEED_CASES_PER_JOB = 100
NEED_FAIL_SHARE = 0.2
NEED_ARTIFACTS_PER_FAIL = 5


def load1():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def cpu_s(pid):
    """utime + stime of a process, seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def zstd_raw_frame(payload):
    """One zstd frame (RFC 8878) of raw blocks that declares its content size:
    what numvald accepts as an artifact, without a compressor in the client."""
    out = bytearray(struct.pack("<I", 0xFD2FB528))
    out.append(0xE0)  # FCS field 8 bytes, single segment, no checksum
    out += struct.pack("<Q", len(payload))
    blk = 1 << 17
    for off in range(0, len(payload), blk):
        part = payload[off:off + blk]
        last = 1 if off + blk >= len(payload) else 0
        hdr = (len(part) << 3) | (0 << 1) | last  # block type 0: raw
        out += struct.pack("<I", hdr)[:3] + part
    return bytes(out)


class Conn:
    """One keep-alive connection, as a worker holds one."""

    def __init__(self, port, token):
        self.port, self.token = port, token
        self.c = None

    def call(self, method, path, body=None, raw=None, timeout=90):
        for attempt in (0, 1):
            if self.c is None:
                self.c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
            h = {"Authorization": "Bearer " + self.token}
            data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
            if raw is None and data is not None:
                h["Content-Type"] = "application/json"
            try:
                self.c.request(method, path, body=data, headers=h)
                r = self.c.getresponse()
                payload = r.read()
                return r.status, payload
            except (http.client.HTTPException, OSError):
                self.c.close()
                self.c = None
                if attempt:
                    raise
        return None, None


def token(numvald, conf, name, scope, device=None):
    cmd = [numvald, "--config", conf, "token", "create", name, "--scope", scope]
    if device:
        cmd += ["--device", device]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True)
    return p.stdout.strip().split()[-1]


def real_cases(worker, tmp):
    """Cases of a real op job on the emu backend, renumbered and repeated to CASES."""
    spec = {"kind": "op", "op": "exp", "dtypes": ["fp32", "bf16", "fp16"],
            "shapes": [[64], [4096], [64, 257]],
            "inputs": ["normal", "near_zero", "specials", "large"], "seed": 7,
            "tolerance": {"metric": "ulp", "max_ulp": 1, "reason_code": "approximation_error",
                          "reason": "bench"}}
    path = os.path.join(tmp, "job.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    p = subprocess.run([worker, "run", path, "--backend", "emu"], capture_output=True,
                       text=True, timeout=120)
    res = json.loads(p.stdout)
    cases = res["cases"]
    out = []
    for i in range(CASES):
        c = dict(cases[i % len(cases)])
        c["index"] = i
        out.append(c)
    return res, out, len(cases)


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1e3 if xs else float("nan")


def du(path):
    total = 0
    for dp, _, fs in os.walk(path):
        for f in fs:
            total += os.path.getsize(os.path.join(dp, f))
    return total


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        sys.exit(2)
    numvald, worker = sys.argv[1:]
    tmp = tempfile.mkdtemp(prefix="numval-lab-bench-", dir=os.environ.get("TMPDIR", "/var/tmp"))
    proc = None
    try:
        data = os.path.join(tmp, "data")
        conf = os.path.join(tmp, "numvald.ini")
        with open(conf, "w") as f:
            f.write("[server]\nlisten = 127.0.0.1:0\ndata_dir = %s\nsynchronous = full\n"
                    "anonymous_read = loopback\n[limits]\nmax_connections = 4096\n"
                    "queue_depth = 1000000\nlease_ms = 600000\nclaim_max_wait_ms = 60000\n" % data)
        t0 = time.time()
        sub_tok = token(numvald, conf, "bench-submit", "submit,read")
        dev_tok = [token(numvald, conf, "host%03d" % i, "worker", "dev%03d" % i)
                   for i in range(CLIENTS)]
        tok_s = time.time() - t0
        template, cases, real_n = real_cases(worker, tmp)
        port_file = os.path.join(tmp, "port")
        log = open(os.path.join(tmp, "numvald.log"), "ab")
        proc = subprocess.Popen([numvald, "--config", conf, "--port-file", port_file],
                                stdout=log, stderr=subprocess.STDOUT)
        for _ in range(300):
            if os.path.exists(port_file) and open(port_file).read().strip():
                break
            time.sleep(0.05)
        port = int(open(port_file).read())
        print("lab_bench: numvald pid %d on 127.0.0.1:%d, data in %s; %d tokens created in %.1f s"
              % (proc.pid, port, data, CLIENTS + 1, tok_s))
        print("lab_bench: %d jobs, %d clients, results of %d cases (copied from %d real emu "
              "cases), %d artifacts of %d bytes; nproc %d" % (JOBS, CLIENTS, CASES, real_n,
                                                              ARTIFACTS, ARTIFACT_BYTES, os.cpu_count()))
        rows = []
        first = [None]  # a phase's first useful request, when it is not the threads' start
        last = [None]  # a phase's last useful answer (the claim phase's tail is idle polls)

        def phase(name, n, threads, fn):
            """fn(thread index, latencies list) -> items done; returns (items, seconds)."""
            lat = [[] for _ in range(threads)]
            done = [0] * threads
            errs = []

            def body(i):
                try:
                    done[i] = fn(i, lat[i])
                except Exception as e:  # reported below, the run fails
                    errs.append(repr(e))
            la, ca = load1(), cpu_s(proc.pid)
            ts = [threading.Thread(target=body, args=(i,)) for i in range(threads)]
            start = time.time()
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            secs = (last[0] or time.time()) - (first[0] or start)
            last[0] = first[0] = None
            items = sum(done)
            cpu = cpu_s(proc.pid) - ca
            all_lat = [x for l in lat for x in l]
            rows.append((name, threads, items, secs, items / secs, cpu * 1e3 / max(items, 1),
                         pct(all_lat, 0.5), pct(all_lat, 0.99), "%s/%s" % (la, load1())))
            if errs:
                raise RuntimeError("%s: %d errors, first: %s" % (name, len(errs), errs[0]))
            if items != n:
                raise RuntimeError("%s: %d of %d done" % (name, items, n))
            return items, secs

        # ---- submit -------------------------------------------------------
        job_spec = {"kind": "op", "op": "exp", "dtypes": ["fp32"], "shapes": [[16]], "seed": 1}

        def submit(i, lat):
            c = Conn(port, sub_tok)
            n = 0
            for k in range(i, JOBS, SUBMITTERS):
                s = time.time()
                # Targeted: a device-bound token may not upload an untargeted job's
                # result (403 from lease_device_ok; docs/DEPLOY.md "A 100-device lab").
                st, _ = c.call("POST", "/api/v1/jobs",
                               dict(job_spec, seed=k + 1, device="dev%03d" % (k % CLIENTS)))
                lat.append(time.time() - s)
                if st != 201:
                    raise RuntimeError("submit: %s" % st)
                n += 1
            return n
        phase("submit job", JOBS, SUBMITTERS, submit)

        # ---- claim ------------------------------------------------------------
        leases = [[] for _ in range(CLIENTS)]
        remaining = [JOBS]
        lock = threading.Lock()

        def claim(i, lat):
            c = Conn(port, dev_tok[i])
            n = 0
            while True:
                with lock:
                    if remaining[0] <= 0:
                        return n
                s = time.time()
                st, b = c.call("POST", "/api/v1/worker/claim",
                               {"device": "dev%03d" % i, "wait_ms": 2000})
                if st == 204:
                    continue
                if st != 200:
                    raise RuntimeError("claim: %s %s" % (st, b[:200]))
                lat.append(time.time() - s)
                j = json.loads(b)["job"]
                leases[i].append((j["id"], j["lease_token"]))
                with lock:
                    remaining[0] -= 1
                    last[0] = time.time()
                n += 1
        phase("claim (queued)", JOBS, CLIENTS, claim)

        # ---- claim by waiting clients, woken by submissions ------------------------
        # Every client long-polls an empty queue first; one submitter then posts
        # WAKE_JOBS jobs round-robin over the devices. Latency: submit's 201 to claim's 200.
        submitted = {}
        remaining[0] = WAKE_JOBS

        def wake(i, lat):
            if i == CLIENTS:  # the submitter
                c = Conn(port, sub_tok)
                time.sleep(1.0)  # let every client block in its long poll
                first[0] = time.time()
                for k in range(WAKE_JOBS):
                    sent = time.time()
                    st, b = c.call("POST", "/api/v1/jobs",
                                   dict(job_spec, seed=JOBS + k + 1, device="dev%03d" % (k % CLIENTS)))
                    if st != 201:
                        raise RuntimeError("submit: %s" % st)
                    with lock:
                        submitted[json.loads(b)["job"]["id"]] = sent
                return 0
            c = Conn(port, dev_tok[i])
            n = 0
            while True:
                with lock:
                    if remaining[0] <= 0:
                        return n
                st, b = c.call("POST", "/api/v1/worker/claim",
                               {"device": "dev%03d" % i, "wait_ms": 2000})
                got = time.time()
                if st == 204:
                    continue
                if st != 200:
                    raise RuntimeError("claim: %s %s" % (st, b[:200]))
                j = json.loads(b)["job"]
                leases[i].append((j["id"], j["lease_token"]))
                with lock:
                    remaining[0] -= 1
                    last[0] = got
                    claimed_at[j["id"]] = got
                n += 1
        claimed_at = {}
        phase("claim (woken)", WAKE_JOBS, CLIENTS + 1, wake)
        # the 201 can reach the submitter after the claim reached its client: pair them after
        wake_lat = [claimed_at[k] - submitted[k] for k in claimed_at if k in submitted]
        r = rows[-1]
        rows[-1] = r[:6] + (pct(wake_lat, 0.5), pct(wake_lat, 0.99)) + r[8:]

        # ---- upload -------------------------------------------------------------
        def result(i, lat):
            c = Conn(port, dev_tok[i])
            n = 0
            for jid, lt in leases[i]:
                body = {"job_id": jid, "lease_token": lt,
                        "result": {"verdict": "passed", "kind": "op", "op": "exp",
                                   "backend": template.get("backend", "emu"), "cases": cases,
                                   "summary": {"cases": CASES, "passed": CASES, "failed": 0,
                                               "errors": 0}}}
                for cs in cases:
                    if cs.get("verdict") != "passed":
                        body["result"]["verdict"] = "failed"
                s = time.time()
                st, b = c.call("POST", "/api/v1/worker/result", body)
                lat.append(time.time() - s)
                if st != 200:
                    raise RuntimeError("result: %s %s" % (st, b[:300]))
                n += 1
            return n
        req_bytes = len(json.dumps({"job_id": 1, "lease_token": "x" * 32,
                                    "result": {"cases": cases}}))
        phase("result (%d cases)" % CASES, JOBS + WAKE_JOBS, CLIENTS, result)

        def artifact(i, lat):
            c = Conn(port, dev_tok[i])
            n = 0
            for k in range(i, ARTIFACTS, CLIENTS):
                payload = (b"numval-lab-bench %d " % k) * (ARTIFACT_BYTES // 10 + 1)
                frame = zstd_raw_frame(payload[:ARTIFACT_BYTES - 17])
                sha = hashlib.sha256(frame).hexdigest()
                s = time.time()
                st, b = c.call("PUT", "/api/v1/worker/artifacts/" + sha, raw=frame)
                lat.append(time.time() - s)
                if st != 201:
                    raise RuntimeError("artifact: %s %s" % (st, b[:300]))
                n += 1
            return n
        phase("artifact (%d B)" % ARTIFACT_BYTES, ARTIFACTS, CLIENTS, artifact)

        # ---- store size -----------------------------------------------------------
        proc.terminate()
        proc.wait(timeout=60)
        proc = None
        db = os.path.join(data, "numvald.db")
        q = subprocess.run(["sqlite3", db, "PRAGMA wal_checkpoint(TRUNCATE);"
                            "SELECT COUNT(*) FROM cases; SELECT COUNT(*) FROM jobs;"],
                           capture_output=True, text=True, timeout=120, check=True)
        stored_cases, stored_jobs = [int(x) for x in q.stdout.split()[-2:]]
        files = {f: os.path.getsize(os.path.join(data, f)) for f in os.listdir(data)
                 if os.path.isfile(os.path.join(data, f))}
        db_bytes = sum(v for k, v in files.items() if k.startswith("numvald.db"))
        # Artifacts are blobs in the same database: split the pages by table (dbstat).
        q = subprocess.run(["sqlite3", db, "SELECT name, SUM(pgsize) FROM dbstat GROUP BY name;"],
                           capture_output=True, text=True, timeout=120, check=True)
        by_table = {}
        for ln in q.stdout.split():
            name, _, size = ln.rpartition("|")
            by_table[name] = int(size)
        art_bytes = by_table.get("artifacts", 0) + by_table.get("sqlite_autoindex_artifacts_1", 0)
        case_bytes = sum(v for k, v in by_table.items() if k.startswith(("cases", "sqlite_autoindex_cases")))
        job_bytes = sum(v for k, v in by_table.items() if k.startswith(("jobs", "sqlite_autoindex_jobs")))

        print("\n%-22s %7s %7s %7s %9s %12s %8s %8s %9s" % (
            "phase", "clients", "items", "secs", "items/s", "nvd cpu ms/it", "p50 ms", "p99 ms",
            "load1 b/a"))
        for r in rows:
            print("%-22s %7d %7d %7.1f %9.1f %12.3f %8.1f %8.1f %9s" % r)
        rate = {r[0].split(" (")[0] + (" woken" if "woken" in r[0] else ""): r for r in rows}

        need_claims = NEED_DEVICES / NEED_JOB_S
        need_cases = need_claims * NEED_CASES_PER_JOB
        need_art = need_claims * NEED_FAIL_SHARE * NEED_ARTIFACTS_PER_FAIL
        per_m = (db_bytes - art_bytes) / stored_cases * 1e6
        print("\nstore: %d jobs, %d cases, %d artifacts: numvald.db %.1f MiB after checkpoint; "
              "pages: cases+indexes %.1f MiB (%d B/case), jobs+indexes %.1f MiB, artifacts "
              "%.1f MiB (%d B each), without artifacts %d B/case" % (
                  stored_jobs, stored_cases, ARTIFACTS, db_bytes / 2**20, case_bytes / 2**20,
                  case_bytes / stored_cases, job_bytes / 2**20, art_bytes / 2**20,
                  art_bytes / max(ARTIFACTS, 1), (db_bytes - art_bytes) / stored_cases))
        print("claim (woken) p50/p99: from the submission being sent to the claim's answer")
        print("result request body: %d bytes for %d cases" % (req_bytes, CASES))
        print("\n%-34s %14s %16s %10s" % ("need of a 100-device lab", "needed", "numval measured",
                                          "headroom"))

        def line(what, need, got, unit):
            print("%-34s %10.1f %-3s %12.1f %-3s %9.0fx" % (what, need, unit, got, unit, got / need))
        line("claims (queue full)", need_claims, rate["claim"][4], "/s")
        line("claims (woken, 1 submitter)", need_claims, rate["claim woken"][4], "/s")
        line("result uploads (%d cases)" % CASES, need_claims, rate["result"][4], "/s")
        line("cases stored", need_cases, rate["result"][4] * CASES, "/s")
        line("artifact uploads (%d KiB)" % (ARTIFACT_BYTES // 1024), need_art,
             rate["artifact"][4], "/s")
        per_day_cases = need_cases * 86400
        print("store per 10^6 cases (linear from %d): %.0f MiB database; a lab at the need: "
              "%.1f M cases/day = %.1f GiB/day database + %.1f GiB/day artifacts" % (
                  stored_cases, per_m / 2**20, per_day_cases / 1e6,
                  per_m * per_day_cases / 1e6 / 2**30,
                  need_art * 86400 * (art_bytes / max(ARTIFACTS, 1)) / 2**30))
        print("need assumptions: %d devices, one job of %d cases per %.0f s per device, "
              "%.0f%% of jobs failing with %d artifacts each" % (
                  NEED_DEVICES, NEED_CASES_PER_JOB, NEED_JOB_S, NEED_FAIL_SHARE * 100,
                  NEED_ARTIFACTS_PER_FAIL))
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
        if os.environ.get("KEEP"):
            print("kept", tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
