"""A `deepinfer router` process for the router's tests."""
import http.client
import json
import signal
import subprocess
import threading


class Router:
    """A `deepinfer router` process on a free port, waited for until its ready line."""

    def __init__(self, binary, *args):
        self.log = []
        self.proc = subprocess.Popen([binary, "router", "--port", "0", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.port = None
        ready = threading.Event()

        def read():
            for line in self.proc.stdout:
                self.log.append(line.rstrip("\n"))
                if " ready url=" in line:
                    self.port = int(line.split(" ready url=http://127.0.0.1:")[1].split()[0])
                    ready.set()
            ready.set()

        self.reader = threading.Thread(target=read, daemon=True)
        self.reader.start()
        assert ready.wait(30) and self.port, "router not ready:\n" + "\n".join(self.log)

    def request(self, method, path, body=None, headers=None, timeout=60):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        data = None if body is None else (body if isinstance(body, (str, bytes)) else json.dumps(body))
        conn.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        out = (resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
        conn.close()
        return out

    def metrics(self):
        status, _, payload = self.request("GET", "/metrics")
        assert status == 200
        return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
                for line in payload.decode().splitlines() if line and not line.startswith("#")}

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode
