"""A `deepinfer router` process for the router's tests."""
import http.client
import http.server
import json
import signal
import socket
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


class CuttingRelay:
    """A fault injector in front of a real unit: it relays every request, and cuts a POST's event stream (the
    connection closed mid-body, as a killed unit leaves it) after exactly `cut_after` data events when armed."""

    def __init__(self, unit_port):
        relay = self
        self.cut_after = None
        self.cuts = 0

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def relay(self, method):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
                conn = http.client.HTTPConnection("127.0.0.1", unit_port, timeout=60)
                conn.request(method, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "content-length", "connection"):
                        self.send_header(k, v)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                cut_after, pending, sent = relay.cut_after if method == "POST" else None, b"", 0
                while True:
                    data = resp.read1(65536)
                    if not data:
                        break
                    if cut_after is None:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                        continue
                    pending += data
                    while b"\n\n" in pending:
                        event, pending = pending.split(b"\n\n", 1)
                        event += b"\n\n"
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                        sent += event.startswith(b"data: ")
                        if sent == cut_after:
                            relay.cuts += 1
                            self.wfile.flush()
                            self.connection.shutdown(socket.SHUT_RDWR)
                            self.close_connection = True
                            conn.close()
                            return
                self.wfile.write(b"0\r\n\r\n")
                conn.close()

            def do_GET(self):
                self.relay("GET")

            def do_POST(self):
                self.relay("POST")

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
