"""deepinfer: offline inference on DeepSeek models with the engine and request pipeline of `deepinfer serve`.

    from deepinfer import LLM, SamplingParams
    llm = LLM()  # the embedded default model
    out = llm.chat([{"role": "user", "content": "Hello"}], SamplingParams(max_tokens=32, seed=0))
    print(out[0].outputs[0].reasoning_content, out[0].outputs[0].text)
"""

from ._codec import RenderedPrompt, parse, render
from ._deepinfer import Tokenizer, default_model_dir
from ._llm import LLM
from ._outputs import CompletionOutput, Logprob, RequestOutput, StreamDelta
from ._sampling import GuidedDecodingParams, SamplingParams, StructuredOutputsParams

__all__ = [
    "LLM", "SamplingParams", "StructuredOutputsParams", "GuidedDecodingParams", "RequestOutput",
    "CompletionOutput", "Logprob", "StreamDelta", "Tokenizer", "render", "parse", "RenderedPrompt",
    "default_model_dir",
]
