#!/usr/bin/env python3
"""Remote workers over TLS: the shipped nginx configuration
(packaging/nginx/numval.conf, templated only for ports and certificate paths)
in front of a real numvald, with a CA and a server certificate for
127.0.0.1/localhost made by openssl for this run.

Checked: numvalctl --cacert submits and reads through https; without --cacert,
or with another CA, it fails naming the server and the certificate problem; a
numval-worker agent with --cacert and a per-host token claims and completes a
job through nginx, and without --cacert stops naming the server and the curl
error; TLS 1.2 is refused and HSTS is sent; an anonymous read through the
proxy is refused while a direct loopback one still works; a token bound to one
device cannot claim or heartbeat for another (403 naming the device). Then a
numvald with [server] trusted_proxy judges the proxy's requests by the last
X-Forwarded-For address.

Skipped (exit 77) only when nginx or openssl is not installed."""
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time

from nvservice import Fail, Service, check, free_port, main

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JOB = {"kind": "op", "op": "exp", "dtypes": ["fp32"], "shapes": [[64]],
       "layouts": ["contiguous"], "inputs": ["normal"], "seed": 5}


def which(prog):
    return shutil.which(prog) or shutil.which(prog, path="/usr/sbin:/sbin:/usr/bin")


def run(*args):
    p = subprocess.run(list(args), capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise Fail("%s failed: %s" % (" ".join(args[:3]), p.stderr[-500:]))


def make_pki(d):
    """A CA, a server certificate it signs for 127.0.0.1 and localhost, and an
    unrelated second CA."""
    ossl = which("openssl")
    for ca in ("ca", "other-ca"):
        run(ossl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
            "-nodes", "-keyout", os.path.join(d, ca + ".key"), "-out", os.path.join(d, ca + ".pem"),
            "-days", "2", "-subj", "/CN=numval test %s" % ca,
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    run(ossl, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", os.path.join(d, "server.key"), "-out", os.path.join(d, "server.csr"),
        "-subj", "/CN=localhost")
    ext = os.path.join(d, "server.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName = IP:127.0.0.1, DNS:localhost\nbasicConstraints = CA:FALSE\n"
                "extendedKeyUsage = serverAuth\nkeyUsage = critical, digitalSignature\n")
    run(ossl, "x509", "-req", "-in", os.path.join(d, "server.csr"), "-CA",
        os.path.join(d, "ca.pem"), "-CAkey", os.path.join(d, "ca.key"), "-CAcreateserial",
        "-out", os.path.join(d, "server.pem"), "-days", "2", "-extfile", ext)


def template(text, subs):
    """The shipped config with each (old, new) replaced exactly once, so that a
    change to the shipped file's shape fails here instead of testing another file."""
    for old, new in subs:
        if text.count(old) != 1:
            raise Fail("packaging/nginx/numval.conf: expected one '%s', found %d" %
                       (old, text.count(old)))
        text = text.replace(old, new)
    return text


class Nginx:
    def __init__(self, d, numvald_port):
        self.d = os.path.join(d, "nginx")
        os.mkdir(self.d)
        self.port = free_port()
        with open(os.path.join(SRC, "packaging", "nginx", "numval.conf")) as f:
            site = template(f.read(), [
                ("server 127.0.0.1:8080;", "server 127.0.0.1:%d;" % numvald_port),
                ("listen 443 ssl;", "listen 127.0.0.1:%d ssl;" % self.port),
                ("listen [::]:443 ssl;\n", ""),
                ("server_name numval.example.org;", "server_name localhost;"),
                ("/etc/ssl/numval/fullchain.pem", os.path.join(d, "server.pem")),
                ("/etc/ssl/numval/privkey.pem", os.path.join(d, "server.key"))])
        with open(os.path.join(self.d, "numval.conf"), "w") as f:
            f.write(site)
        temps = "".join("    %s_temp_path %s;\n" % (t, os.path.join(self.d, t))
                        for t in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        # As root, nginx's workers would switch to "nobody", who cannot read
        # the temp dir: keep them as the user running the test.
        user = "user root;\n" if os.geteuid() == 0 else ""
        with open(os.path.join(self.d, "nginx.conf"), "w") as f:
            f.write("daemon off;\nworker_processes 1;\n%spid %s;\nerror_log %s info;\n"
                    "events { worker_connections 64; }\n"
                    "http {\n    access_log %s;\n%s    include %s;\n}\n" %
                    (user, os.path.join(self.d, "nginx.pid"), os.path.join(self.d, "error.log"),
                     os.path.join(self.d, "access.log"), temps,
                     os.path.join(self.d, "numval.conf")))
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(
            [which("nginx"), "-p", self.d, "-c", os.path.join(self.d, "nginx.conf"),
             "-e", os.path.join(self.d, "error.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise Fail("nginx exited with %s: %s" % (self.proc.returncode, self.log()))
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise Fail("nginx did not listen on %d within 20 s" % self.port)

    def log(self):
        try:
            with open(os.path.join(self.d, "error.log")) as f:
                return f.read()[-2000:]
        except OSError:
            return ""

    def stop(self):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=20)


def https(port, cafile, method, path, body=None, token=None, headers=None, ctx=None):
    """(status, JSON or bytes, response) over TLS, verifying against cafile."""
    if ctx is None:
        ctx = ssl.create_default_context(cafile=cafile)
    c = http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=ctx)
    h = dict(headers or {})
    if token:
        h["Authorization"] = "Bearer " + token
    data = json.dumps(body).encode() if body is not None else None
    if data is not None:
        h["Content-Type"] = "application/json"
    try:
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        raw = r.read()
        try:
            return r.status, json.loads(raw) if raw else None, r
        except ValueError:
            return r.status, raw, r
    finally:
        c.close()


def plain(port, method, path, body=None, token=None, headers=None, source=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30,
                                   source_address=(source, 0) if source else None)
    h = dict(headers or {})
    if token:
        h["Authorization"] = "Bearer " + token
    data = json.dumps(body).encode() if body is not None else None
    if data is not None:
        h["Content-Type"] = "application/json"
    try:
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        raw = r.read()
        return r.status, json.loads(raw) if raw else None
    finally:
        c.close()


def emsg(body):
    """The error message of a JSON error body, or the body itself."""
    e = body.get("error") if isinstance(body, dict) else None
    return e.get("message", "") if isinstance(e, dict) else str(body)[:300]


def bound_token(s, name, devices):
    p = subprocess.run([s.bins["numvald"], "--config", s.conf, "token", "create", name,
                        "--scope", "worker", "--device", devices],
                       capture_output=True, text=True, timeout=30)
    check(p.returncode == 0, "numvald token create %s --scope worker --device %s (%s)" %
          (name, devices, p.stderr.strip()[-200:]))
    return p.stdout.strip().split()[-1]


def ctl(s, url, *args, cacert=None, token_scope="submit"):
    env = {k: v for k, v in os.environ.items() if k != "NUMVAL_CACERT"}
    env.update(NUMVAL_SERVER=url, NUMVAL_TOKEN=s.token(token_scope))
    cmd = [s.bins["ctl"]] + (["--cacert", cacert] if cacert else []) + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=s.tmp)


def check_clients(s, ng, d):
    url = "https://127.0.0.1:%d" % ng.port
    ca, other = os.path.join(d, "ca.pem"), os.path.join(d, "other-ca.pem")

    # numvalctl: verified against --cacert, refused without it or with another CA.
    p = ctl(s, url, "jobs", cacert=ca, token_scope="read")
    check(p.returncode == 0, "numvalctl --cacert CA jobs through nginx: exit 0 (%s)" %
          p.stderr[-300:])
    p = ctl(s, url, "jobs", token_scope="read")
    check(p.returncode == 2 and url in p.stderr and "certificate" in p.stderr and
          "--cacert" in p.stderr,
          "numvalctl without --cacert: exit 2 naming the server and the certificate (%s)" %
          p.stderr.strip()[-300:])
    p = ctl(s, url, "jobs", cacert=other, token_scope="read")
    check(p.returncode == 2 and "does not verify" in p.stderr,
          "numvalctl --cacert OTHER-CA: exit 2, the certificate does not verify (%s)" %
          p.stderr.strip()[-300:])
    env = dict(os.environ, NUMVAL_SERVER=url, NUMVAL_TOKEN=s.token("read"), NUMVAL_CACERT=ca)
    p = subprocess.run([s.bins["ctl"], "jobs"], capture_output=True, text=True, timeout=60,
                       env=env)
    check(p.returncode == 0, "NUMVAL_CACERT works as --cacert (%s)" % p.stderr[-300:])

    with open(os.path.join(s.tmp, "job.json"), "w") as f:
        json.dump(JOB, f)
    p = ctl(s, url, "submit", "job.json", "--device", "emu-tls", "--new-device")
    check(p.returncode == 2 and "does not verify" in p.stderr and "retrying" not in p.stderr,
          "numvalctl submit without --cacert: exit 2 at once, no retry (%s)" %
          p.stderr.strip()[-300:])

    p = subprocess.run([s.bins["numvald"], "--config", s.conf, "token", "create", "bad",
                        "--scope", "read", "--device", "emu-tls"],
                       capture_output=True, text=True, timeout=30)
    check(p.returncode == 2 and "'worker'" in p.stderr and not p.stdout,
          "token create --scope read --device: refused naming the worker scope (%s)" %
          p.stderr.strip())

    # The worker without --cacert stops at its first claim, naming what is wrong.
    tok_a = bound_token(s, "host-a", "emu-tls")
    w = subprocess.run([s.bins["worker"], "--server", url, "--device", "emu-tls",
                        "--backend", "emu", "--claim-wait-ms", "500"],
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, NUMVAL_TOKEN=tok_a))
    check(w.returncode == 2 and url in w.stderr and "certificate" in w.stderr.lower(),
          "numval-worker without --cacert: exit 2 naming the server and the curl error (%s)" %
          w.stderr.strip()[-300:])

    # A job submitted through https, claimed and completed by a worker through https.
    log = open(os.path.join(s.tmp, "worker-tls.log"), "wb")
    s.logs.append(log.name)
    wk = subprocess.Popen([s.bins["worker"], "--server", url, "--cacert", ca, "--device",
                           "emu-tls", "--backend", "emu", "--claim-wait-ms", "1000"],
                          stdout=log, stderr=subprocess.STDOUT,
                          env=dict(os.environ, NUMVAL_TOKEN=tok_a))
    log.close()
    s.workers.append(wk)
    p = ctl(s, url, "submit", "job.json", "--device", "emu-tls", "--new-device", "--wait",
            "--timeout", "240",
            cacert=ca)
    check(p.returncode == 0, "numvalctl --cacert submit --wait through nginx: the job passed "
          "(exit %d: %s)" % (p.returncode, p.stderr[-400:]))
    jid = p.stdout.strip()
    st, body, _ = https(ng.port, ca, "GET", "/api/v1/jobs/" + jid, token=s.token("read"))
    check(st == 200 and body["job"]["state"] == "passed" and body["job"]["device"] == "emu-tls",
          "job %s read back through https: passed on emu-tls" % jid)
    wk.terminate()
    wk.wait(timeout=30)
    return tok_a


def check_tls_and_proxy(s, ng, d, tok_a):
    ca = os.path.join(d, "ca.pem")
    st, _, r = https(ng.port, ca, "GET", "/healthz")
    hsts = r.getheader("Strict-Transport-Security", "")
    check(st == 200 and "max-age=" in hsts, "HSTS on every answer (%r)" % hsts)
    old = ssl.create_default_context(cafile=ca)
    old.maximum_version = ssl.TLSVersion.TLSv1_2
    try:
        https(ng.port, ca, "GET", "/healthz", ctx=old)
        refused = False
    except ssl.SSLError:
        refused = True
    check(refused, "a TLS 1.2 handshake is refused (modern TLS only)")

    # anonymous_read = loopback: through the proxy the client is not judged
    # to be on this host; directly, on loopback, it is.
    st, body, _ = https(ng.port, ca, "GET", "/api/v1/jobs")
    check(st == 401 and "proxy" in emsg(body),
          "anonymous read through nginx refused: 401 (%d %s)" % (st, emsg(body)))
    st, body = plain(s.port, "GET", "/api/v1/jobs")
    check(st == 200, "anonymous read straight to numvald on loopback: 200")
    st, body = plain(s.port, "GET", "/api/v1/jobs", headers={"X-Forwarded-For": "203.0.113.7"})
    check(st == 401, "a loopback peer carrying X-Forwarded-For is not judged loopback: %d" % st)
    st, body, _ = https(ng.port, ca, "GET", "/api/v1/jobs", token=s.token("read"))
    check(st == 200, "a read with a token through nginx: 200")

    # Per-host token: device emu-tls only, through the proxy.
    st, body, _ = https(ng.port, ca, "POST", "/api/v1/worker/claim",
                        {"device": "emu-other", "wait_ms": 0}, token=tok_a)
    msg = emsg(body)
    check(st == 403 and "'emu-other'" in msg and "host-a" in msg,
          "token bound to emu-tls claims for emu-other: 403 naming the device (%s)" % msg)
    st, body, _ = https(ng.port, ca, "POST", "/api/v1/worker/claim",
                        {"device": "emu-tls", "wait_ms": 0}, token=tok_a)
    check(st == 204, "the same token claims for emu-tls: 204, nothing queued (%d)" % st)

    # A lease on emu-other (claimed by an unbound token) is not the bound token's to touch.
    with open(os.path.join(s.tmp, "job.json")) as f:
        spec = json.load(f)
    st, body = s.api("POST", "/api/v1/jobs", dict(spec, device="emu-other"), scope="submit")
    check(st == 201, "job for emu-other queued (%d %s)" % (st, body))
    st, body = s.api("POST", "/api/v1/worker/claim", {"device": "emu-other", "wait_ms": 5000},
                     scope="worker")
    check(st == 200, "an unbound worker token claims for emu-other (%d)" % st)
    lease = {"job_id": body["job"]["id"], "lease_token": body["job"]["lease_token"]}
    st, body = plain(s.port, "POST", "/api/v1/worker/heartbeat", lease, token=tok_a)
    check(st == 403 and "emu-other" in emsg(body),
          "the bound token heartbeats that lease: 403 naming the job's device (%s)" % emsg(body))
    st, body = plain(s.port, "POST", "/api/v1/worker/result",
                     dict(lease, result={"verdict": "passed", "cases": []}), token=tok_a)
    check(st == 403, "the bound token posts a result for it: 403 (%d)" % st)
    st, body = s.api("POST", "/api/v1/worker/heartbeat", lease, scope="worker")
    check(st == 200, "the lease holder still heartbeats it: 200 (%d)" % st)
    # A job submitted for no device is the claiming device's: the bound token
    # that claimed it for emu-tls heartbeats and completes it.
    st, body = s.api("POST", "/api/v1/jobs", spec, scope="submit")
    check(st == 201 and not body["job"].get("device"), "an untargeted job queued (%d)" % st)
    st, body = plain(s.port, "POST", "/api/v1/worker/claim", {"device": "emu-tls", "wait_ms": 5000},
                     token=tok_a)
    check(st == 200, "the bound token claims it for emu-tls (%d)" % st)
    lease = {"job_id": body["job"]["id"], "lease_token": body["job"]["lease_token"]}
    st, body = plain(s.port, "POST", "/api/v1/worker/heartbeat", lease, token=tok_a)
    check(st == 200, "and heartbeats it: 200 (%d %s)" % (st, emsg(body)))
    st, body = plain(s.port, "POST", "/api/v1/worker/result",
                     dict(lease, result={"verdict": "passed", "cases": []}), token=tok_a)
    check(st == 200, "and posts its result: 200 (%d %s)" % (st, emsg(body)))


def check_trusted_proxy(bins):
    """[server] trusted_proxy = 127.0.0.2: requests from that address are
    judged by the last X-Forwarded-For entry; others as before."""
    with Service(bins, extra_conf="\n[server]\ntrusted_proxy = 127.0.0.2\n") as s:
        s.start_daemon()
        cases = [("127.0.0.1", None, 200, "direct loopback client"),
                 ("127.0.0.2", "203.0.113.7", 401, "proxy forwarding an internet client"),
                 ("127.0.0.2", "127.0.0.1", 200, "proxy forwarding a client on this host"),
                 ("127.0.0.2", "127.0.0.1, 203.0.113.7", 401,
                  "proxy: a spoofed first X-Forwarded-For entry does not count"),
                 ("127.0.0.2", None, 401, "proxy request without X-Forwarded-For"),
                 ("127.0.0.1", "127.0.0.1", 401, "X-Forwarded-For from a peer not trusted")]
        for src, xff, want, what in cases:
            st, _ = plain(s.port, "GET", "/api/v1/jobs", source=src,
                          headers={"X-Forwarded-For": xff} if xff else None)
            check(st == want, "trusted_proxy: %s (from %s, X-Forwarded-For %r): %d" %
                  (what, src, xff, st))


def test(bins):
    if not which("nginx") or not which("openssl"):
        print("1..0 # SKIP nginx or openssl not installed (scripts/deps.sh test)")
        raise SystemExit(77)
    with Service(bins, lease_ms=3000) as s:
        make_pki(s.tmp)
        s.start_daemon()
        ng = Nginx(s.tmp, s.port)
        try:
            ng.start()
            tok_a = check_clients(s, ng, s.tmp)
            check_tls_and_proxy(s, ng, s.tmp, tok_a)
        except Fail:
            print("# --- nginx error log ---\n" +
                  "\n".join("# " + l for l in ng.log().splitlines()[-20:]))
            raise
        finally:
            ng.stop()
    check_trusted_proxy(bins)


if __name__ == "__main__":
    main(test)
