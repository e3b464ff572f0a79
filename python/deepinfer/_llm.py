"""LLM: offline inference in vLLM's shapes on deepinfer's engine.

Every request is written as the protocol body `deepinfer serve` would receive (generate(): the legacy
Completions API; chat(): Chat Completions) and goes through the same request pipeline, so prompts,
sampling, stop handling and the parsing of reasoning, content and tool calls are the server's own.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any, AsyncIterator, Iterator, Optional, Sequence, Union

from . import _deepinfer
from ._outputs import CompletionOutput, RequestOutput, StreamDelta, token_ids_of, token_logprobs
from ._sampling import SamplingParams, _check

_PRECISIONS = ("exact", "bf16")


def _speculative_json(config: Any) -> Optional[str]:
    if config is None:
        return None
    if isinstance(config, str):
        return config
    if isinstance(config, dict):
        return json.dumps(config)
    raise TypeError(f"speculative_config must be a dict or a JSON string, not {type(config).__name__}")


class LLM:
    """One model on one engine. `model`: a Hugging Face checkpoint directory, or None for the embedded
    default (the `small` DeepSeek-V4 preset with random weights, created on first use in ~/.cache/deepinfer;
    its text is noise). The engine's options are `deepinfer serve`'s flags of the same names."""

    def __init__(self, model: Optional[Union[str, os.PathLike]] = None, *, precision: str = "exact",
                 kv_cache_bytes: int = 1 << 30, max_num_seqs: int = 0, max_num_batched_tokens: int = 2048,
                 speculative_config: Optional[Union[dict, str]] = None,
                 kv_store: Optional[Union[str, os.PathLike]] = None, model_version: Optional[str] = None,
                 enable_prefix_caching: bool = True) -> None:
        if model is not None:
            _check("model", model, (str, os.PathLike), "a model directory (str or path) or None")
            model = os.fspath(model)
        _check("precision", precision, (str,), "a string")
        if precision not in _PRECISIONS:
            raise ValueError(f"precision must be 'exact' or 'bf16' (got '{precision}')")
        _check("kv_cache_bytes", kv_cache_bytes, (int,), "an int")
        _check("max_num_seqs", max_num_seqs, (int,), "an int")
        _check("max_num_batched_tokens", max_num_batched_tokens, (int,), "an int")
        if kv_store is not None:
            _check("kv_store", kv_store, (str, os.PathLike), "a directory (str or path) or None")
            kv_store = os.fspath(kv_store)
        if model_version is not None:
            _check("model_version", model_version, (str,), "a string")
        _check("enable_prefix_caching", enable_prefix_caching, (bool,), "a bool")
        self._session = _deepinfer.create_session(model, precision, kv_cache_bytes, max_num_seqs,
                                                  max_num_batched_tokens, _speculative_json(speculative_config),
                                                  kv_store, model_version, enable_prefix_caching)
        self._next_id = 0

    @property
    def model_dir(self) -> str:
        return self._session.model_dir

    @property
    def model_version(self) -> str:
        return self._session.model_version

    @property
    def max_model_len(self) -> int:
        return self._session.max_model_len

    def get_tokenizer(self) -> "_deepinfer.Tokenizer":
        return _deepinfer.Tokenizer(self._session.model_dir)

    # --- request bodies

    def _request_id(self) -> str:
        self._next_id += 1
        return str(self._next_id - 1)

    @staticmethod
    def _params_list(sampling_params: Any, count: int) -> list:
        if sampling_params is None:
            return [SamplingParams()] * count
        if isinstance(sampling_params, SamplingParams):
            return [sampling_params] * count
        if isinstance(sampling_params, (list, tuple)):
            if len(sampling_params) != count:
                raise ValueError(f"{len(sampling_params)} sampling_params for {count} prompts")
            for p in sampling_params:
                _check("sampling_params entries", p, (SamplingParams,), "SamplingParams")
            return list(sampling_params)
        raise TypeError(f"sampling_params must be SamplingParams or a list of them, not "
                        f"{type(sampling_params).__name__}")

    @staticmethod
    def _prompt_list(prompts: Any) -> list:
        """Text prompts and token-id prompts (a list of ints, or {"prompt_token_ids": [...]}), one or many."""
        def one(p: Any) -> Union[str, list]:
            if isinstance(p, str):
                return p
            if isinstance(p, dict):
                if "prompt_token_ids" in p:
                    p = p["prompt_token_ids"]
                elif "prompt" in p:
                    return one(p["prompt"])
                else:
                    raise ValueError("a prompt dict takes 'prompt' or 'prompt_token_ids'")
            if isinstance(p, (list, tuple)) and all(isinstance(t, int) and not isinstance(t, bool) for t in p):
                return list(p)
            raise TypeError(f"a prompt must be a string, a list of token ids or a dict, not {type(p).__name__}")

        if isinstance(prompts, (str, dict)):
            return [one(prompts)]
        if isinstance(prompts, (list, tuple)):
            if prompts and all(isinstance(t, int) and not isinstance(t, bool) for t in prompts):
                return [list(prompts)]  # one token-id prompt
            return [one(p) for p in prompts]
        raise TypeError(f"prompts must be a string, token ids or a list of them, not {type(prompts).__name__}")

    def _completions_body(self, prompt: Union[str, list], params: SamplingParams, stream: bool) -> str:
        body = {"model": self._session.served_name, "prompt": prompt}
        body.update(params.completions_fields())
        if stream:
            body["stream"] = True
        return json.dumps(body)

    @staticmethod
    def _conversation_list(messages: Any) -> list:
        _check("messages", messages, (list, tuple), "a list of messages or a list of conversations")
        if messages and all(isinstance(m, (list, tuple)) for m in messages):
            return [list(c) for c in messages]
        return [list(messages)]

    def _chat_body(self, messages: list, params: SamplingParams, tools: Optional[list],
                   chat_template_kwargs: Optional[dict], stream: bool, extra: Optional[dict]) -> str:
        body: dict = {"model": self._session.served_name, "messages": messages}
        body.update(params.chat_fields())
        if tools is not None:
            _check("tools", tools, (list, tuple), "a list of tools")
            body["tools"] = list(tools)
        if chat_template_kwargs is not None:
            _check("chat_template_kwargs", chat_template_kwargs, (dict,), "a dict")
            unknown = set(chat_template_kwargs) - {"thinking"}
            if unknown:
                raise ValueError(f"chat_template_kwargs: unknown {sorted(unknown)} (takes 'thinking')")
            if "thinking" in chat_template_kwargs:
                thinking = chat_template_kwargs["thinking"]
                _check("chat_template_kwargs['thinking']", thinking, (bool,), "a bool")
                body["thinking"] = {"type": "enabled" if thinking else "disabled"}
        if extra:
            _check("extra_body", extra, (dict,), "a dict")
            body.update(extra)
        if stream:
            body["stream"] = True
        return json.dumps(body)

    # --- results

    def _result(self, raw: dict, prompt: Optional[str], params: SamplingParams, chat: bool) -> RequestOutput:
        if raw["error"]:
            raise RuntimeError(raw["error"])
        response = json.loads(raw["body"])
        with_logprobs = params.logprobs is not None
        outputs = []
        for choice in response.get("choices", []):
            index = choice["index"]
            tokens = raw["outputs"][index]["tokens"]
            logprobs, cumulative = token_logprobs(tokens) if with_logprobs else (None, None)
            if chat:
                message = choice["message"]
                text = message.get("content") or ""
                reasoning, tool_calls = message.get("reasoning_content"), message.get("tool_calls")
            else:
                text, reasoning, tool_calls = choice["text"], None, None
            outputs.append(CompletionOutput(index, text, token_ids_of(tokens, with_logprobs), cumulative, logprobs,
                                            choice.get("finish_reason"), None, reasoning, tool_calls))
        return RequestOutput(self._request_id(), prompt, list(raw["prompt_token_ids"]), outputs, True,
                             raw["cached_tokens"], raw["seed"], response)

    # --- the API

    def generate(self, prompts: Any, sampling_params: Any = None, *, use_tqdm: bool = False) -> list:
        """Completes each prompt (text, or token ids) without a chat template; all run together under
        continuous batching. Returns one RequestOutput per prompt, in order."""
        del use_tqdm  # vLLM's progress bar: accepted, not drawn
        prompt_list = self._prompt_list(prompts)
        params = self._params_list(sampling_params, len(prompt_list))
        bodies = [self._completions_body(p, sp, False) for p, sp in zip(prompt_list, params)]
        stop_ids = self._stop_ids(params)
        raws = self._run("completions", bodies, stop_ids)
        return [self._result(raw, p if isinstance(p, str) else None, sp, False)
                for raw, p, sp in zip(raws, prompt_list, params)]

    def chat(self, messages: Any, sampling_params: Any = None, *, tools: Optional[list] = None,
             chat_template_kwargs: Optional[dict] = None, extra_body: Optional[dict] = None,
             use_tqdm: bool = False) -> list:
        """Answers one conversation (a list of OpenAI-style messages) or a list of them, rendered with the
        model's DeepSeek encoding; reasoning, content and tool calls are parsed as the server parses them.
        `extra_body` adds Chat Completions fields (response_format, tool_choice, ...)."""
        del use_tqdm
        conversations = self._conversation_list(messages)
        params = self._params_list(sampling_params, len(conversations))
        bodies = [self._chat_body(c, sp, tools, chat_template_kwargs, False, extra_body)
                  for c, sp in zip(conversations, params)]
        raws = self._run("chat", bodies, self._stop_ids(params))
        return [self._result(raw, None, sp, True) for raw, sp in zip(raws, params)]

    @staticmethod
    def _stop_ids(params: list) -> list:
        return [list(p.stop_token_ids or ()) for p in params]

    def _run(self, api: str, bodies: list, stop_ids: list) -> list:
        if not bodies:
            return []
        return self._session.run(api, bodies, stop_ids)

    # --- streaming

    def generate_stream(self, prompt: Any, sampling_params: Optional[SamplingParams] = None) -> Iterator[StreamDelta]:
        """Streams one prompt's outputs: a StreamDelta per output per engine step that added to it."""
        prompts = self._prompt_list(prompt)
        if len(prompts) != 1:
            raise ValueError("generate_stream takes one prompt")
        params = self._params_list(sampling_params, 1)[0]
        body = self._completions_body(prompts[0], params, True)
        return self._stream("completions", body, params, False)

    def chat_stream(self, messages: list, sampling_params: Optional[SamplingParams] = None, *,
                    tools: Optional[list] = None, chat_template_kwargs: Optional[dict] = None,
                    extra_body: Optional[dict] = None) -> Iterator[StreamDelta]:
        """Streams one conversation's answer as StreamDeltas of content, reasoning and tool calls."""
        conversations = self._conversation_list(messages)
        if len(conversations) != 1:
            raise ValueError("chat_stream takes one conversation")
        params = self._params_list(sampling_params, 1)[0]
        body = self._chat_body(conversations[0], params, tools, chat_template_kwargs, True, extra_body)
        return self._stream("chat", body, params, True)

    def _stream(self, api: str, body: str, params: SamplingParams, chat: bool) -> Iterator[StreamDelta]:
        stream = _deepinfer.start_stream(self._session, api, body, list(params.stop_token_ids or ()))
        return _DeltaIterator(stream, params.logprobs is not None, chat)

    # --- asyncio

    async def agenerate(self, prompts: Any, sampling_params: Any = None) -> list:
        """generate() on a worker thread: the event loop runs on while the engine works."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, lambda: self.generate(prompts, sampling_params))

    async def achat(self, messages: Any, sampling_params: Any = None, **kwargs: Any) -> list:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, lambda: self.chat(messages, sampling_params, **kwargs))

    async def agenerate_stream(self, prompt: Any,
                               sampling_params: Optional[SamplingParams] = None) -> AsyncIterator[StreamDelta]:
        async for delta in _aiterate(self.generate_stream(prompt, sampling_params)):
            yield delta

    async def achat_stream(self, messages: list, sampling_params: Optional[SamplingParams] = None,
                           **kwargs: Any) -> AsyncIterator[StreamDelta]:
        async for delta in _aiterate(self.chat_stream(messages, sampling_params, **kwargs)):
            yield delta


async def _aiterate(iterator: "_DeltaIterator") -> AsyncIterator[StreamDelta]:
    loop = asyncio.get_running_loop()
    try:
        while True:
            delta = await loop.run_in_executor(None, iterator.next_or_none)
            if delta is None:
                return
            yield delta
    finally:
        iterator.close()


class _DeltaIterator:
    """The deltas of one streamed request; close() (or dropping it) aborts it in the engine."""

    def __init__(self, stream: Any, with_logprobs: bool, chat: bool) -> None:
        self._stream = stream
        self._with_logprobs = with_logprobs
        self._chat = chat
        self._ready: list = []
        self.prompt_token_ids: Optional[list] = None
        self.num_cached_tokens: Optional[int] = None

    def __iter__(self) -> "_DeltaIterator":
        return self

    def __next__(self) -> StreamDelta:
        delta = self.next_or_none()
        if delta is None:
            raise StopIteration
        return delta

    def next_or_none(self) -> Optional[StreamDelta]:
        while not self._ready:
            update = self._stream.next()
            if update is None:
                return None
            self._take(update)
        return self._ready.pop(0)

    def close(self) -> None:
        self._stream.abort()

    def _take(self, update: dict) -> None:
        if update.get("finished"):
            if update["error"]:
                raise RuntimeError(update["error"])
            self.prompt_token_ids = list(update["prompt_token_ids"])
            self.num_cached_tokens = update["cached_tokens"]
        by_index: dict = {}

        def delta(index: int) -> StreamDelta:
            if index not in by_index:
                by_index[index] = StreamDelta(index)
            return by_index[index]

        for raw in update["deltas"]:
            if raw["tokens"]:
                delta(raw["index"]).token_ids.extend(token_ids_of(raw["tokens"], self._with_logprobs))
        for name, data in update["events"]:
            try:
                event = json.loads(data)
            except ValueError:
                continue  # [DONE]
            for choice in event.get("choices") or []:
                d = delta(choice["index"])
                d.events.append((name or None, event))
                if self._chat:
                    message = choice.get("delta") or {}
                    d.text += message.get("content") or ""
                    d.reasoning_content += message.get("reasoning_content") or ""
                    d.tool_calls.extend(message.get("tool_calls") or [])
                else:
                    d.text += choice.get("text") or ""
                if choice.get("finish_reason"):
                    d.finish_reason = choice["finish_reason"]
        self._ready.extend(by_index[i] for i in sorted(by_index))
