"""The lenient oneOf option through the real `deepinfer serve` and the official `openai` SDK: a oneOf whose branches
overlap where the grammar has no exact exclusion is a 400 naming oneOf and its pointer by default; the request's
`structured_outputs.one_of_as_any_of` (or the server's `--structured-outputs-one-of-as-any-of`) compiles it as
anyOf, and the response's x-deepinfer-warning header and the server's log then say so. The tiny random model's
output is valid only through the mask, so it is validated against the schema read as anyOf."""
import json
import pathlib
import sys

import jsonschema
import openai
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "server"))
from conftest import make_tiny_model  # noqa: E402
from server_process import Server  # noqa: E402

MODEL = "tiny-lenient"
NO_THINKING = {"thinking": {"type": "disabled"}}
# The enum's [1] is also an array of at most one integer in [0, 1]; the instances other than the enum's arrays
# have no exact form here, so the second branch cannot keep the first out.
OVERLAPPING = {"type": "object", "required": ["v"], "additionalProperties": False,
               "properties": {"v": {"oneOf": [{"enum": [[1], [2]]},
                                              {"type": "array", "maxItems": 1,
                                               "items": {"type": "integer", "minimum": 0, "maximum": 1}}]}}}
AS_ANY_OF = json.loads(json.dumps(OVERLAPPING).replace('"oneOf"', '"anyOf"'))
# Branches of different types: exact as written, so the option changes nothing and nothing is reported.
DISJOINT = {"type": "object", "required": ["v"], "additionalProperties": False,
            "properties": {"v": {"oneOf": [{"type": "boolean"}, {"type": "null"}]}}}


@pytest.fixture(scope="module")
def model(deepinfer_bin, tmp_path_factory):
    return make_tiny_model(deepinfer_bin, tmp_path_factory.mktemp("tiny"), seed=13)


def start(deepinfer_bin, model, *flags):
    return Server(deepinfer_bin, model, "--served-model-name", MODEL, "--max-model-len", "2048",
                  "--kv-cache-memory-bytes", str(128 << 20), *flags)


@pytest.fixture(scope="module")
def server(deepinfer_bin, model):
    s = start(deepinfer_bin, model)
    yield s
    assert s.stop() == 0, "\n".join(s.log[-50:])


def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0)


def ask(server, schema, seed=1, stream=False, **extra):
    return client(server).chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": "A number?"}], max_tokens=64, temperature=1.0, seed=seed,
        response_format={"type": "json_schema", "json_schema": {"name": "n", "schema": schema}}, stream=stream,
        extra_body={**NO_THINKING, **extra})


def test_overlapping_one_of_is_400_naming_keyword_and_pointer_by_default(server):
    with pytest.raises(openai.BadRequestError) as e:
        ask(server, OVERLAPPING)
    assert "'oneOf" in str(e.value) and "#/properties/v" in str(e.value), str(e.value)


@pytest.mark.parametrize("seed", [1, 2])
def test_request_option_compiles_one_of_as_any_of_and_says_so(server, seed):
    raw = ask(server, OVERLAPPING, seed, structured_outputs={"one_of_as_any_of": True})
    warning = raw.headers.get("x-deepinfer-warning")
    assert warning is not None and "oneOf at #/properties/v taken as anyOf" in warning, warning
    choice = raw.parse().choices[0]
    assert choice.finish_reason == "stop"
    jsonschema.validate(json.loads(choice.message.content), AS_ANY_OF)
    assert any("structured output is lenient" in line for line in server.log), "\n".join(server.log[-20:])


def test_streamed_response_carries_the_warning(server):
    raw = ask(server, OVERLAPPING, 3, stream=True, structured_outputs={"one_of_as_any_of": True})
    assert "taken as anyOf" in (raw.headers.get("x-deepinfer-warning") or "")
    text = "".join(c.choices[0].delta.content or "" for c in raw.parse() if c.choices)
    jsonschema.validate(json.loads(text), AS_ANY_OF)


def test_exact_schema_under_the_option_has_no_warning(server):
    raw = ask(server, DISJOINT, 4, structured_outputs={"one_of_as_any_of": True})
    assert raw.headers.get("x-deepinfer-warning") is None
    jsonschema.validate(json.loads(raw.parse().choices[0].message.content), DISJOINT)


def test_option_must_be_a_boolean(server):
    with pytest.raises(openai.BadRequestError) as e:
        ask(server, OVERLAPPING, structured_outputs={"one_of_as_any_of": "yes"})
    assert "structured_outputs.one_of_as_any_of" in str(e.value)


def test_serve_flag_sets_the_default_and_a_request_can_turn_it_off(deepinfer_bin, model):
    s = start(deepinfer_bin, model, "--structured-outputs-one-of-as-any-of")
    try:
        raw = ask(s, OVERLAPPING, 5)
        assert "taken as anyOf" in (raw.headers.get("x-deepinfer-warning") or "")
        jsonschema.validate(json.loads(raw.parse().choices[0].message.content), AS_ANY_OF)
        with pytest.raises(openai.BadRequestError) as e:
            ask(s, OVERLAPPING, 6, structured_outputs={"one_of_as_any_of": False})
        assert "'oneOf" in str(e.value)
    finally:
        assert s.stop() == 0, "\n".join(s.log[-50:])
