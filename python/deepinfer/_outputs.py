"""RequestOutput and CompletionOutput in vLLM's shapes, with the server's parsed message beside them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional


@dataclass
class Logprob:
    logprob: float
    rank: Optional[int] = None
    decoded_token: Optional[str] = None


@dataclass
class CompletionOutput:
    """One of a request's n outputs. For chat(), `text` is the answer's content as the server returns it,
    and `reasoning_content` and `tool_calls` are the rest of its message."""

    index: int
    text: str
    token_ids: list
    cumulative_logprob: Optional[float]
    logprobs: Optional[list]
    finish_reason: Optional[str]
    stop_reason: Any = None
    reasoning_content: Optional[str] = None
    tool_calls: Optional[list] = None

    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class RequestOutput:
    """A request's result: its prompt, its outputs, and the prefix-cache hit count (`num_cached_tokens`).
    `response` is the protocol's whole response body, as the server would answer the same request."""

    request_id: str
    prompt: Optional[str]
    prompt_token_ids: list
    outputs: list
    finished: bool = True
    num_cached_tokens: int = 0
    seed: Optional[int] = None
    response: dict = field(default_factory=dict)
    prompt_logprobs: Optional[list] = None


@dataclass
class StreamDelta:
    """What one engine step added to one output of a streamed request."""

    index: int
    text: str = ""
    reasoning_content: str = ""
    tool_calls: list = field(default_factory=list)
    token_ids: list = field(default_factory=list)
    finish_reason: Optional[str] = None
    events: list = field(default_factory=list)  # the protocol's stream events for it: (name, data)


def token_logprobs(tokens: list) -> tuple:
    """(logprobs, cumulative) from the engine's (id, logprob, bytes, alternatives) tuples, in vLLM's shape:
    one dict per token, the sampled token first, then the alternatives, each with its rank among them."""
    out = []
    total = 0.0
    for token_id, logprob, raw, alternatives in tokens:
        total += logprob
        entry = {}
        better = sum(1 for _, alt_logprob, _ in alternatives if alt_logprob > logprob)
        entry[token_id] = Logprob(logprob, better + 1, raw.decode("utf-8", errors="replace"))
        for rank, (alt_id, alt_logprob, alt_raw) in enumerate(alternatives, start=1):
            if alt_id not in entry:
                entry[alt_id] = Logprob(alt_logprob, rank, alt_raw.decode("utf-8", errors="replace"))
        out.append(entry)
    return out, total


def token_ids_of(tokens: list, with_logprobs: bool) -> list:
    return [t[0] for t in tokens] if with_logprobs else list(tokens)
