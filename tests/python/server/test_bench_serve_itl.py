"""`deepinfer bench serve` counts inter-token latency by token where the stream says how many tokens each
event carries (a server holds back a token that ends inside a UTF-8 character and sends its text with the
next one): vLLM's and deepinfer's `token_ids` (return_token_ids), llama-server's running `timings.predicted_n`
(timings_per_token); by event where the stream says neither. A stand-in server streams events of 1, 1, 2, 1
and 3 tokens in each form."""
import http.server
import json
import subprocess
import threading

import pytest

TOKENS_PER_EVENT = [1, 1, 2, 1, 3]


def completion_events(style):
    events, generated = [], 0
    for i, k in enumerate(TOKENS_PER_EVENT):
        generated += k
        choice = {"index": 0, "text": f" w{i}", "logprobs": None, "finish_reason": None}
        event = {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m", "choices": [choice]}
        if style == "token_ids":
            choice["token_ids"] = list(range(generated - k, generated))
        elif style == "timings":
            event["timings"] = {"predicted_n": generated, "predicted_ms": 1.0}
        events.append(json.dumps(event))
    events.append(json.dumps({"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m",
                              "choices": [{"index": 0, "text": "", "logprobs": None, "finish_reason": "length"}]}))
    events.append(json.dumps({"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m", "choices": [],
                              "usage": {"prompt_tokens": 3, "completion_tokens": generated,
                                        "total_tokens": 3 + generated}}))
    events.append("[DONE]")
    return [f"data: {e}\n\n".encode() for e in events]


class StreamHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    style = "none"

    def log_message(self, *args):
        pass

    def seen(self, request):
        pass

    def do_GET(self):
        data = json.dumps({"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "me"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen(request)
        # Each server is asked for its per-token data in both forms.
        assert request["stream"] is True and request["return_token_ids"] is True
        assert request["timings_per_token"] is True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in completion_events(self.style):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")


@pytest.fixture(params=["token_ids", "timings", "none"])
def stream_server(request):
    handler = type("Handler", (StreamHandler,), {"style": request.param})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield request.param, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_itl_counts_each_token_of_an_event_where_the_stream_reports_them(deepinfer_bin, tmp_path, stream_server):
    style, url = stream_server
    out = tmp_path / "serve.json"
    proc = subprocess.run([deepinfer_bin, "bench", "serve", "--url", url, "--concurrency", "2",
                           "--requests-per-client", "1", "--prompt-tokens", "3", "--output-tokens", "8",
                           "--json", str(out)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for label in ("cold x2", "warm x2"):
        phase = json.loads(out.read_text())["deepinfer"]["phases"][label]
        assert phase["requests"] == 2 and phase["errors"] == 0 and phase["short_outputs"] == 0, phase
        if style == "none":
            # Four gaps per stream, one per event after the first, whatever each event carried.
            assert (phase["itl_counted_by"], phase["itl_samples"], phase["multi_token_events"]) == ("event", 8, 0)
        else:
            # 8 tokens after the first event's 1: 7 gaps per stream; the events of 2 and 3 tokens counted apart.
            assert (phase["itl_counted_by"], phase["itl_samples"], phase["multi_token_events"]) == ("token", 14, 4)
    by = "event" if style == "none" else "token"
    assert f"cold x2          by {by}; {0 if style == 'none' else 4} of 8 events carried several tokens" in proc.stdout


def test_completions_a_server_cuts_short_are_counted_and_flagged(deepinfer_bin, tmp_path):
    # The stand-in streams 8 tokens whatever it is asked for (as llama-server does at a slot's share of its
    # context): asked for 12, every completion is short, and the output says the work differed.
    handler = type("Handler", (StreamHandler,), {"style": "token_ids"})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    out = tmp_path / "serve.json"
    try:
        proc = subprocess.run([deepinfer_bin, "bench", "serve", "--url", f"http://127.0.0.1:{server.server_address[1]}",
                               "--concurrency", "2", "--requests-per-client", "1", "--prompt-tokens", "3",
                               "--output-tokens", "12", "--json", str(out)], capture_output=True, text=True, timeout=60)
    finally:
        server.shutdown()
        server.server_close()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for label in ("cold x2", "warm x2"):
        phase = json.loads(out.read_text())["deepinfer"]["phases"][label]
        assert (phase["requests"], phase["short_outputs"]) == (2, 2), phase
        assert f"WARNING: deepinfer {label}: 2 of 2 completions ended before the tokens asked for" in proc.stdout


class RecordingHandler(StreamHandler):
    style = "token_ids"
    prompts = None  # (port, words) of every completion request, in arrival order

    def seen(self, request):
        self.prompts.append((self.server.server_address[1], len(request["prompt"].split())))


def test_prompt_lengths_drawn_from_a_range_are_the_same_for_both_servers(deepinfer_bin, tmp_path):
    prompts = []
    handler = type("Handler", (RecordingHandler,), {"prompts": prompts})
    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    ours, peer = (server.server_address[1] for server in servers)
    try:
        proc = subprocess.run([deepinfer_bin, "bench", "serve", "--url", f"http://127.0.0.1:{ours}",
                               "--peer-url", f"http://127.0.0.1:{peer}", "--concurrency", "1",
                               "--requests-per-client", "12", "--prompt-tokens", "20,40", "--output-tokens", "8"],
                              capture_output=True, text=True, timeout=60)
        reversed_range = subprocess.run([deepinfer_bin, "bench", "serve", "--url", f"http://127.0.0.1:{ours}",
                                         "--prompt-tokens", "40,20"], capture_output=True, text=True, timeout=60)
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "prompts of 20-40 words" in proc.stdout
    lengths = {port: [words for p, words in prompts if p == port] for port in (ours, peer)}
    # One client sends 12 prompts in its cold round and the same 12 again warm, to each server in turn.
    assert len(lengths[ours]) == 24 and lengths[ours] == lengths[peer]
    assert lengths[ours][:12] == lengths[ours][12:]
    assert all(20 <= n <= 40 for n in lengths[ours]) and len(set(lengths[ours])) > 1, lengths
    assert reversed_range.returncode != 0 and "MIN <= MAX" in reversed_range.stderr
