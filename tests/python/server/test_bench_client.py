"""`deepinfer bench server`'s client, short runs: against the real `deepinfer serve`, and against a server
that answers with llama_cpp.server's bytes (the llama.cpp peer's wire format, recorded from
llama-cpp-python 0.3.36: `"key": value` with a space, chunked SSE, no usage chunk in streams, no /metrics),
so that the peer's figures are counted the same way as ours."""
import http.server
import json
import subprocess
import threading

import pytest
from conftest import make_tiny_model
from server_process import Server

MODEL = "tiny-bench"


def run_bench(binary, url, tmp_path, *extra):
    out = tmp_path / "figures.json"
    proc = subprocess.run([binary, "bench", "server", "--url", url, "--connections", "1", "--seconds", "1",
                           "--stream-connections", "2", "--json", str(out), *extra],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(out.read_text()), proc.stdout


def test_bench_against_deepinfer_counts_every_token_and_reports_the_overhead(deepinfer_bin, tmp_path):
    model = make_tiny_model(deepinfer_bin, tmp_path / "tiny", seed=3)
    server = Server(deepinfer_bin, model, "--served-model-name", MODEL)
    try:
        figures, text = run_bench(deepinfer_bin, server.url, tmp_path, "--stream-tokens", "5")
    finally:
        assert server.stop() == 0
    assert figures["completions"]["1"]["ok"] > 0 and figures["completions"]["1"]["errors"] == 0, figures
    chat = figures["chat"]
    # ignore_eos: every stream has exactly its 5 tokens (from the usage chunk).
    assert chat["errors"] == 0 and chat["streams"] > 0 and chat["tokens"] == 5 * chat["streams"], chat
    for part in ("stream_overhead_us", "stream_handoff_us", "stream_delivery_us"):
        assert 0 < figures[part]["p50"] <= figures[part]["p99"], (part, figures)
    assert "own work per update" in text


# What llama_cpp.server (sse-starlette over uvicorn) sends for a streamed chat: a role chunk, one chunk per
# token, a finish chunk, [DONE]; JSON written by Python's json.dumps (", " and ": " separators); lines end
# in "\n" (its sep="\n"; sse-starlette's own default is "\r\n", also tested).
def llama_style_stream(tokens, newline):
    def chunk(delta, finish=None):
        return json.dumps({"id": "chatcmpl-1", "model": "m", "created": 1, "object": "chat.completion.chunk",
                           "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]})
    events = [chunk({"role": "assistant"})] + [chunk({"content": f" w{i}"}) for i in range(tokens)]
    events += [chunk({}, "length"), "[DONE]"]
    return [f"data: {e}{newline}{newline}".encode() for e in events]


class LlamaStyleHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    tokens_per_stream = 3
    newline = "\n"

    def log_message(self, *args):
        pass

    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/v1/models":
            self.reply(200, {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "me"}]})
        else:
            self.reply(404, {"detail": "Not Found"})

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/v1/completions":
            self.reply(200, {"id": "cmpl-1", "object": "text_completion", "choices": [
                {"text": " x", "index": 0, "logprobs": None, "finish_reason": "length"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}})
            return
        assert self.path == "/v1/chat/completions" and request["stream"] is True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in llama_style_stream(self.tokens_per_stream, self.newline):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")


@pytest.fixture(params=["\n", "\r\n"], ids=["lf", "crlf"])
def llama_style_server(request):
    handler = type("Handler", (LlamaStyleHandler,), {"newline": request.param})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_bench_counts_llama_cpp_server_tokens_from_its_text_events(deepinfer_bin, tmp_path, llama_style_server):
    figures, text = run_bench(deepinfer_bin, llama_style_server, tmp_path, "--stream-tokens", "3",
                              "--system", "llama-style")
    chat = figures["chat"]
    # No usage chunk: the tokens are the events carrying text, 3 per stream; the role chunk carries none.
    assert chat["errors"] == 0 and chat["streams"] > 0 and chat["tokens"] == 3 * chat["streams"], chat
    assert chat["ttft_p50_ms"] > 0
    assert figures["system"] == "llama-style"
    assert "not reported by this server" in text
