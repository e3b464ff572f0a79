"""The Hugging Face `tokenizers` oracle for both deepinfer encode entry points."""
import json
import os

from tokenizers import Tokenizer

import tokenizer_data

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


class Oracle:
    """The oracle for a builtin tokenizer of the repository (data/tokenizers/: deepseek-v3, deepseek-v4,
    deepseek-v4.1), the same bytes deepinfer embeds."""
    def __init__(self, name):
        spec = json.loads(tokenizer_data.tokenizer_json(name))
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
