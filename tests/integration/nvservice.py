"""Real numvald + numval-worker + numvalctl processes on 127.0.0.1 for the
integration tests: temp dirs, explicit timeouts, and everything started here is
killed (by its own pid / process group) and removed at the end, even when meson
stops the test with SIGTERM."""
import json
import os
import signal
import socket
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request


def _sigterm(signum, frame):
    raise SystemExit(128 + signum)


signal.signal(signal.SIGTERM, _sigterm)


# Waits for work to finish stretch as meson's timeouts do under the sanitizers
# (scripts/test.sh: --timeout-multiplier 3, NV_TEST_SANITIZER=1), where the pass runs
# two tests at a time on instrumented binaries.
SLOW = 3 if os.environ.get("NV_TEST_SANITIZER") else 1


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)
    print("ok -", what, flush=True)


class Service:
    """bins: dict with 'numvald', 'worker', 'ctl' paths."""

    def __init__(self, bins, lease_ms=2000, max_attempts=5, devices=None, extra_conf=""):
        self.bins = bins
        self.tmp = tempfile.mkdtemp(prefix="numval-it-")
        self.data = os.path.join(self.tmp, "data")
        os.mkdir(self.data)
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.daemon = None
        self.workers = []
        self.logs = []
        self.conf = os.path.join(self.tmp, "numvald.ini")
        lines = ["[server]",
                 "listen = 127.0.0.1:%d" % self.port,
                 "data_dir = %s" % self.data,
                 "worker = %s" % bins["worker"],
                 "anonymous_read = loopback",
                 "",
                 "[limits]",
                 "lease_ms = %d" % lease_ms,
                 "max_attempts = %d" % max_attempts,
                 "claim_max_wait_ms = 2000",
                 ""]
        for name, backend in (devices or {}).items():
            lines += ["[device %s]" % name, "backend = %s" % backend, "slots = 1", ""]
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + extra_conf)
        self.tokens = {}
        self.ctl_reports = []

    # -- processes -------------------------------------------------------------
    def _log(self, name):
        path = os.path.join(self.tmp, "%s.%d.log" % (name, len(self.logs)))
        self.logs.append(path)
        return open(path, "wb")

    def start_daemon(self, timeout=30):
        log = self._log("numvald")
        # A new session: the daemon's own supervised workers share its process
        # group, so cleanup can reach them through the daemon's pid.
        self.daemon = subprocess.Popen([self.bins["numvald"], "--config", self.conf],
                                       stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        log.close()
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.daemon.poll() is not None:
                raise Fail("numvald exited with %s: %s" % (self.daemon.returncode, self.tail()))
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.1)
        raise Fail("numvald did not answer /healthz within %d s" % timeout)

    def kill_daemon(self, sig=signal.SIGKILL):
        if self.daemon and self.daemon.poll() is None:
            try:
                os.killpg(self.daemon.pid, sig)
            except ProcessLookupError:
                pass
            self.daemon.wait(timeout=30)
        self.daemon = None

    def token(self, scope):
        if scope not in self.tokens:
            p = subprocess.run([self.bins["numvald"], "--config", self.conf, "token", "create",
                                "it-" + scope, "--scope", scope],
                               capture_output=True, text=True, timeout=30)
            if p.returncode != 0:
                raise Fail("token create failed: %s %s" % (p.stdout, p.stderr))
            self.tokens[scope] = p.stdout.strip().split()[-1]
        return self.tokens[scope]

    def start_worker(self, device, backend, threads=1, extra=()):
        log = self._log("worker-" + device)
        w = subprocess.Popen([self.bins["worker"], "--server", self.url,
                              "--token", self.token("worker"), "--device", device,
                              "--backend", backend, "--threads", str(threads),
                              "--claim-wait-ms", "1000"] + list(extra),
                             stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.workers.append(w)
        return w

    def kill_worker(self, w, sig=signal.SIGKILL):
        if w.poll() is None:
            w.send_signal(sig)
        w.wait(timeout=30)

    def sanitizer_reports(self):
        """Lines of AddressSanitizer / UBSan reports in any process log: a
        sanitized build's integration run must not have any."""
        found = list(self.ctl_reports)
        for p in self.logs:
            try:
                with open(p, "rb") as f:
                    for line in f.read().decode("utf-8", "replace").splitlines():
                        if "Sanitizer" in line or "runtime error:" in line:
                            found.append("%s: %s" % (os.path.basename(p), line))
            except OSError:
                pass
        return found

    def close(self):
        for w in self.workers:
            if w.poll() is None:
                w.kill()
                w.wait(timeout=30)
        if self.daemon:
            self.kill_daemon(signal.SIGTERM if self.daemon.poll() is None else signal.SIGKILL)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def tail(self, n=3000):
        out = []
        for p in self.logs:
            try:
                with open(p, "rb") as f:
                    out.append("== %s ==\n%s" % (os.path.basename(p),
                                                 f.read()[-n:].decode("utf-8", "replace")))
            except OSError:
                pass
        return "\n".join(out)

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        if et is not None and et is not SystemExit:
            print("# --- logs ---\n" + "\n".join("# " + l for l in self.tail().splitlines()))
        # Stop everything first so the sanitizers' exit-time reports are written.
        for w in self.workers:
            if w.poll() is None:
                w.terminate()
                try:
                    w.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    pass
        if self.daemon and self.daemon.poll() is None:
            self.kill_daemon(signal.SIGTERM)
        reports = self.sanitizer_reports()
        self.close()
        if reports and et is None:
            raise Fail("sanitizer reports in process logs:\n" + "\n".join(reports[:20]))
        return False

    # -- API -------------------------------------------------------------------
    def api(self, method, path, body=None, scope="admin", timeout=30):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if scope:
            req.add_header("Authorization", "Bearer " + self.token(scope))
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                raw = r.read()
                return r.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw)
            except ValueError:
                return e.code, raw

    def job(self, job_id):
        st, body = self.api("GET", "/api/v1/jobs/%s" % job_id, scope="read")
        if st != 200:
            raise Fail("GET job %s: %s %s" % (job_id, st, body))
        return body["job"]

    def artifact_bytes(self, sha):
        """The stored artifact sha's bytes, hash-verified (check)."""
        import hashlib
        with urllib.request.urlopen(self.url + "/api/v1/artifacts/" + sha, timeout=30) as r:
            blob = r.read()
        check(hashlib.sha256(blob).hexdigest() == sha, "artifact %s.. hash-verified" % sha[:12])
        return blob

    def artifact(self, sha):
        """The stored artifact sha decoded: (manifest, tensor records) (nvartifact.parse)."""
        from nvartifact import MAGIC, parse, unzstd
        raw = unzstd(blob=self.artifact_bytes(sha), timeout=60)
        check(raw[:8] == MAGIC, "artifact magic NVARTF01")
        return parse(raw)

    def submit_build(self, spec, device, build):
        """Submit spec on device with build {name, version} = build: the job id (check 201)."""
        st, body = self.api("POST", "/api/v1/jobs", dict(spec, device=device,
                                                         build={"name": build, "version": build}),
                            scope="submit")
        check(st == 201, "submitted %s on %s" % (spec.get("name", spec["kind"]), device))
        return body["job"]["id"]

    def cases(self, job_id):
        out, cursor = [], None
        while True:
            path = "/api/v1/jobs/%s/cases?limit=500" % job_id
            if cursor:
                path += "&cursor=" + urllib.request.quote(cursor)
            st, body = self.api("GET", path, scope="read")
            if st != 200:
                raise Fail("GET cases of %s: %s %s" % (job_id, st, body))
            out += body["cases"]
            cursor = body.get("next_cursor")
            if not cursor:
                return out

    def wait_jobs(self, ids, timeout, tolerate_down=False):
        deadline = time.time() + timeout * SLOW
        pending = set(ids)
        jobs = {}
        while pending and time.time() < deadline:
            for jid in list(pending):
                try:
                    j = self.job(jid)
                except (urllib.error.URLError, ConnectionError, OSError):
                    if not tolerate_down:
                        raise
                    break
                if j["state"] in ("passed", "failed", "error", "cancelled"):
                    jobs[jid] = j
                    pending.discard(jid)
            if pending:
                time.sleep(0.3)
        if pending:
            raise Fail("%d jobs not finished after %d s (e.g. %s)" %
                       (len(pending), timeout * SLOW, self.job(next(iter(pending)))))
        return jobs

    def ctl_popen(self, *args, token_scope="submit"):
        """numvalctl in the background (stdout/stderr to a log); wait on it."""
        env = dict(os.environ, NUMVAL_SERVER=self.url, NUMVAL_TOKEN=self.token(token_scope))
        log = self._log("numvalctl")
        p = subprocess.Popen([self.bins["ctl"]] + list(args), stdout=log,
                             stderr=subprocess.STDOUT, env=env, cwd=self.tmp)
        log.close()
        self.workers.append(p)
        return p

    def ctl(self, *args, timeout=300, token_scope="submit"):
        env = dict(os.environ, NUMVAL_SERVER=self.url, NUMVAL_TOKEN=self.token(token_scope))
        p = subprocess.run([self.bins["ctl"]] + list(args), capture_output=True, text=True,
                           timeout=timeout, env=env, cwd=self.tmp)
        self.ctl_reports += ["numvalctl %s: %s" % (args[0], l) for l in p.stderr.splitlines()
                             if "Sanitizer" in l or "runtime error:" in l]
        return p


def bins_from_argv():
    if len(sys.argv) < 4:
        sys.exit("usage: %s NUMVALD NUMVAL-WORKER NUMVALCTL" % sys.argv[0])
    b = {"numvald": sys.argv[1], "worker": sys.argv[2], "ctl": sys.argv[3]}
    for k, v in b.items():
        if not os.access(v, os.X_OK):
            print("1..0 # SKIP %s not built (%s)" % (k, v))
            sys.exit(77)
    return b


def main(test):
    """Run test(bins) and turn the outcome into an exit status for meson."""
    bins = bins_from_argv()
    try:
        test(bins)
    except Fail as e:
        print("not ok -", e, flush=True)
        sys.exit(1)
    print("all checks passed", flush=True)
