"""Differential test: deepinfer's tokenizer (through `deepinfer tokenize --jsonl`) against the live Hugging
Face `tokenizers` package, on a fresh random corpus each run (the seed is printed; set
DEEPINFER_TOKENIZER_SEED to repeat one). The committed golden files pin a fixed corpus; this re-checks on
new inputs."""
import json
import os
import random
import subprocess
import sys
import time

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "tokenizer"))

tokenizers = pytest.importorskip("tokenizers")
import corpus as corpus_mod  # noqa: E402
import oracle  # noqa: E402

SEED = int(os.environ.get("DEEPINFER_TOKENIZER_SEED", str(time.time_ns() % 1_000_000_007)))


def deepinfer_bin():
    build = os.environ.get("DEEPINFER_BUILD_DIR", os.path.join(ROOT, "build", "release"))
    path = os.path.join(build, "bin", "deepinfer")
    if not os.path.exists(path):
        pytest.skip(f"no deepinfer binary at {path} (set DEEPINFER_BUILD_DIR)")
    return path


def run_jsonl(tokenizer, lines, *flags):
    data = "".join(json.dumps(v, ensure_ascii=False) + "\n" for v in lines).encode("utf-8")
    proc = subprocess.run([deepinfer_bin(), "tokenize", "--tokenizer", tokenizer, "--jsonl", *flags],
                          input=data, capture_output=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")
    out = [json.loads(line) for line in proc.stdout.decode("utf-8").split("\n") if line]
    assert len(out) == len(lines)
    return out


# deepinfer is given the builtin tokenizer's name; the oracle reads the same tokenizer from data/tokenizers/.
TOKENIZERS = ["deepseek-v3", "deepseek-v4", "deepseek-v4.1"]


@pytest.fixture(scope="module")
def fresh_corpus():
    print(f"tokenizer differential seed: {SEED}")
    texts = corpus_mod.corpus(seed=SEED)
    rng = random.Random(SEED)
    # Random concatenations that mix everything, and one ~1 MB input.
    for _ in range(200):
        texts.append("".join(rng.choice(texts) for _ in range(rng.randrange(2, 12))))
    texts.append(corpus_mod.big_input(texts, SEED, 1 << 20))
    return texts


def first_mismatch(texts, ours, theirs):
    for text, a, b in zip(texts, ours, theirs):
        if a != b:
            return f"seed {SEED}: {json.dumps(text[:200], ensure_ascii=False)}: ours {a[:40]} oracle {b[:40]}"
    return None


@pytest.mark.parametrize("name", TOKENIZERS)
def test_encode_text_matches_oracle(fresh_corpus, name):
    o = oracle.Oracle(name)
    ours = run_jsonl(name, fresh_corpus)
    theirs = o.encode_text_batch(fresh_corpus)
    assert first_mismatch(fresh_corpus, ours, theirs) is None, first_mismatch(fresh_corpus, ours, theirs)


@pytest.mark.parametrize("name", TOKENIZERS)
def test_encode_with_added_tokens_matches_oracle(fresh_corpus, name):
    o = oracle.Oracle(name)
    ours = run_jsonl(name, fresh_corpus, "--special")
    theirs = o.encode_with_added_tokens_batch(fresh_corpus)
    assert first_mismatch(fresh_corpus, ours, theirs) is None, first_mismatch(fresh_corpus, ours, theirs)


@pytest.mark.parametrize("name", TOKENIZERS)
def test_decode_matches_oracle(name):
    o = oracle.Oracle(name)
    rng = random.Random(SEED)
    added = sorted(o.full.get_added_tokens_decoder())
    cases = []
    for _ in range(2000):
        ids = []
        for _ in range(rng.randrange(1, 16)):
            r = rng.random()
            ids.append(rng.randrange(3, 259) if r < 0.5 else rng.randrange(259, 128000) if r < 0.85
                       else rng.choice(added))
        cases.append(ids)
    for flags, skip in (((), False), (("--skip-special",), True)):
        ours = run_jsonl(name, cases, "--decode", *flags)
        for ids, text in zip(cases, ours):
            assert text == o.decode(ids, skip), f"seed {SEED}: decode {ids} skip_special={skip}"


def test_unicode_table_matches_installed_oracle(tmp_path):
    """The committed class table equals what the installed oracle's regex engine says, code point by code
    point (regenerated with tools/tokenizer/gen_unicode_classes.py)."""
    out = tmp_path / "unicode_classes_data.cpp"
    with open(out, "w", encoding="utf-8") as f:
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "tokenizer", "gen_unicode_classes.py")],
                       stdout=f, check=True, timeout=120)
    committed = open(os.path.join(ROOT, "src", "tokenizer", "unicode_classes_data.cpp"), encoding="utf-8").read()
    assert out.read_text(encoding="utf-8") == committed
