"""The offline API's shapes and guarantees beyond equality with the server: streaming and asyncio forms,
n and logprobs, stop token ids, structured outputs, the prefix cache's count, cancellation with Ctrl-C, and
bad input as one Python exception with a clear message."""
import asyncio
import json
import os
import signal
import threading
import time

import pytest
from api_fixtures import api_model, deepinfer, llm  # noqa: F401 (fixtures)

USER = [{"role": "user", "content": "Say something."}]


def test_streamed_chat_adds_up_to_the_whole_answer(deepinfer, llm):
    params = deepinfer.SamplingParams(temperature=0.9, seed=11, max_tokens=16)
    whole = llm.chat(USER, params)[0].outputs[0]
    deltas = list(llm.chat_stream(USER, params))
    assert len(deltas) > 1  # tokens arrive step by step
    assert "".join(d.text for d in deltas) == whole.text
    assert "".join(d.reasoning_content for d in deltas) == (whole.reasoning_content or "")
    assert [t for d in deltas for t in d.token_ids] == whole.token_ids
    assert deltas[-1].finish_reason == whole.finish_reason


def test_streamed_generate_and_n(deepinfer, llm):
    params = deepinfer.SamplingParams(temperature=1.0, seed=5, max_tokens=6, n=3)
    whole = llm.generate("Once upon a time", params)[0]
    assert [o.index for o in whole.outputs] == [0, 1, 2]
    texts = {}
    for d in llm.generate_stream("Once upon a time", params):
        texts[d.index] = texts.get(d.index, "") + d.text
    assert [texts[i] for i in range(3)] == [o.text for o in whole.outputs]
    # One seed fixes all n outputs, and they differ from each other (sampling at temperature 1).
    assert len({tuple(o.token_ids) for o in whole.outputs}) > 1


def test_asyncio_forms(deepinfer, llm):
    # Seeded: thinking mode samples at temperature 1 whatever the request says (as deepseek-recipe does).
    params = deepinfer.SamplingParams(temperature=0.0, max_tokens=5, seed=3)

    async def main():
        batch = await asyncio.gather(llm.agenerate("a b c", params), llm.achat(USER, params))
        streamed = [d async for d in llm.achat_stream(USER, params)]
        return batch, streamed

    (generated, chatted), streamed = asyncio.run(main())
    assert generated[0].outputs[0].token_ids == llm.generate("a b c", params)[0].outputs[0].token_ids
    assert "".join(d.text for d in streamed) == chatted[0].outputs[0].text
    assert [t for d in streamed for t in d.token_ids] == chatted[0].outputs[0].token_ids


def test_stop_token_ids_and_logprobs(deepinfer, llm):
    greedy = deepinfer.SamplingParams(temperature=0.0, max_tokens=8, logprobs=3)
    first = llm.generate([[1, 2, 3]], greedy)[0].outputs[0]
    assert len(first.logprobs) == len(first.token_ids) == 8
    # Greedy: each sampled token is the most likely one (rank 1); the cumulative logprob is their sum.
    assert all(lp[t].rank == 1 for lp, t in zip(first.logprobs, first.token_ids))
    assert first.cumulative_logprob == pytest.approx(sum(lp[t].logprob for lp, t in zip(first.logprobs, first.token_ids)))
    stop_at = first.token_ids[3]
    cut = first.token_ids.index(stop_at)
    stopped = llm.generate([[1, 2, 3]], deepinfer.SamplingParams(temperature=0.0, max_tokens=8,
                                                                    stop_token_ids=[stop_at]))[0].outputs[0]
    assert stopped.token_ids == first.token_ids[:cut]
    assert stopped.finish_reason == "stop"


def test_structured_output_choice_and_regex(deepinfer, llm):
    choice = deepinfer.StructuredOutputsParams(choice=["alpha", "beta", "gamma"])
    params = deepinfer.SamplingParams(temperature=1.0, seed=2, max_tokens=40, structured_outputs=choice)
    out = llm.chat(USER, params, chat_template_kwargs={"thinking": False})[0].outputs[0]
    assert out.text in ("alpha", "beta", "gamma")
    regex = deepinfer.SamplingParams(temperature=1.0, seed=2, max_tokens=40,
                                     guided_decoding=deepinfer.GuidedDecodingParams(regex="[0-9]{3}-[a-z]{2}"))
    out = llm.chat(USER, regex, chat_template_kwargs={"thinking": False})[0].outputs[0]
    assert len(out.text) == 6 and out.text[:3].isdigit() and out.text[3] == "-", out.text


def test_prefix_cache_hits_are_counted(deepinfer, llm):
    prompt = list(range(10, 310))  # 300 tokens: two whole 128-token blocks, then the prompt's snapshot
    params = deepinfer.SamplingParams(temperature=0.0, max_tokens=2)
    llm.generate([prompt], params)
    again = llm.generate([prompt], params)[0]
    assert again.num_cached_tokens == 299  # all but the last position, whose logits are sampled


def test_ctrl_c_cancels_and_the_engine_goes_on(deepinfer, llm):
    params = deepinfer.SamplingParams(temperature=1.0, seed=1, max_tokens=100000, ignore_eos=True)
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        llm.generate(["never ends"] * 4, params)
    assert time.monotonic() - start < 30
    # The aborted requests freed their sequences: new ones run at once.
    out = llm.generate("after", deepinfer.SamplingParams(temperature=0.0, max_tokens=3))[0]
    assert len(out.outputs[0].token_ids) == 3


def test_closing_a_stream_aborts_it(deepinfer, llm):
    params = deepinfer.SamplingParams(temperature=1.0, seed=1, max_tokens=100000, ignore_eos=True)
    stream = llm.generate_stream("forever", params)
    next(stream)
    stream.close()
    assert len(llm.generate("x", deepinfer.SamplingParams(max_tokens=2, seed=0))[0].outputs[0].token_ids) == 2


# --- bad input: one exception, with the message the CLI and server give


def test_wrong_types_and_unknown_parameters(deepinfer, llm):
    with pytest.raises(TypeError, match="temperature must be a number"):
        deepinfer.SamplingParams(temperature="hot")
    with pytest.raises(TypeError, match="max_tokens must be an int, not bool"):
        deepinfer.SamplingParams(max_tokens=True)
    with pytest.raises(TypeError, match="unexpected keyword argument 'temprature'"):
        deepinfer.SamplingParams(temprature=0.5)
    with pytest.raises(TypeError, match="unexpected keyword argument 'max_model_len'"):
        deepinfer.LLM(max_model_len=5)
    with pytest.raises(TypeError, match="a prompt must be"):
        llm.generate([3.5])
    with pytest.raises(TypeError, match="sampling_params must be SamplingParams"):
        llm.generate("x", {"temperature": 0})
    with pytest.raises(ValueError, match="chat_template_kwargs: unknown"):
        llm.chat(USER, chat_template_kwargs={"thinkng": True})


def test_refused_requests_carry_the_protocols_message(deepinfer, llm):
    # The server's 400 messages (the pipeline's), as ValueError.
    with pytest.raises(ValueError, match="temperature"):
        llm.generate("x", deepinfer.SamplingParams(temperature=-1.0))
    with pytest.raises(ValueError, match="max_tokens"):
        llm.generate("x", deepinfer.SamplingParams(max_tokens=0))
    with pytest.raises(ValueError, match="Invalid value: 'wizard'"):
        llm.chat([{"role": "wizard", "content": "hi"}])
    with pytest.raises(ValueError):
        llm.generate([[10 ** 9]], deepinfer.SamplingParams(max_tokens=2))  # outside the vocabulary
    with pytest.raises(ValueError, match="structured_outputs.json: invalid JSON Schema at #: \\$ref '#/nowhere'"):
        schema = deepinfer.StructuredOutputsParams(json={"$ref": "#/nowhere"})
        llm.chat(USER, deepinfer.SamplingParams(structured_outputs=schema))
    with pytest.raises(ValueError, match="exactly one of"):
        deepinfer.StructuredOutputsParams(regex="a", choice=["b"])


def test_bad_engine_arguments(deepinfer, api_model, tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        deepinfer.LLM(str(tmp_path / "no-such-model"))
    with pytest.raises(ValueError, match="precision"):
        deepinfer.LLM(api_model, precision="fp3")
    with pytest.raises(ValueError, match='unknown method "telepathy"'):
        deepinfer.LLM(api_model, kv_cache_bytes=64 << 20, speculative_config={"method": "telepathy"})
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="config.json"):
        deepinfer.LLM(str(tmp_path / "empty"))


# --- the tokenizer and the codec on their own


def test_tokenizer_matches_the_cli_and_keeps_special_tokens_safe(deepinfer, deepinfer_bin):
    import subprocess
    tok = deepinfer.Tokenizer("deepseek-v4")
    text = "Hello, 世界! <｜begin▁of▁sentence｜>"
    proc = subprocess.run([deepinfer_bin, "tokenize", "--tokenizer", "deepseek-v4", "--json", text],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    cli_ids = json.loads(proc.stdout)
    bos = tok.token_to_id("<｜begin▁of▁sentence｜>")
    assert bos is not None and tok.is_special(bos)
    plain = tok.encode(text)
    assert bos not in plain  # written as text, never the control token
    assert tok.decode(plain) == text
    special = tok.encode(text, allow_special=True)
    assert special[-1] == bos
    assert plain == cli_ids  # the CLI encodes text with the same safety
    assert tok.decode(special, skip_special_tokens=True) == "Hello, 世界! "
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([tok.vocab_size])


def test_render_and_parse_equal_the_cli(deepinfer, deepinfer_bin):
    import subprocess
    request = {"model": "m", "messages": [{"role": "user", "content": "What is 2+2?"}]}
    rendered = deepinfer.render(request, "chat", "v4")
    proc = subprocess.run([deepinfer_bin, "render", "--ids", "-"], input=json.dumps(request), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert rendered.token_ids == json.loads(proc.stdout)
    text_proc = subprocess.run([deepinfer_bin, "render", "-"], input=json.dumps(request), capture_output=True,
                               text=True, timeout=60)
    assert rendered.prompt == text_proc.stdout
    completion = "Adding.</think>It is 4."
    body = deepinfer.parse(completion, "chat", "v4")
    proc = subprocess.run([deepinfer_bin, "parse", "-"], input=completion, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert body == json.loads(proc.stdout)
    assert body["choices"][0]["message"]["content"] == "It is 4."
    assert body["choices"][0]["message"]["reasoning_content"] == "Adding."
    events = deepinfer.parse(completion, "messages", "v4", stream=True)
    assert events[0][0] == "message_start" and events[-1][0] == "message_stop"
    with pytest.raises(ValueError, match="messages"):
        deepinfer.render({"model": "m"}, "chat", "v4")
    with pytest.raises(ValueError, match="unknown protocol"):
        deepinfer.parse("x", "smoke-signals")


def test_console_script_runs_the_cli(deepinfer, deepinfer_bin):
    import subprocess
    import sys
    from deepinfer import _cli
    proc = subprocess.run([sys.executable, _cli.__file__, "--version"], capture_output=True, text=True, timeout=60)
    cli = subprocess.run([deepinfer_bin, "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout == cli.stdout


def test_the_interpreter_runs_while_the_engine_works(deepinfer, llm):
    """The lock is released while a batch runs: another Python thread makes progress meanwhile."""
    ticks = []
    done = threading.Event()

    def count():
        while not done.is_set():
            ticks.append(1)
            time.sleep(0.001)

    counter = threading.Thread(target=count)
    counter.start()
    try:
        llm.generate(["a", "b", "c", "d"], deepinfer.SamplingParams(temperature=0.0, max_tokens=48, ignore_eos=True))
        during = len(ticks)
    finally:
        done.set()
        counter.join()
    assert during > 5


def test_speculative_config_and_kv_store(deepinfer, api_model, tmp_path):
    """Speculation changes no greedy output; a KV store carries prefix blocks from one LLM to the next."""
    prompt = [list(range(40, 340))]  # 300 tokens: two whole blocks
    params = deepinfer.SamplingParams(temperature=0.0, max_tokens=12, ignore_eos=True)
    store = str(tmp_path / "kv")
    first = deepinfer.LLM(api_model, kv_cache_bytes=64 << 20, max_num_seqs=4, kv_store=store)
    plain = first.generate(prompt, params)[0]
    assert plain.num_cached_tokens == 0
    del first  # closing the store writes its queued blocks
    spec = deepinfer.LLM(api_model, kv_cache_bytes=64 << 20, max_num_seqs=4, kv_store=store,
                         speculative_config={"method": "ngram", "num_speculative_tokens": 3})
    again = spec.generate(prompt, params)[0]
    assert again.outputs[0].token_ids == plain.outputs[0].token_ids
    assert again.num_cached_tokens == 299  # the blocks, then the prompt's snapshot from the store
