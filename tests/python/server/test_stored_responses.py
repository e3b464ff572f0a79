"""Stored responses through the official `openai` SDK against a real `deepinfer serve` (tiny random model,
outputs scripted with --enable-test-hooks): `previous_response_id` continues a stored conversation (the
earlier input and output before the new input, so the prompt cache serves the earlier prompt), an unknown
id is 404, a response is visible only to the API key that made it, `store: false` keeps nothing, and
GET /v1/responses/{id} reads one again."""
import openai
import pytest
from conftest import make_tiny_model
from server_process import Server

MODEL = "tiny-store"
KEYS = ("key-one", "key-two")
ANSWER = "It is sunny in Paris."
# Well over two 128-token blocks in the tiny model's tokenizer.
LONG_QUESTION = " ".join(f"word{i}" for i in range(300)) + " What is the weather?"


@pytest.fixture(scope="module")
def server(deepinfer_bin, tmp_path_factory):
    model = make_tiny_model(deepinfer_bin, tmp_path_factory.mktemp("tiny"), seed=7)
    s = Server(deepinfer_bin, model, "--served-model-name", MODEL, "--enable-test-hooks", "--max-model-len", "4096",
               "--kv-cache-memory-bytes", str(256 << 20), "--api-key", KEYS[0], "--api-key", KEYS[1],
               "--responses-store-max-entries", "64")
    yield s
    assert s.stop() == 0, "\n".join(s.log[-50:])


def client(server, key=KEYS[0]):
    return openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0)


def scripted(text):
    return {"deepinfer_test_output": "</think>" + text}


def test_a_continued_conversation_has_the_stored_turn_and_hits_the_cache(server):
    oai = client(server)
    first = oai.responses.create(model=MODEL, input=LONG_QUESTION, extra_body=scripted(ANSWER))
    assert first.output_text == ANSWER
    second = oai.responses.create(model=MODEL, input="And tomorrow?", previous_response_id=first.id,
                                  extra_body=scripted("Rain."))
    assert second.output_text == "Rain."
    # The same conversation sent whole: the continued request's prompt is exactly as long.
    whole = oai.responses.create(model=MODEL, store=False, extra_body=scripted("Rain."), input=[
        {"role": "user", "content": LONG_QUESTION},
        {"role": "assistant", "content": ANSWER},
        {"role": "user", "content": "And tomorrow?"}])
    assert second.usage.input_tokens == whole.usage.input_tokens > first.usage.input_tokens
    # The first turn's full 128-token blocks come from the prefix cache.
    assert second.usage.input_tokens_details.cached_tokens >= (first.usage.input_tokens - 1) // 128 * 128 >= 256
    # A third turn continues the second (whose stored input already holds the first).
    third = oai.responses.create(model=MODEL, input="Thanks.", previous_response_id=second.id,
                                 extra_body=scripted("You are welcome."))
    assert third.usage.input_tokens > second.usage.input_tokens


def test_an_unknown_id_is_404(server):
    with pytest.raises(openai.NotFoundError) as raised:
        client(server).responses.create(model=MODEL, input="hi", previous_response_id="resp_unknown",
                                        extra_body=scripted("x"))
    error = raised.value.body
    assert error["param"] == "previous_response_id"
    assert error["code"] == "previous_response_not_found"
    assert "resp_unknown" in error["message"]


def test_a_response_is_visible_only_to_its_key(server):
    first = client(server).responses.create(model=MODEL, input="hi", extra_body=scripted(ANSWER))
    other = client(server, KEYS[1])
    with pytest.raises(openai.NotFoundError):
        other.responses.create(model=MODEL, input="more", previous_response_id=first.id, extra_body=scripted("x"))
    with pytest.raises(openai.NotFoundError):
        other.responses.retrieve(first.id)
    again = client(server).responses.retrieve(first.id)
    assert again.id == first.id and again.output_text == ANSWER


def test_store_false_keeps_nothing(server):
    oai = client(server)
    unstored = oai.responses.create(model=MODEL, input="hi", store=False, extra_body=scripted(ANSWER))
    with pytest.raises(openai.NotFoundError):
        oai.responses.create(model=MODEL, input="more", previous_response_id=unstored.id, extra_body=scripted("x"))
    with pytest.raises(openai.NotFoundError):
        oai.responses.retrieve(unstored.id)


def test_a_streamed_response_is_stored_too(server):
    oai = client(server)
    with oai.responses.stream(model=MODEL, input="hi", extra_body=scripted(ANSWER)) as stream:
        final = stream.get_final_response()
    assert oai.responses.retrieve(final.id).output_text == ANSWER
    follow = oai.responses.create(model=MODEL, input="more", previous_response_id=final.id, extra_body=scripted("x"))
    assert follow.output_text == "x"


def test_a_continued_response_echoes_the_id_it_continues(server):
    oai = client(server)
    first = oai.responses.create(model=MODEL, input="hi", extra_body=scripted(ANSWER))
    assert first.previous_response_id is None
    second = oai.responses.create(model=MODEL, input="more", previous_response_id=first.id, extra_body=scripted("x"))
    assert second.previous_response_id == first.id
    # The stored copy says so too, and a streamed continuation carries it from its first event on.
    assert oai.responses.retrieve(second.id).previous_response_id == first.id
    with oai.responses.stream(model=MODEL, input="again", previous_response_id=second.id,
                              extra_body=scripted("y")) as stream:
        events = list(stream)
        final = stream.get_final_response()
    created = next(e for e in events if e.type == "response.created")
    assert created.response.previous_response_id == second.id
    assert final.previous_response_id == second.id
