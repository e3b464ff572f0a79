"""What clients read from usage and text, through the official `openai` SDK against a real `deepinfer serve` on
a tiny random model (outputs scripted with --enable-test-hooks where the test needs known tokens): the total
usage of n streamed choices, reasoning tokens counted as generated, a max_tokens cut inside a character,
special tokens left out of the text, a list of prompts on the legacy Completions API; and a server that sizes its concurrency from its KV budget or refuses
to start."""
import subprocess

import openai
import pytest
from conftest import make_tiny_model
from server_process import Server

MODEL = "tiny-usage"
REASONING = "Let me think about the weather."
ANSWER = "It is sunny in Paris."
PLACEHOLDER = "<｜place▁holder▁no▁433｜>"
# Half of it holds the window state of fewer than 256 of the tiny model's sequences (256 need ~69 MiB).
SMALL_BUDGET = 32 << 20


@pytest.fixture(scope="module")
def tiny_model(deepinfer_bin, tmp_path_factory):
    return make_tiny_model(deepinfer_bin, tmp_path_factory.mktemp("tiny"), seed=7)


@pytest.fixture(scope="module")
def server(deepinfer_bin, tiny_model):
    s = Server(deepinfer_bin, tiny_model, "--served-model-name", MODEL, "--enable-test-hooks", "--max-model-len",
               "4096", "--kv-cache-memory-bytes", str(256 << 20))
    yield s
    assert s.stop() == 0, "\n".join(s.log[-50:])


@pytest.fixture
def oai(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0)


def chat(oai, **kwargs):
    return oai.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Weather?"}], **kwargs)


def test_streamed_choices_report_their_total_usage_once(oai):
    script = {"deepinfer_test_output": REASONING + "</think>" + ANSWER}
    single = chat(oai, extra_body=script).usage
    stream = chat(oai, n=2, stream=True, stream_options={"include_usage": True}, extra_body=script)
    usages = [chunk.usage for chunk in stream if chunk.usage]
    # Both choices are the scripted message: twice the single request's completion, the prompt once.
    assert len(usages) == 1
    assert usages[0].completion_tokens == 2 * single.completion_tokens
    assert usages[0].prompt_tokens == single.prompt_tokens
    assert usages[0].total_tokens == single.prompt_tokens + 2 * single.completion_tokens
    assert usages[0].completion_tokens_details.reasoning_tokens == 2 * single.completion_tokens_details.reasoning_tokens


def test_reasoning_tokens_are_the_generated_tokens(oai):
    # Unscripted, the random model writes random tokens, all of them reasoning (no `</think>` among 24
    # tokens of a 129k vocabulary): re-encoding their text counts some of them differently.
    for seed in range(8):
        r = chat(oai, max_tokens=24, seed=seed, temperature=1.0)
        usage = r.usage
        assert usage.completion_tokens_details.reasoning_tokens <= usage.completion_tokens
        if r.choices[0].finish_reason == "length" and not r.choices[0].message.content:
            assert usage.completion_tokens_details.reasoning_tokens == usage.completion_tokens == 24, seed


def test_a_cut_inside_a_character_keeps_its_tokens(oai):
    # The scripted output always runs to its end, so the random model's own tokens are searched (seeded)
    # for an output whose last token ends inside a character; a few percent of short outputs do.
    for seed in range(100):
        for max_tokens in (1, 2, 3, 4):
            r = chat(oai, max_tokens=max_tokens, seed=seed, temperature=1.0, logprobs=True,
                     extra_body={"thinking": {"type": "disabled"}})
            choice = r.choices[0]
            if choice.logprobs is None:  # the end token came first: no text
                continue
            generated = b"".join(bytes(entry.bytes) for entry in choice.logprobs.content)
            tail = generated[-4:]
            cut = choice.finish_reason == "length" and any(
                b >= 0xC0 and len(tail) - i < (2 if b < 0xE0 else 3 if b < 0xF0 else 4)
                for i, b in enumerate(tail))
            if not cut:
                continue
            assert choice.message.content.endswith("\ufffd")
            assert r.usage.completion_tokens == len(choice.logprobs.content) == max_tokens
            return
    pytest.fail("no seeded output ended inside a character")


def test_special_tokens_are_skipped_unless_asked(oai):
    script = REASONING + PLACEHOLDER + "</think>" + ANSWER + PLACEHOLDER
    r = chat(oai, extra_body={"deepinfer_test_output": script})
    assert r.choices[0].message.content == ANSWER
    assert r.choices[0].message.model_extra["reasoning_content"] == REASONING
    kept = chat(oai, extra_body={"deepinfer_test_output": script, "skip_special_tokens": False})
    assert kept.choices[0].message.content == ANSWER + PLACEHOLDER
    assert kept.choices[0].message.model_extra["reasoning_content"] == REASONING + PLACEHOLDER
    assert kept.usage.completion_tokens == r.usage.completion_tokens


def test_a_list_of_prompts_is_batched_prompt_major(oai):
    prompts = ["Once upon a time", "The weather"]
    batch = oai.completions.create(model=MODEL, prompt=prompts, n=2, max_tokens=4, seed=5, temperature=1.0)
    singles = [oai.completions.create(model=MODEL, prompt=p, n=2, max_tokens=4, seed=5, temperature=1.0)
               for p in prompts]
    # Choice p * n + i is prompt p's output i, as if the prompt had been sent alone (the seed fixes each).
    assert [c.index for c in batch.choices] == [0, 1, 2, 3]
    assert [c.text for c in batch.choices] == [c.text for s in singles for c in s.choices]
    assert batch.usage.prompt_tokens == sum(s.usage.prompt_tokens for s in singles)
    assert batch.usage.completion_tokens == sum(s.usage.completion_tokens for s in singles)
    streamed = {}
    for chunk in oai.completions.create(model=MODEL, prompt=prompts, n=2, max_tokens=4, seed=5, temperature=1.0,
                                        stream=True):
        for c in chunk.choices:
            streamed[c.index] = streamed.get(c.index, "") + c.text
    assert [streamed[i] for i in range(4)] == [c.text for c in batch.choices]


def test_echoed_prompt_tokens_carry_logprobs_and_offsets(oai):
    prompt = "Once upon a time"
    kwargs = dict(model=MODEL, prompt=prompt, logprobs=2, max_tokens=3, seed=5, temperature=1.0)
    echoed = oai.completions.create(echo=True, **kwargs)
    plain = oai.completions.create(**kwargs)
    choice, alone = echoed.choices[0], plain.choices[0]
    assert choice.text == prompt + alone.text
    lp = choice.logprobs
    # The prompt's tokens first, then the completion's, which are exactly those of the request without echo.
    prompt_count = echoed.usage.prompt_tokens
    assert len(lp.tokens) == prompt_count + len(alone.logprobs.tokens)
    assert "".join(lp.tokens[:prompt_count]) == prompt
    assert lp.tokens[prompt_count:] == alone.logprobs.tokens
    assert lp.token_logprobs[prompt_count:] == alone.logprobs.token_logprobs
    # The first prompt token has no position before it; every other one has a logprob and two alternatives.
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    assert all(x is not None and x <= 0 for x in lp.token_logprobs[1:prompt_count])
    assert all(len(top) >= 1 for top in lp.top_logprobs[1:prompt_count])
    # Each prompt token's offset is where its text starts in the returned text; the completion's first
    # token starts right after the echoed prompt (16 ASCII bytes), and offsets never go back.
    text = choice.text.encode()
    for token, offset in zip(lp.tokens[:prompt_count], lp.text_offset):
        assert text[offset:offset + len(token.encode())] == token.encode()
    assert lp.text_offset[prompt_count] == len(prompt.encode())
    assert all(b >= a for a, b in zip(lp.text_offset, lp.text_offset[1:]))


def test_concurrency_follows_the_kv_budget(deepinfer_bin, tiny_model):
    # A budget too small for 256 sequences' window state: the server runs fewer at once, and says how many.
    s = Server(deepinfer_bin, tiny_model, "--served-model-name", MODEL, "--kv-cache-memory-bytes", str(SMALL_BUDGET))
    try:
        status, _, body = s.json("POST", "/v1/chat/completions",
                                 {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
        assert status == 200, body
        assert any("max_num_seqs=" in line and "max_num_seqs=256" not in line for line in s.log), s.log
    finally:
        assert s.stop() == 0, "\n".join(s.log)


def test_a_budget_that_holds_nothing_refuses_to_start(deepinfer_bin, tiny_model):
    for flags in (["--kv-cache-memory-bytes", str(1 << 20)],
                  ["--kv-cache-memory-bytes", str(SMALL_BUDGET), "--max-num-seqs", "4096"]):
        proc = subprocess.run([deepinfer_bin, "serve", tiny_model, "--port", "0", *flags], capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode != 0, flags
        assert "ready" not in proc.stdout + proc.stderr
        assert "cannot hold the sliding-window state" in proc.stderr, proc.stdout + proc.stderr
