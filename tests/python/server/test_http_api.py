"""The server's non-generating endpoints and every error it answers before generation, each checked for
its status code and its protocol's error shape (OpenAI {"error": {...}} on /v1/* and the vLLM extras;
Anthropic {"type": "error", "error": {...}} on /v1/messages*), against the real `deepinfer serve`."""
import json
import signal
import socket

import pathlib

import pytest
import tokenizers
from conftest import deepinfer_binaries, make_tiny_model
from server_process import Server

MODEL = "tiny-test"
KEY = "sk-test-key"


@pytest.fixture(scope="module")
def tiny_model(deepinfer_bin, tmp_path_factory):
    return make_tiny_model(deepinfer_bin, tmp_path_factory.mktemp("tiny"), seed=5)


@pytest.fixture(scope="module")
def server(deepinfer_bin, tiny_model):
    s = Server(deepinfer_bin, tiny_model, "--served-model-name", MODEL, "--max-request-bytes", "65536",
               "--max-model-len", "2048")
    yield s
    assert s.stop() == 0, "\n".join(s.log)


@pytest.fixture(scope="module")
def keyed(deepinfer_bin, tiny_model):
    s = Server(deepinfer_bin, tiny_model, "--served-model-name", MODEL, "--api-key", KEY)
    yield s
    assert s.stop() == 0


def chat(content="Hi", **extra):
    return {"model": MODEL, "messages": [{"role": "user", "content": content}], **extra}


def anthropic(content="Hi", **extra):
    return {"model": MODEL, "max_tokens": 16, "messages": [{"role": "user", "content": content}], **extra}


def assert_openai_error(body, param=None):
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    if param is not None:
        assert body["error"]["param"] == param


def assert_anthropic_error(body, error_type):
    assert body["type"] == "error"
    assert body["error"]["type"] == error_type
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]


def test_health_version_and_models(server):
    status, _, body = server.json("GET", "/health")
    assert (status, body) == (200, {"status": "ok"})
    status, _, body = server.json("GET", "/version")
    assert status == 200 and body["version"]
    status, _, body = server.json("GET", "/v1/models")
    assert status == 200 and body["object"] == "list"
    assert [m["id"] for m in body["data"]] == [MODEL]
    assert body["data"][0]["max_model_len"] == 2048
    # The Anthropic SDK's shape when it says anthropic-version.
    status, _, body = server.json("GET", "/v1/models", headers={"anthropic-version": "2023-06-01"})
    assert status == 200 and body["data"][0]["type"] == "model" and body["has_more"] is False
    status, _, body = server.json("GET", f"/v1/models/{MODEL}")
    assert status == 200 and body["id"] == MODEL
    status, _, body = server.json("GET", "/v1/models/nope")
    assert status == 404
    assert_openai_error(body, "model")


def test_tokenize_and_detokenize_match_the_reference_tokenizer(server, tiny_model):
    hf = tokenizers.Tokenizer.from_file(str(pathlib.Path(tiny_model) / "tokenizer.json"))
    text = "Hello, world! Ünïcödé, emoji 🦀 and  spaces\n\ttabs."
    reference = hf.encode(text, add_special_tokens=False).ids
    status, _, body = server.json("POST", "/tokenize", {"model": MODEL, "prompt": text})
    assert status == 200
    assert body["tokens"] == reference and body["count"] == len(reference) and body["max_model_len"] == 2048
    status, _, body = server.json("POST", "/detokenize", {"model": MODEL, "tokens": reference})
    assert (status, body) == (200, {"prompt": text})
    # A control token's spelling typed by a user stays text: never the control token's id.
    user_id = hf.encode("<｜User｜>", add_special_tokens=False).ids
    assert len(user_id) == 1
    status, _, body = server.json("POST", "/tokenize", {"prompt": "say <｜User｜> now"})
    assert status == 200 and user_id[0] not in body["tokens"]
    status, _, back = server.json("POST", "/detokenize", {"tokens": body["tokens"]})
    assert back == {"prompt": "say <｜User｜> now"}
    status, _, body = server.json("POST", "/tokenize", {"prompt": "ab", "return_token_strs": True})
    assert status == 200 and "".join(body["token_strs"]) == "ab"


def test_tokenize_messages_is_the_rendered_prompt(server):
    # A chat conversation's tokens are its whole rendered prompt: count_tokens and /tokenize agree.
    messages = [{"role": "user", "content": "What is 2+2?"}]
    status, _, body = server.json("POST", "/tokenize", {"messages": messages})
    assert status == 200 and body["count"] == len(body["tokens"]) > 5
    status, _, counted = server.json("POST", "/v1/messages/count_tokens", {"model": MODEL, "messages": messages})
    assert status == 200 and counted == {"input_tokens": body["count"]}


def test_detokenize_rejects_bad_ids(server):
    status, _, body = server.json("POST", "/detokenize", {"tokens": [1, -5]})
    assert status == 400
    assert_openai_error(body, "tokens[1]")
    status, _, body = server.json("POST", "/detokenize", {"tokens": [10**9]})
    assert status == 400
    status, _, body = server.json("POST", "/detokenize", {"tokens": "abc"})
    assert status == 400


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses", "/v1/completions", "/tokenize"])
def test_malformed_json_is_400_openai_shape(server, path):
    status, _, body = server.json("POST", path, b'{"model": "x", "messages": [')
    assert status == 400
    assert_openai_error(body)


def test_malformed_json_is_400_anthropic_shape(server):
    status, _, body = server.json("POST", "/v1/messages", b"{not json")
    assert status == 400
    assert_anthropic_error(body, "invalid_request_error")


def test_wrong_types_name_the_parameter(server):
    status, _, body = server.json("POST", "/v1/chat/completions", chat(content=3))
    assert status == 400
    assert_openai_error(body, "messages[0].content")
    status, _, body = server.json("POST", "/v1/chat/completions", chat(temperature="hot"))
    assert status == 400
    assert_openai_error(body, "temperature")
    status, _, body = server.json("POST", "/v1/messages", {"model": MODEL, "messages": [{"role": "user", "content": "x"}]})
    assert status == 400
    assert_anthropic_error(body, "invalid_request_error")
    assert "max_tokens" in body["error"]["message"]


def test_unknown_model_is_404_in_each_shape(server):
    status, _, body = server.json("POST", "/v1/chat/completions", {**chat(), "model": "gpt-nope"})
    assert status == 404
    assert_openai_error(body, "model")
    assert body["error"]["code"] == "model_not_found"
    status, _, body = server.json("POST", "/v1/messages", {**anthropic(), "model": "claude-nope"})
    assert status == 404
    assert_anthropic_error(body, "not_found_error")


def test_prompt_longer_than_the_context_is_400(server):
    long_text = "word " * 3000  # > 2048 tokens
    status, _, body = server.json("POST", "/v1/chat/completions", chat(content=long_text))
    assert status == 400
    assert_openai_error(body, "messages")
    assert "maximum context length is 2048" in body["error"]["message"]
    status, _, body = server.json("POST", "/v1/messages", anthropic(content=long_text))
    assert status == 400
    assert_anthropic_error(body, "invalid_request_error")
    assert "prompt is too long" in body["error"]["message"]
    # The completion's room counts too.
    status, _, body = server.json("POST", "/v1/chat/completions", chat(max_tokens=2040))
    assert status == 400


def test_prompt_of_many_megabytes_is_refused_before_it_is_encoded(keyed):
    # 16 MiB of text (about 3.4M tokens, under the default 32 MiB --max-request-bytes) against the model's
    # context: the byte length alone proves it too long (no token spans more than the vocabulary's longest
    # spelling), so the server answers without encoding it, and says the count is a lower bound.
    long_text = "word " * ((16 << 20) // 5)
    auth = {"Authorization": f"Bearer {KEY}"}
    status, _, body = keyed.json("POST", "/v1/chat/completions", chat(content=long_text), headers=auth)
    assert status == 400
    assert_openai_error(body, "messages")
    assert "maximum context length is" in body["error"]["message"]
    assert "in the messages" in body["error"]["message"] and "at least" in body["error"]["message"]
    status, _, body = keyed.json("POST", "/v1/responses", {"model": MODEL, "input": long_text}, headers=auth)
    assert status == 400
    assert_openai_error(body, "input")
    assert "at least" in body["error"]["message"]
    status, _, body = keyed.json("POST", "/v1/messages", anthropic(content=long_text), headers=auth)
    assert status == 400
    assert_anthropic_error(body, "invalid_request_error")
    assert "prompt is too long: at least" in body["error"]["message"]
    # A prompt that fits is still encoded to the end and served.
    status, _, body = keyed.json("POST", "/v1/chat/completions", chat(max_tokens=1), headers=auth)
    assert status == 200, body


def test_body_over_max_request_bytes_is_413(server):
    big = chat(content="x" * 70000)
    status, _, body = server.json("POST", "/v1/chat/completions", big)
    assert status == 413
    assert_openai_error(body)
    status, _, body = server.json("POST", "/v1/messages", anthropic(content="x" * 70000))
    assert status == 413
    assert_anthropic_error(body, "request_too_large")


def test_unknown_endpoint_and_method(server):
    status, _, body = server.json("GET", "/v2/nothing")
    assert status == 404
    assert_openai_error(body)
    status, _, body = server.json("GET", "/v1/chat/completions")
    assert status == 405
    status, _, body = server.json("GET", "/v1/messages")
    assert status == 405
    assert_anthropic_error(body, "invalid_request_error")


def test_request_id_is_echoed_or_made(server):
    status, headers, _ = server.request("GET", "/health", headers={"x-request-id": "abc-123"})
    assert headers["x-request-id"] == "abc-123"
    _, headers2, _ = server.request("GET", "/health")
    _, headers3, _ = server.request("GET", "/health")
    assert len(headers2["x-request-id"]) == 32 and headers2["x-request-id"] != headers3["x-request-id"]
    # An id with control characters or of silly length is replaced.
    _, headers, _ = server.request("GET", "/health", headers={"x-request-id": "a" * 500})
    assert len(headers["x-request-id"]) == 32


def test_api_key(keyed):
    status, _, body = keyed.json("POST", "/v1/chat/completions", chat())
    assert status == 401
    assert_openai_error(body)
    assert body["error"]["code"] == "invalid_api_key"
    status, _, body = keyed.json("POST", "/v1/chat/completions", chat(), headers={"Authorization": "Bearer wrong"})
    assert status == 401
    status, _, body = keyed.json("POST", "/v1/messages", anthropic(), headers={"x-api-key": "wrong"})
    assert status == 401
    assert_anthropic_error(body, "authentication_error")
    status, _, body = keyed.json("POST", "/tokenize", {"prompt": "a"}, headers={"Authorization": f"Bearer {KEY}"})
    assert status == 200
    status, _, body = keyed.json("POST", "/tokenize", {"prompt": "a"}, headers={"x-api-key": KEY})
    assert status == 200
    # Probes stay open.
    assert keyed.request("GET", "/health")[0] == 200
    assert keyed.request("GET", "/metrics")[0] == 200


def test_metrics_count_requests_by_endpoint_and_status(server):
    before = server.metrics()
    server.request("GET", "/v1/models/nope")
    server.request("POST", "/tokenize", {"prompt": "a"})
    after = server.metrics()
    key404 = 'deepinfer:http_requests_total{endpoint="/v1/models/{model}",status="404"}'
    key200 = 'deepinfer:http_requests_total{endpoint="/tokenize",status="200"}'
    assert after[key404] == before.get(key404, 0) + 1
    assert after[key200] == before.get(key200, 0) + 1


def test_sigterm_with_an_idle_keepalive_connection_exits_0(deepinfer_bin, tiny_model):
    s = Server(deepinfer_bin, tiny_model, "--shutdown-grace-s", "5")
    idle = socket.create_connection(("127.0.0.1", s.port))
    assert s.stop(signal.SIGTERM, timeout=10) == 0
    assert any("stopped" in line for line in s.log)
    try:
        assert idle.recv(10) == b""  # closed by the server
    except ConnectionResetError:
        pass
    idle.close()


@pytest.mark.parametrize("binary", deepinfer_binaries())
def test_sigterm_with_streams_in_flight_ends_them_and_exits_0(binary, tiny_model):
    # Grace 0: the streams still generating are aborted, their clients see the stream end, and the process
    # exits 0. On the ASan+UBSan build this is also the leak check of shutdown: every generation's exchange
    # and channel must be released before the server goes (http_server.h), else LeakSanitizer fails the exit.
    s = Server(binary, tiny_model, "--served-model-name", MODEL, "--max-model-len", "2048", "--shutdown-grace-s", "0",
               "--kv-cache-memory-bytes", str(256 << 20))
    clients = []
    try:
        body = json.dumps(chat(stream=True, max_tokens=1900, ignore_eos=True, thinking={"type": "disabled"})).encode()
        for _ in range(4):
            c = socket.create_connection(("127.0.0.1", s.port), timeout=60)
            c.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            clients.append(c)
        for c in clients:
            seen = b""
            while b"data: " not in seen:
                chunk = c.recv(65536)
                assert chunk, seen
                seen += chunk
        assert s.stop(signal.SIGTERM, timeout=60) == 0, "\n".join(s.log[-30:])
        stopped = [line for line in s.log if " stopped" in line]
        assert stopped and "cancelled_requests=" in stopped[0], s.log[-5:]
        # 1,900 tokens each: some were still generating when the signal came.
        assert int(stopped[0].split("cancelled_requests=")[1].split()[0]) >= 1, stopped[0]
        for c in clients:
            try:
                while c.recv(65536):
                    pass  # the rest of the stream, then the server's close
            except ConnectionResetError:
                pass
            c.close()
    finally:
        for c in clients:
            c.close()
        s.stop(signal.SIGKILL)  # after a failure: never left running (a no-op once stopped)
