"""`deepinfer serve` as a test fixture: started on a free loopback port, waited for until its ready line, and
stopped with SIGTERM at the end (the stop itself is checked: exit code 0 within the grace period)."""
import http.client
import json
import os
import re
import signal
import subprocess
import threading
import time


class Server:
    def __init__(self, binary, model_dir, *args, env=None, ready_timeout=120):
        self.log = []
        full_env = dict(os.environ)
        full_env.update(env or {})
        # Without a capacity the store keeps its filesystem below 90% used, evicting its own blocks when the
        # host's disk is fuller than that for other reasons: a test's store gets a capacity of its own, so what
        # it finds does not depend on how full the machine's disk is (a test of capacity sets its own).
        if "--kv-store" in args and "--kv-store-capacity" not in args:
            args = (*args, "--kv-store-capacity", str(1 << 30))
        # model_dir None: the embedded default model.
        self.proc = subprocess.Popen([binary, "serve", *([model_dir] if model_dir else []), "--port", "0", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, env=full_env)
        self.port = None
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._ready.wait(ready_timeout):
            self.stop()
            raise AssertionError("server not ready:\n" + "\n".join(self.log))
        self.url = f"http://127.0.0.1:{self.port}"

    def _read(self):
        for line in self.proc.stdout:
            self.log.append(line.rstrip("\n"))
            match = re.search(r" ready url=http://127\.0\.0\.1:(\d+)", line)
            if match:
                self.port = int(match.group(1))
                self._ready.set()
        self._ready.set()

    def request(self, method, path, body=None, headers=None, timeout=60):
        """(status, headers dict with lower-case names, body bytes) of one request on a fresh connection."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        data = body if isinstance(body, (bytes, type(None))) else (body if isinstance(body, str) else json.dumps(body))
        if isinstance(data, str):
            data = data.encode()
        conn.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        payload = resp.read()
        result = (resp.status, {k.lower(): v for k, v in resp.getheaders()}, payload)
        conn.close()
        return result

    def json(self, method, path, body=None, headers=None):
        status, headers_out, payload = self.request(method, path, body, headers)
        return status, headers_out, json.loads(payload)

    def metrics(self):
        """The /metrics samples as {name{labels}: value}."""
        status, _, payload = self.request("GET", "/metrics")
        assert status == 200
        samples = {}
        for line in payload.decode().splitlines():
            if line and not line.startswith("#"):
                key, value = line.rsplit(" ", 1)
                samples[key] = float(value)
        return samples

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(5)
        return self.proc.returncode


def wait_for(predicate, timeout=10, interval=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()
