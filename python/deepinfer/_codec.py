"""The codec on its own: a request to its DeepSeek prompt, a model's output to the protocol's response."""

from __future__ import annotations

import json
from typing import Any, NamedTuple, Optional, Union

from . import _deepinfer
from ._sampling import _check


class RenderedPrompt(NamedTuple):
    prompt: str
    token_ids: list


def render(request: Union[dict, str], protocol: str = "chat", version: str = "v4",
           tokenizer: Optional["_deepinfer.Tokenizer"] = None) -> RenderedPrompt:
    """A protocol request ("chat", "responses" or "messages"; a dict or its JSON text) to the exact DeepSeek
    prompt of `version` ("v3.2", "v4", "v4.1") and its token ids (the version's builtin tokenizer unless one
    is given), as `deepinfer render --ids`. An invalid request raises ValueError with the protocol's message."""
    _check("request", request, (dict, str), "a dict or JSON text")
    _check("protocol", protocol, (str,), "a string")
    _check("version", version, (str,), "a string")
    body = json.dumps(request) if isinstance(request, dict) else request
    prompt, ids = _deepinfer.render(body, protocol, version, tokenizer)
    return RenderedPrompt(prompt, list(ids))


def parse(text: str, protocol: str = "chat", version: str = "v4", *, thinking: bool = True,
          stream: bool = False, finish: str = "stop") -> Any:
    """A model's output text to the protocol's response body (a dict), or with `stream` to its stream events
    ([(event name or None, data)]), as `deepinfer parse`: reasoning, content and DSML tool calls."""
    _check("text", text, (str,), "a string")
    _check("protocol", protocol, (str,), "a string")
    _check("version", version, (str,), "a string")
    _check("thinking", thinking, (bool,), "a bool")
    _check("stream", stream, (bool,), "a bool")
    _check("finish", finish, (str,), "a string")
    body, events = _deepinfer.parse(text, protocol, version, thinking, finish)
    if not stream:
        return json.loads(body)
    out = []
    for name, data in events:
        try:
            out.append((name or None, json.loads(data)))
        except ValueError:
            out.append((name or None, data))
    return out
