"""Token-exact continuation through the persistent KV store: a server with `--kv-store` answers a prompt
with one token, stops, and a restarted one answers the prompt extended by new tokens as a prefix hit of
every position the first run computed (its full blocks from the store's block files, the rest from the
finished sequence's snapshot file beside them), with the text and logprobs of a server that caches
nothing."""
from conftest import make_tiny_model
import pytest
from server_process import Server, wait_for

MODEL = "tiny-snap"


@pytest.fixture(scope="module")
def tiny_model(deepinfer_bin, tmp_path_factory):
    return make_tiny_model(deepinfer_bin, tmp_path_factory.mktemp("tiny"), seed=23)


def completion(server, prompt, max_tokens):
    body = {"model": MODEL, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "logprobs": 2,
            "ignore_eos": True}
    status, _, out = server.json("POST", "/v1/completions", body)
    assert status == 200, out
    return out


def test_a_restart_with_the_store_resumes_to_the_token(deepinfer_bin, tiny_model, tmp_path):
    first_prompt = [(i * 7919 + 3) % 1000 + 10 for i in range(2 * 128 + 50)]
    store = tmp_path / "kv"
    args = ["--served-model-name", MODEL, "--kv-store", str(store), "--swa-replay", "exact"]
    first = Server(deepinfer_bin, tiny_model, *args)
    try:
        completion(first, first_prompt, 1)  # computes the prompt's 306 positions; the token sampled is not
        assert wait_for(lambda: first.metrics().get("deepinfer:kvstore_writes_total", 0) >= 2)
    finally:
        assert first.stop() == 0, "\n".join(first.log[-50:])
    assert len(list(store.rglob("*.kvs"))) == 2  # the prompt's own (305 positions) and the finished one's (306)
    extended = first_prompt + [11, 12, 13, 14, 15]

    cold_server = Server(deepinfer_bin, tiny_model, "--served-model-name", MODEL, "--no-enable-prefix-caching")
    try:
        cold = completion(cold_server, extended, 4)
    finally:
        assert cold_server.stop() == 0, "\n".join(cold_server.log[-50:])

    again = Server(deepinfer_bin, tiny_model, *args)
    try:
        warm = completion(again, extended, 4)
        # Every position of the first prompt: 2 blocks from the block files, 50 from the snapshot.
        assert warm["usage"]["prompt_tokens_details"]["cached_tokens"] == 2 * 128 + 50
        m = again.metrics()
        assert m[f'deepinfer:snapshot_hits_total{{model_name="{MODEL}"}}'] == 1
        assert m["deepinfer:kvstore_hit_blocks_total"] == 2
        assert warm["choices"][0]["text"] == cold["choices"][0]["text"]
        assert warm["choices"][0]["logprobs"] == cold["choices"][0]["logprobs"]
    finally:
        assert again.stop() == 0, "\n".join(again.log[-50:])
