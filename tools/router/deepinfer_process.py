"""What the router tools share: a `deepinfer serve` or `deepinfer router` process started on a free port (the
command line passes `--port 0`), waited for until its ready line and stopped with a signal and a deadline; a
streamed /v1/completions request whose events are timed as they arrive; and a short scheduler slice for the
threads that time them."""
import ctypes
import http.client
import platform
import json
import re
import signal
import subprocess
import threading
import time


class Process:
    """A deepinfer process on a free port, waited for until its ready line."""

    def __init__(self, argv, ready_timeout_s=300):
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.port, self.log = None, []
        ready = threading.Event()

        def read():
            for line in self.proc.stdout:
                self.log.append(line.rstrip("\n"))
                m = re.search(r" ready url=http://127\.0\.0\.1:(\d+)", line)
                if m:
                    self.port = int(m.group(1))
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(ready_timeout_s) or not self.port:
            self.stop(signal.SIGKILL)
            raise RuntimeError("not ready:\n" + "\n".join(self.log[-30:]))
        self.url = f"http://127.0.0.1:{self.port}"

    def metrics(self):
        """The /metrics samples summed over their labels: {name: value}."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
        conn.close()
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name.split("{")[0]] = out.get(name.split("{")[0], 0) + float(value)
        return out

    def stop(self, sig=signal.SIGTERM, timeout_s=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def stream_completion(port, body, on_event=None, timeout_s=600):
    """POSTs a streamed /v1/completions body and calls on_event(time.perf_counter()) as each data event arrives."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"status {resp.status}: {resp.read()[:200]}")
    pending = b""
    while True:
        data = resp.read1(65536)
        if not data:
            break
        now = time.perf_counter()
        pending += data
        while b"\n\n" in pending:
            event, pending = pending.split(b"\n\n", 1)
            if on_event and event.startswith(b"data: {"):
                on_event(now)
    conn.close()


def ask_short_slice(slice_us=100):
    """Asks the kernel for a short time slice for the calling thread (Linux >= 6.12 on x86-64: sched_setattr's
    sched_runtime under the fair scheduler, as the server's own threads do), so that a thread woken by an event
    preempts a compute thread sharing its core and stamps the event when it arrives, not a slice later. Best
    effort: returns whether the kernel took it."""
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        return False
    sched_setattr, sched_getattr = 314, 315  # x86-64 syscall numbers
    attr = (ctypes.c_uint64 * 6)()  # struct sched_attr: 48 bytes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(sched_getattr, 0, attr, ctypes.sizeof(attr), 0) != 0:
        return False
    policy = attr[0] >> 32
    if policy not in (0, 3):  # SCHED_OTHER, SCHED_BATCH
        return False
    attr[0] = ctypes.sizeof(attr) | (policy << 32)  # size, policy
    attr[1] = 0  # flags
    attr[3] = slice_us * 1000  # sched_runtime; the nice value read above is kept
    return libc.syscall(sched_setattr, 0, attr, 0) == 0
