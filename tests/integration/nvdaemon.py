"""A real numvald on 127.0.0.1 (port 0, temp data dir) for the daemon's
integration tests; python3 stdlib only. The daemon is always killed and the
temp dir removed, also when meson stops the test with SIGTERM."""
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


def _sigterm(signum, frame):
    raise SystemExit(128 + signum)


signal.signal(signal.SIGTERM, _sigterm)


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)
    print("ok -", what, flush=True)


class Daemon:
    def __init__(self, numvald, limits=None, server=None):
        self.bin = numvald
        self.tmp = tempfile.mkdtemp(prefix="numvald-it-")
        self.data = os.path.join(self.tmp, "data")
        self.conf = os.path.join(self.tmp, "numvald.ini")
        self.port_file = os.path.join(self.tmp, "port")
        self.log = os.path.join(self.tmp, "numvald.log")
        self.proc = None
        self.port = None
        self.tokens = {}
        self.web = os.path.join(self.tmp, "web")
        os.mkdir(self.web)
        with open(os.path.join(self.web, "index.html"), "w") as f:
            f.write("<!doctype html><title>numval</title>\n")
        with open(os.path.join(self.web, "app.js"), "w") as f:
            f.write("export const x = 1;\n")
        srv = {"listen": "127.0.0.1:0", "data_dir": self.data, "anonymous_read": "loopback",
               "web_dir": self.web}
        srv.update(server or {})
        lines = ["[server]"] + ["%s = %s" % kv for kv in srv.items()] + ["", "[limits]"]
        lines += ["%s = %s" % kv for kv in (limits or {}).items()]
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + "\n")

    def start(self, timeout=20, preexec_fn=None):
        """preexec_fn: run in the child before exec (signal dispositions, rlimits)."""
        if os.path.exists(self.port_file):
            os.unlink(self.port_file)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([self.bin, "--config", self.conf,
                                          "--port-file", self.port_file],
                                         stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True, preexec_fn=preexec_fn)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise Fail("numvald exited with %s: %s" % (self.proc.returncode, self.tail()))
            if os.path.exists(self.port_file):
                with open(self.port_file) as f:
                    txt = f.read().strip()
                if txt:
                    self.port = int(txt)
                    return
            time.sleep(0.05)
        raise Fail("numvald wrote no port file within %d s" % timeout)

    def kill(self, sig=signal.SIGKILL):
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=30)
        rc = self.proc.returncode if self.proc else None
        self.proc = None
        return rc

    def stop(self, timeout=30):
        """SIGTERM: a clean shutdown. Returns (exit status, sanitizer reports in the log)."""
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=timeout)
        self.proc = None
        log = self.tail(1 << 20)
        bad = [l for l in log.splitlines()
               if "ERROR: AddressSanitizer" in l or "ERROR: LeakSanitizer" in l
               or "runtime error:" in l]
        return rc, bad

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def close(self):
        self.kill()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def tail(self, n=4000):
        try:
            with open(self.log, "rb") as f:
                return f.read()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        if et is not None and et is not SystemExit:
            print("# --- numvald log ---\n" + "\n".join("# " + l for l in self.tail().splitlines()))
        self.close()
        return False

    def token(self, scope):
        if scope not in self.tokens:
            p = subprocess.run([self.bin, "--config", self.conf, "token", "create",
                                "it-" + scope, "--scope", scope],
                               capture_output=True, text=True, timeout=30)
            if p.returncode != 0:
                raise Fail("token create: %s %s" % (p.stdout, p.stderr))
            self.tokens[scope] = p.stdout.strip().split()[-1]
        return self.tokens[scope]

    def request(self, method, path, body=None, scope=None, headers=None, raw=None, timeout=30):
        """(status, parsed JSON or bytes, headers) over a fresh connection."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = dict(headers or {})
        if scope:
            h["Authorization"] = "Bearer " + self.token(scope)
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        if data is not None:
            h.setdefault("Content-Type", "application/json")
        try:
            c.request(method, path, body=data, headers=h)
            r = c.getresponse()
            payload = r.read()
            ctype = r.getheader("Content-Type", "")
            if ctype.startswith("application/json") and payload:
                payload = json.loads(payload)
            return r.status, payload, r
        finally:
            c.close()

    def raw(self, data, timeout=5, drip=None):
        """Send raw bytes (drip: seconds between bytes) and read to EOF or timeout."""
        s = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        try:
            if drip:
                for i in range(len(data)):
                    try:
                        s.send(data[i:i + 1])
                    except OSError:
                        break
                    time.sleep(drip)
            else:
                s.sendall(data)
            out = b""
            while True:
                try:
                    d = s.recv(65536)
                except socket.timeout:
                    break
                except ConnectionResetError:
                    break
                if not d:
                    break
                out += d
            return out
        finally:
            s.close()


def raw_status_json(resp):
    """Status code and JSON body of one raw HTTP/1.1 response."""
    head, _, body = resp.partition(b"\r\n\r\n")
    try:
        status = int(head.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return None, None
    try:
        return status, json.loads(body)
    except ValueError:
        return status, body


def main(test):
    if len(sys.argv) < 2 or not os.access(sys.argv[1], os.X_OK):
        print("1..0 # SKIP numvald not built")
        sys.exit(77)
    try:
        test(sys.argv[1])
    except Fail as e:
        print("not ok -", e, flush=True)
        sys.exit(1)
    print("all checks passed", flush=True)
