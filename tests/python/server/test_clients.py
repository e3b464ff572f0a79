"""Client libraries nobody on the project wrote, against the real `deepinfer serve` on the embedded default model:
instructor, langchain-openai, the OpenAI Agents SDK and litellm, each in the modes its users pick for structured
output and forced tool calls. The weights are random, so the text is noise: each test checks the protocol (a call
comes back when one is forced, its arguments validate against the schema the client sent, an answer parses as the
client's type), which only the server's grammars (tool-call blocks, response formats) make hold. Thinking is
disabled (a forced tool_choice needs it off, and a random model need not close its reasoning), and every request
is seeded or short, so each run gives the same outputs.

A server without a generation engine answers 503; these tests then skip, saying so."""
import asyncio
import json
import os
from typing import Literal

import jsonschema
import openai
import pytest
from pydantic import BaseModel, ConfigDict
from server_process import Server

# litellm fetches a price list from the network when imported unless told to use its own copy.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

MODEL = "deepinfer-clients"
NO_THINKING = {"thinking": {"type": "disabled"}}
MAX_TOKENS = 200
SEED = 3


class Weather(BaseModel):
    """A finite language (an enum and a boolean, no other members), so a constrained answer always ends well within
    MAX_TOKENS."""
    model_config = ConfigDict(extra="forbid")
    city: Literal["Paris", "Oslo", "Rome"]
    sunny: bool


CITY_ARGS = {"type": "object", "additionalProperties": False, "required": ["city"],
             "properties": {"city": {"type": "string", "enum": ["Paris", "Oslo", "Rome"]}}}


@pytest.fixture(scope="module")
def server(deepinfer_bin):
    s = Server(deepinfer_bin, None, "--served-model-name", MODEL)
    yield s
    assert s.stop() == 0, "\n".join(s.log[-50:])


@pytest.fixture
def oai(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0)


# ---- instructor ------------------------------------------------------------------------------------------------

# JSON_SCHEMA: response_format json_schema. TOOLS: a named tool without `strict`, whose forced call the server
# constrains to the schema as written. TOOLS_STRICT: the same request (instructor sends no `strict` flag).
@pytest.mark.parametrize("mode", ["JSON_SCHEMA", "TOOLS", "TOOLS_STRICT"])
def test_instructor_chat_modes(oai, mode):
    import instructor
    client = instructor.from_openai(oai, mode=instructor.Mode[mode])
    # One call only: a random model would otherwise go on calling the tool until max_tokens.
    one_call = {} if mode == "JSON_SCHEMA" else {"parallel_tool_calls": False}
    weather = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Weather in Oslo?"}],
                                             response_model=Weather, max_tokens=MAX_TOKENS, seed=SEED, max_retries=0,
                                             extra_body=NO_THINKING, **one_call)
    assert isinstance(weather, Weather)


# RESPONSES_TOOLS: a Responses function tool without `strict` (strict by default there), named in tool_choice,
# and text.format set to the same schema: the forced call must come out, not the format's JSON.
def test_instructor_responses_tools(oai):
    import instructor
    client = instructor.from_openai(oai, mode=instructor.Mode.RESPONSES_TOOLS)
    weather = client.responses.create(model=MODEL, input=[{"role": "user", "content": "Weather in Oslo?"}],
                                      response_model=Weather, max_tokens=MAX_TOKENS, max_retries=0,
                                      reasoning={"effort": "none"}, parallel_tool_calls=False)
    assert isinstance(weather, Weather)


# ---- langchain-openai ------------------------------------------------------------------------------------------

@pytest.fixture
def chat_model(server):
    from langchain_openai import ChatOpenAI
    return ChatOpenAI(model=MODEL, base_url=server.url + "/v1", api_key="none", max_retries=0, seed=SEED,
                      max_tokens=MAX_TOKENS, extra_body=NO_THINKING)


# json_schema: response_format with strict; function_calling: a named tool (strict here, as langchain sends when
# asked; without it the schema as written constrains the call all the same).
@pytest.mark.parametrize("method,strict", [("json_schema", None), ("function_calling", True),
                                           ("function_calling", None)])
def test_langchain_structured_output(chat_model, method, strict):
    structured = chat_model.with_structured_output(Weather, method=method, strict=strict)
    assert isinstance(structured.invoke("Weather in Oslo?"), Weather)


# bind_tools(tool_choice="any"): "required" on the wire, non-strict tools; a call of a listed tool comes back.
def test_langchain_bind_tools_any(chat_model):
    def get_weather(city: Literal["Paris", "Oslo", "Rome"]) -> str:
        """Weather of a city."""

    def get_time(zone: Literal["UTC", "CET"]) -> str:
        """Time in a zone."""

    message = chat_model.bind_tools([get_weather, get_time], tool_choice="any",
                                    parallel_tool_calls=False).invoke("Weather in Oslo?")
    assert len(message.tool_calls) == 1, message
    call = message.tool_calls[0]
    assert call["name"] in ("get_weather", "get_time")
    assert call["args"].get("city" if call["name"] == "get_weather" else "zone") is not None, call


# ---- OpenAI Agents SDK -----------------------------------------------------------------------------------------

def run_agent(server, make_agent, tool_choice=None):
    """Runs the agent make_agent(model, settings, tool) builds on the Responses API and returns (result, the
    tool's calls)."""
    from agents import ModelSettings, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
    from openai.types.shared import Reasoning
    set_tracing_disabled(True)  # no trace export to the network
    calls = []

    @function_tool
    def get_weather(city: Literal["Paris", "Oslo", "Rome"]) -> str:
        """Weather of a city."""
        calls.append(city)
        return f"sunny in {city}"

    async def run():
        client = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0)
        model = OpenAIResponsesModel(model=MODEL, openai_client=client)
        settings = ModelSettings(max_tokens=MAX_TOKENS, reasoning=Reasoning(effort="none"), parallel_tool_calls=False,
                                 tool_choice=tool_choice)
        return await Runner.run(make_agent(model, settings, get_weather), "Weather in Oslo?", max_turns=6)

    return asyncio.run(run()), calls


# An agent with tools and an output type sends strict tools and text.format together: the model calls the tool
# (the SDK runs it and asks again) or answers in the type, and the run ends with an answer of that type.
def test_agents_tools_with_output_type(server):
    from agents import Agent
    result, calls = run_agent(server, lambda model, settings, tool: Agent(
        name="weather", instructions="Answer.", tools=[tool], output_type=Weather, model=model,
        model_settings=settings))
    assert isinstance(result.final_output, Weather), result.final_output
    assert all(c in ("Paris", "Oslo", "Rome") for c in calls)


# Forced tool use (tool_choice naming the tool): the call comes first, with arguments of the tool's schema.
def test_agents_forced_tool_use(server):
    from agents import Agent
    result, calls = run_agent(server, lambda model, settings, tool: Agent(
        name="forced", instructions="Use the tool.", tools=[tool], model=model, tool_use_behavior="stop_on_first_tool",
        model_settings=settings), tool_choice="get_weather")
    assert len(calls) == 1 and calls[0] in ("Paris", "Oslo", "Rome"), calls
    assert result.final_output == f"sunny in {calls[0]}"


# ---- litellm ---------------------------------------------------------------------------------------------------

# litellm's OpenAI-compatible route: a required tool beside a response format gives the call.
def test_litellm_required_tool_with_response_format(server):
    import litellm
    response = litellm.completion(
        model="openai/" + MODEL, api_base=server.url + "/v1", api_key="none", seed=SEED, max_tokens=MAX_TOKENS,
        messages=[{"role": "user", "content": "Weather in Oslo?"}], tool_choice="required", parallel_tool_calls=False,
        tools=[{"type": "function", "function": {"name": "get_weather", "parameters": CITY_ARGS}}],
        response_format={"type": "json_schema", "json_schema": {"name": "w", "schema": Weather.model_json_schema()}},
        extra_body=NO_THINKING)
    calls = response.choices[0].message.tool_calls
    assert response.choices[0].finish_reason == "tool_calls" and len(calls) == 1, response
    assert calls[0].function.name == "get_weather"
    jsonschema.validate(json.loads(calls[0].function.arguments), CITY_ARGS)
