#!/usr/bin/env python3
"""Scale-out through Slurm on a real one-node cluster (slurmcluster.py): numvald
with a [pool] whose workers sbatch starts (partition, --gres, time limit), 50
jobs through them, one worker scancelled in the middle of a job, another sent
SIGUSR1 (the drain before a time limit) in the middle of one. Checks: every
job completes exactly once (passed, one uploaded result each, one set of cases;
the scancelled job on a second attempt after its lease expired, every other
job, the drained worker's too, on its first; the drained worker claimed no
more); the pool never has more Slurm jobs than max_workers and
used more than one; the workers' token is on no Slurm command line; once the
queue is empty the workers exit by themselves and give their slots back.

Exit 77 (skip) only when slurm-wlm or munge is not installed; scripts/deps.sh
test installs them."""
import glob
import os
import re
import sys
import threading
import time
import urllib.request

from nvservice import Fail, Service, bins_from_argv, check
import slurmcluster

MAX_WORKERS = 4
IDLE_EXIT_S = 5
LEASE_MS = 3000
# The pool's device is the test plugin with every call made 100 ms longer
# (delay_ms), so that the job caught mid-run lasts seconds however fast the
# worker gets. That job: 40 cases (at least 4 s); submitted first and at a
# higher priority, so the first worker claims it.
LONG = {"kind": "op", "op": "exp", "dtypes": ["fp32"],
        "shapes": [[4096], [64, 257], [128, 129], [9000], [300, 300]],
        "layouts": ["contiguous", "transposed"],
        "inputs": ["normal", "uniform", "large", "near_zero"], "seed": 5, "priority": 10}
N_LONG_CASES = 40


def slow_backend():
    path = os.environ.get("NV_TEST_PLUGIN")
    if not path:
        raise Fail("NV_TEST_PLUGIN (the test plugin's path) is not set; run through meson")
    return "plugin:%s?delay_ms=100" % path


def small(seed):
    # 2 shapes x 4 inputs = 8 cases (the test plugin offers fp32 exp).
    return {"kind": "op", "op": "exp", "dtypes": ["fp32"],
            "shapes": [[2048], [64, 65]], "layouts": ["contiguous"],
            "inputs": ["normal", "uniform", "near_zero", "large"], "seed": seed}


class Sampler(threading.Thread):
    """The pool's Slurm jobs, every 0.3 s: the most seen at once and every id."""

    def __init__(self, cluster, name):
        super().__init__(daemon=True)
        self.cluster, self.name = cluster, name
        self.most, self.ids, self.stop, self.errors = 0, set(), False, []

    def run(self):
        while not self.stop:
            try:
                jobs = self.cluster.jobs(self.name)
                self.most = max(self.most, len(jobs))
                self.ids.update(jobs)
            except Exception as e:  # noqa: BLE001 (kept and reported by the test)
                self.errors.append(str(e))
            time.sleep(0.3)


def worker_logs(out_dir):
    """{slurm id "A_a": log text} of every worker that started."""
    logs = {}
    for p in glob.glob(os.path.join(out_dir, "w-*.log")):
        with open(p, "rb") as f:
            logs[os.path.basename(p)[2:-4]] = f.read().decode("utf-8", "replace")
    return logs


def worker_mid_job(s, out_dir, job_id):
    """The Slurm id of the worker running job_id, once it is part-way."""
    deadline = time.time() + 180
    while time.time() < deadline:
        job = s.job(job_id)
        if job["state"] in ("passed", "failed", "error"):
            raise Fail("job %s finished before its worker could be signalled" % job_id)
        if job["state"] == "running" and 0 < job["cases_done"] < job["cases_total"]:
            for sid, text in worker_logs(out_dir).items():
                if "job %s (attempt 1): running" % job_id in text:
                    return sid
        time.sleep(0.1)
    raise Fail("job %s never ran part-way on a pool worker: %s" % (job_id, s.job(job_id)))


def test(bins, cluster):
    out_dir = os.path.join(cluster.tmp, "out")
    os.mkdir(out_dir)
    pool = "\n".join([
        "[pool slurm-emu]",
        "device = emu-slurm",
        "backend = " + slow_backend(),
        "partition = numval",
        "gres = nvdev:1",
        "time_limit = 15",
        "max_workers = %d" % MAX_WORKERS,
        "idle_exit = %d" % IDLE_EXIT_S,
        "interval_ms = 500",
        "threads = 1",
        "output = %s/w-%%A_%%a.log" % out_dir,
        "chdir = %s" % cluster.tmp,
        # The sanitizer settings of a sanitized build reach the workers too.
        "export_env = " + ",".join(["PATH", "SLURM_CONF"] + [
            v for v in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS") if v in os.environ]),
        ""])
    # numvald calls sbatch and squeue: they find the cluster through SLURM_CONF.
    os.environ["SLURM_CONF"] = cluster.conf
    with Service(bins, lease_ms=LEASE_MS, max_attempts=5, extra_conf="\n" + pool) as s:
        s.start_daemon()
        tok_path = os.path.join(s.data, "pool-slurm-emu.token")
        check(os.path.exists(tok_path) and os.stat(tok_path).st_mode & 0o777 == 0o600,
              "the pool's worker token is kept in a mode-600 file")
        with open(tok_path) as f:
            pool_token = f.read().strip()
        sampler = Sampler(cluster, "numval-slurm-emu")
        sampler.start()

        st, body = s.api("POST", "/api/v1/jobs", dict(LONG, device="emu-slurm"), scope="submit")
        check(st == 201, "long job accepted (%s %s)" % (st, body))
        long_id = body["job"]["id"]
        st, body = s.api("POST", "/api/v1/jobs", dict(LONG, device="emu-slurm", seed=6,
                                                      priority=9), scope="submit")
        check(st == 201, "second long job accepted (%s)" % st)
        drain_id = body["job"]["id"]
        ids = [long_id, drain_id]
        for i in range(48):
            st, body = s.api("POST", "/api/v1/jobs", dict(small(100 + i), device="emu-slurm"),
                             scope="submit")
            if st != 201:
                raise Fail("small job %d refused: %s %s" % (i, st, body))
            ids.append(body["job"]["id"])
        check(len(set(ids)) == 50, "50 jobs queued for the pool's device")

        victim = worker_mid_job(s, out_dir, long_id)
        done_at = s.job(long_id)["cases_done"]
        show = cluster.run("scontrol", "show", "job", victim.split("_")[0])
        check(show.returncode == 0 and "slurm-worker.sh" in show.stdout,
              "scontrol shows the pool's job script (%s)" % show.stderr.strip())
        for want in ("Partition=numval", "TimeLimit=00:15:00", "gres:nvdev:1"):
            check(want in show.stdout, "the worker's Slurm job has %s (from the [pool])" % want)
        check(pool_token not in show.stdout and pool_token not in cluster.run(
              "squeue", "--noheader", "--format=%o %k").stdout,
              "the token is on no Slurm command line or comment")
        p = cluster.run("scancel", victim)
        check(p.returncode == 0, "scancel %s (the worker of job %s at %d cases): %s" %
              (victim, long_id, done_at, p.stderr.strip()))

        # SIGUSR1, what drain_before has Slurm send before the time limit: the
        # worker finishes the job it holds and claims no more.
        drained = worker_mid_job(s, out_dir, drain_id)
        p = cluster.run("scancel", "--batch", "--signal=USR1", drained)
        check(p.returncode == 0 and drained != victim,
              "scancel --batch --signal=USR1 %s (the worker of job %s at %d cases): %s" %
              (drained, drain_id, s.job(drain_id)["cases_done"], p.stderr.strip()))

        jobs = s.wait_jobs(ids, timeout=300)
        check(all(j["state"] == "passed" for j in jobs.values()),
              "all 50 jobs passed (%s)" % sorted({j["state"] for j in jobs.values()}))
        check(jobs[long_id]["attempt"] == 2,
              "the scancelled job ran a second time (attempt %d)" % jobs[long_id]["attempt"])
        again = [j for j in ids if j != long_id and jobs[j]["attempt"] != 1]
        check(not again, "every other job ran once (not: %s)" % again)
        cases = s.cases(long_id)
        check(len(cases) == N_LONG_CASES and len({c["index"] for c in cases}) == N_LONG_CASES,
              "one set of cases for the scancelled job (%d)" % len(cases))
        for j in ids[2:5]:
            check(len(s.cases(j)) == 8, "job %s: its 8 cases stored once" % j)

        logs = worker_logs(out_dir)
        uploads = {}
        for sid, text in logs.items():
            for m in re.finditer(r"job (\d+): passed, result uploaded", text):
                uploads.setdefault(int(m.group(1)), []).append(sid)
        twice = {j: w for j, w in uploads.items() if len(w) != 1}
        check(sorted(uploads) == sorted(ids) and not twice,
              "each job's result uploaded exactly once, by one worker (%d jobs; twice: %s)" %
              (len(uploads), twice))
        check(uploads[long_id][0] != victim and
              "abandoning job %s" % long_id in logs.get(victim, ""),
              "the scancelled worker abandoned the job on SIGTERM; another finished it")
        text = logs.get(drained, "")
        at = text.find("SIGUSR1: draining")
        check(jobs[drain_id]["attempt"] == 1 and uploads.get(drain_id) == [drained] and at >= 0
              and text.find("job %s: passed, result uploaded" % drain_id) < at and
              "running" not in text[at:],
              "the drained worker finished its job (attempt 1), claimed no more and exited")
        check(re.search(r"expired lease\(s\) requeued", s.tail(1 << 20)) is not None,
              "numvald requeued the job when its lease expired")
        workers_used = {w[0] for w in uploads.values()}
        check(sampler.most <= MAX_WORKERS,
              "never more than max_workers = %d pool jobs in Slurm (most seen: %d)" %
              (MAX_WORKERS, sampler.most))
        check(len(workers_used) >= 2 and len(logs) >= 2,
              "the jobs ran on %d Slurm-started workers (%d started)" %
              (len(workers_used), len(logs)))

        # Idle workers leave: the pool's Slurm jobs are gone without a scancel.
        deadline = time.time() + IDLE_EXIT_S + 60
        while time.time() < deadline and cluster.jobs("numval-slurm-emu"):
            time.sleep(0.5)
        left = cluster.jobs("numval-slurm-emu")
        check(not left, "the idle workers exited and gave their Slurm slots back (left: %s)" %
              left)
        exits = sum(1 for t in worker_logs(out_dir).values() if "(--idle-exit): exiting" in t)
        check(exits >= 1, "%d worker(s) logged their idle exit" % exits)
        reports = ["%s: %s" % (sid, l) for sid, t in worker_logs(out_dir).items()
                   for l in t.splitlines() if "Sanitizer" in l or "runtime error:" in l]
        check(not reports, "no sanitizer report in the workers' logs (%s)" % reports[:5])
        sampler.stop = True
        sampler.join(timeout=10)
        check(not sampler.errors, "squeue answered throughout (%s)" % sampler.errors[:3])
        with urllib.request.urlopen(s.url + "/metrics", timeout=30) as r:
            metrics = r.read().decode()
        m = re.search(r'^numvald_pool_submitted_total\{pool="slurm-emu"\} (\d+)$', metrics,
                      re.M)
        started = worker_logs(out_dir)
        check(m is not None and int(m.group(1)) == len(started),
              "/metrics counts every worker submitted, and each one started (%s, %d logs)" %
              (m and m.group(1), len(started)))
        st, body = s.api("GET", "/api/v1/devices", scope="read")
        dev = {d["name"]: d for d in body["devices"]}.get("emu-slurm", {})
        check(dev.get("state") == "online" and dev.get("slots") == MAX_WORKERS,
              "GET /devices shows the pool's device online with %d slots (%s, %s)" %
              (MAX_WORKERS, dev.get("state"), dev.get("slots")))


def main():
    bins = bins_from_argv()
    gone = slurmcluster.missing()
    if gone:
        print("1..0 # SKIP slurm-wlm/munge not installed (%s); scripts/deps.sh test" %
              ", ".join(gone))
        sys.exit(77)
    try:
        with slurmcluster.Cluster(cpus=MAX_WORKERS + 2, gres=MAX_WORKERS + 2) as cluster:
            cluster.start()
            test(bins, cluster)
    except (Fail, slurmcluster.ClusterError) as e:
        print("not ok -", e, flush=True)
        sys.exit(1)
    print("all checks passed", flush=True)


if __name__ == "__main__":
    main()
