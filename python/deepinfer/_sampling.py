"""SamplingParams and StructuredOutputsParams in vLLM's shapes, written as the protocol fields the server reads."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional, Union


def _check(name: str, value: Any, kinds: tuple, what: str) -> None:
    # bool is an int in Python; a flag where a number belongs is a mistake.
    if isinstance(value, bool) and bool not in kinds:
        raise TypeError(f"{name} must be {what}, not bool")
    if not isinstance(value, kinds):
        raise TypeError(f"{name} must be {what}, not {type(value).__name__}")


@dataclass
class StructuredOutputsParams:
    """One constraint on the output (vLLM's StructuredOutputsParams): a JSON schema (dict or JSON text), a
    regular expression, a list of choices, a GBNF/EBNF grammar, or any JSON object."""

    json: Optional[Union[dict, str]] = None
    regex: Optional[str] = None
    choice: Optional[list] = None
    grammar: Optional[str] = None
    json_object: Optional[bool] = None

    def __post_init__(self) -> None:
        given = [k for k in ("json", "regex", "choice", "grammar", "json_object") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("StructuredOutputsParams takes exactly one of json, regex, choice, grammar and "
                             f"json_object (got {len(given)})")
        if self.json is not None:
            _check("json", self.json, (dict, str), "a JSON schema (dict or str)")
            if isinstance(self.json, str):
                try:
                    self.json = json.loads(self.json)
                except ValueError as e:
                    raise ValueError(f"json is not valid JSON: {e}") from None
        if self.regex is not None:
            _check("regex", self.regex, (str,), "a string")
        if self.grammar is not None:
            _check("grammar", self.grammar, (str,), "a string")
        if self.choice is not None:
            _check("choice", self.choice, (list, tuple), "a list of strings")
            for c in self.choice:
                _check("choice entries", c, (str,), "strings")
            self.choice = list(self.choice)
        if self.json_object is not None:
            _check("json_object", self.json_object, (bool,), "a bool")

    def to_body(self) -> dict:
        return {k: getattr(self, k) for k in ("json", "regex", "choice", "grammar", "json_object")
                if getattr(self, k) is not None}


# vLLM's older name.
GuidedDecodingParams = StructuredOutputsParams


@dataclass
class SamplingParams:
    """How to sample, as vLLM's SamplingParams. Defaults are vLLM's (temperature 1, max_tokens 16)."""

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    seed: Optional[int] = None
    max_tokens: Optional[int] = 16
    min_tokens: int = 0
    stop: Optional[Union[str, list]] = None
    stop_token_ids: Optional[list] = None
    include_stop_str_in_output: bool = False
    ignore_eos: bool = False
    logprobs: Optional[int] = None
    skip_special_tokens: bool = True
    structured_outputs: Optional[StructuredOutputsParams] = None
    guided_decoding: Optional[StructuredOutputsParams] = None
    extra_args: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        num = (int, float)
        _check("n", self.n, (int,), "an int")
        for name in ("temperature", "top_p", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty"):
            _check(name, getattr(self, name), num, "a number")
        _check("top_k", self.top_k, (int,), "an int")
        if self.seed is not None:
            _check("seed", self.seed, (int,), "an int")
        if self.max_tokens is not None:
            _check("max_tokens", self.max_tokens, (int,), "an int")
        _check("min_tokens", self.min_tokens, (int,), "an int")
        if self.stop is not None:
            if isinstance(self.stop, str):
                self.stop = [self.stop]
            _check("stop", self.stop, (list, tuple), "a string or a list of strings")
            for s in self.stop:
                _check("stop entries", s, (str,), "strings")
            self.stop = list(self.stop)
        if self.stop_token_ids is not None:
            _check("stop_token_ids", self.stop_token_ids, (list, tuple), "a list of ints")
            for t in self.stop_token_ids:
                _check("stop_token_ids entries", t, (int,), "ints")
                if not 0 <= t < 2**31:
                    raise ValueError(f"stop_token_ids: {t} is not a token id")
            self.stop_token_ids = list(self.stop_token_ids)
        for name in ("include_stop_str_in_output", "ignore_eos", "skip_special_tokens"):
            _check(name, getattr(self, name), (bool,), "a bool")
        if self.logprobs is not None:
            _check("logprobs", self.logprobs, (int,), "an int")
        if self.guided_decoding is not None:
            if self.structured_outputs is not None:
                raise ValueError("give structured_outputs or guided_decoding, not both")
            self.structured_outputs, self.guided_decoding = self.guided_decoding, None
        if self.structured_outputs is not None:
            _check("structured_outputs", self.structured_outputs, (StructuredOutputsParams,),
                   "a StructuredOutputsParams")
        _check("extra_args", self.extra_args, (dict,), "a dict")

    def _common_fields(self) -> dict:
        body = {
            "n": self.n,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "min_p": self.min_p,
            "presence_penalty": self.presence_penalty,
            "frequency_penalty": self.frequency_penalty,
            "repetition_penalty": self.repetition_penalty,
            "ignore_eos": self.ignore_eos,
            "skip_special_tokens": self.skip_special_tokens,
            "include_stop_str_in_output": self.include_stop_str_in_output,
        }
        if self.min_tokens:
            body["min_tokens"] = self.min_tokens
        if self.seed is not None:
            body["seed"] = self.seed
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if self.stop:
            body["stop"] = self.stop
        body.update(self.extra_args)
        return body

    def completions_fields(self) -> dict:
        """The legacy Completions API's fields (what generate() sends)."""
        body = self._common_fields()
        if self.logprobs is not None:
            body["logprobs"] = self.logprobs
        if self.structured_outputs is not None:
            body["structured_outputs"] = self.structured_outputs.to_body()
        return body

    def chat_fields(self) -> dict:
        """Chat Completions' fields (what chat() sends)."""
        body = self._common_fields()
        if self.logprobs is not None:
            body["logprobs"] = True
            body["top_logprobs"] = self.logprobs
        if self.structured_outputs is not None:
            body["structured_outputs"] = self.structured_outputs.to_body()
        return body
