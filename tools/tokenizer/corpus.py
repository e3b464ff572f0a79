"""The tokenizer test corpus: deterministic (seeded) strings that cover what the DeepSeek pre-tokenizer and
BPE must get right. Imported by gen_golden.py and by the live differential test."""
import random
import sys
import unicodedata

SPECIAL_SPELLINGS = [
    "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<|EOT|>",
    "<｜tool▁calls▁begin｜>", "<｜tool▁call▁end｜>", "<think>", "</think>", "｜DSML｜", "<｜DSML｜tool_calls>",
    "<｜latest_reminder｜>", "<｜image｜>", "<｜place▁holder▁no▁7｜>", "<｜fim▁hole｜>", "<｜▁pad▁｜>",
]

CODE_SNIPPETS = [
    "def foo(x):\n    return x**2  # comment\n\n\tindent",
    "#include <vector>\nint main(int argc, char** argv) {\n  std::vector<int> v{1, 2, 3};\n  return v[0] + argc;\n}\n",
    "fn main() {\n    let xs: Vec<u64> = (0..10).map(|i| i * i).collect();\n    println!(\"{:?}\", xs);\n}\r\n",
    "const f = async (a, b) => { await fetch(`/api/${a}?q=${b}`); return a ?? b; };\n",
    "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"héllo, 世界\")\n}\n",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%an%' ORDER BY id DESC;\n",
    "<div class=\"x\">\n  <a href='https://example.com/a_b-c?d=1&e=2'>link</a>\n</div>\r\n",
    "{\"key\": [1, 2.5e-3, true, null], \"nested\": {\"ü\": \"\\u00fc\"}}\n",
    "#!/bin/bash\nset -euo pipefail\nfor f in *.txt; do wc -l \"$f\" | awk '{print $1}'; done\n",
    "public static void main(String[] args) throws IOException { System.out.println(args.length); }",
    "    \n\n   \r\n\t\t  x  \u3000 y\u00a0z\r\r\n\n ",
    "x = [i for i in range(100) if i % 3 == 0]  ;;  y = {k: v for k, v in d.items()}",
    "(defun fact (n) (if (<= n 1) 1 (* n (fact (- n 1)))))",
    "$ git commit -m 'fix: don't crash' && echo \"done\" >> log.txt 2>&1",
]

PROSE = [
    "Hello, my dog is cute", "你好，世界！今天天气很好。", "emoji 🤗🚀👨‍👩‍👧 test", "1234567890 3.14159 1,000,000",
    "ied 4 ½ months", "Äpfel", " ", "  ", "   ", "\t", "\n", "\n\n", "\n\n\n", "\t\n", "Hello world", " Hello world",
    " Hello World!", " this is 🦙.cpp", "w048 7tuijk dsdfhu", "нещо на Български", "   Hello", "    Hello\n    Hello",
    "\n =", "' era", "Hello, y'all! How are you 😁 ?我想在apple工作1314151天～", "!!!!!!", "3333", "33333333",
    "Cửa Việt", " discards",
    "The quick brown fox jumps over the lazy dog. It's 5 o'clock; isn't it?",
    "東京は日本の首都です。カタカナ・ひらがな・漢字ーー！ラーメン゛゜",
    "Der Größenwahn über Straßen — «guillemets» „Anführungszeichen“ and ‘quotes’…",
    "مرحبا بالعالم ١٢٣٤ שלום עולם",
    "हिन्दी भाषा में नमस्ते। ৳১২৩ தமிழ்",
    "한국어 텍스트입니다. 123가나다",
    "Ελληνικά κείμενα και ΚΕΦΑΛΑΙΑ",
    "ภาษาไทยไม่มีช่องว่าง",
    "a\u0301e\u0300o\u0308\u0323 Z\u0351\u0352\u0353a\u035c\u0361l\u0489g\u0338o",
    "👍🏻👍🏿 🧑🏽‍💻 🏳️‍🌈 🇯🇵🇺🇸 ❤️‍🔥 #️⃣ 1️⃣",
]

# Characters chosen to exercise every branch of the three Split regexes.
INTERESTING = list(" \t\n\r\x0b\x0c\x85\u00a0\u1680\u2000\u2028\u2029\u202f\u3000") + list(
    "aZqé中国語ひカ・ー゛ゝ゠ヿ龥一\u3040\u309f\u30ff") + list("0123٣४௫Ⅳ①½") + list(
    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + list("。，！？「」『』—…‘’“”«»¡¿") + list(
    "$€£¥©®°±×÷→∑√∞≈≠≤≥♠♥★☃⌘") + list("\u0300\u0301\u0308\u093f\u0e31\u20dd\ufe0f\u200d\u200b\u200c\u2060\u00ad") + list(
    "😀🦙🏻🚀👨\U0001F3FF\U000E0001\U0010FFFD\x00\x01\x1b\x7f")


def categories_by_cp():
    by_cat = {}
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        by_cat.setdefault(unicodedata.category(chr(cp)), []).append(cp)
    return by_cat


def corpus(seed=20261129):
    rng = random.Random(seed)
    out = []
    out += PROSE
    out += CODE_SNIPPETS
    # Special-token spellings inside text, alone and glued to words, spaces and digits.
    for s in SPECIAL_SPELLINGS:
        out += [s, "x" + s + "y", " " + s + " ", s + s, "12" + s + "34\n", "<" + s[1:], s[:-1]]
    out.append("".join(SPECIAL_SPELLINGS))
    # Digit runs of every length, in several scripts and contexts.
    for n in range(1, 41):
        out.append("7" * n)
        out.append("a" + "".join(str(rng.randrange(10)) for _ in range(n)) + " x")
        out.append(" " + "٣" * n + "中")
    # Whitespace runs mixing \r \n \t and spaces, before words, punctuation, CJK and the end.
    ws = [" ", "\t", "\n", "\r", "\r\n", "\u3000", "\u00a0", "  "]
    for _ in range(300):
        s = "".join(rng.choice(ws) for _ in range(rng.randrange(1, 8)))
        out.append(s + rng.choice(["word", "!", "中", "7", "", "\u0301a", "😀"]) + "".join(rng.choice(ws) for _ in range(rng.randrange(0, 4))))
    # CJK and kana runs.
    for _ in range(100):
        n = rng.randrange(1, 60)
        out.append("".join(chr(rng.choice([rng.randrange(0x4E00, 0x9FA6), rng.randrange(0x3040, 0x3100),
                                           rng.randrange(0x3400, 0x4DC0), rng.randrange(0x9FA6, 0xA000), 0x3002,
                                           0xFF0C])) for _ in range(n)))
    # Emoji with ZWJ, skin-tone modifiers, variation selectors and flags.
    emoji = [0x1F600, 0x1F468, 0x1F469, 0x1F467, 0x1F9D1, 0x1F4BB, 0x2764, 0x1F525, 0x1F3F3, 0x1F308]
    for _ in range(150):
        parts = []
        for _ in range(rng.randrange(1, 5)):
            e = chr(rng.choice(emoji))
            if rng.random() < 0.4:
                e += chr(rng.randrange(0x1F3FB, 0x1F400))
            if rng.random() < 0.3:
                e += "\ufe0f"
            parts.append(e)
        sep = rng.choice(["\u200d", "", " ", "\u200d"])
        out.append(rng.choice(["", "a", " ", "!"]) + sep.join(parts) + rng.choice(["", " ok", "。", "\n"]))
    for _ in range(40):
        out.append(chr(rng.randrange(0x1F1E6, 0x1F200)) + chr(rng.randrange(0x1F1E6, 0x1F200)))
    # Combining marks on letters, digits, spaces, punctuation and at the start.
    marks = [0x300, 0x301, 0x308, 0x323, 0x338, 0x35C, 0x361, 0x489, 0x93F, 0x94D, 0xE31, 0x20DD, 0x302D, 0x3099]
    for _ in range(150):
        base = rng.choice(["a", "Z", " ", "1", "!", "中", "カ", "", "\n", "é", "ß"])
        out.append(base + "".join(chr(rng.choice(marks)) for _ in range(rng.randrange(1, 5))) + rng.choice(["", "b", " c", "2"]))
    # Every Unicode general category, a few code points each, in assorted contexts.
    by_cat = categories_by_cp()
    contexts = ["{}", " {}", "a{}b", "{}{}", "1{} ", "!{}x", "\n{}\n", "中{}", " {}a", "'{}s"]
    for cat in sorted(by_cat):
        cps = by_cat[cat]
        for _ in range(12):
            c = chr(rng.choice(cps))
            out.append(rng.choice(contexts).format(c, c))
    # Every 256-code-point block: a sample of its code points, which covers every script.
    for block in range(0, 0x110000, 256):
        cps = [cp for cp in range(block, block + 256) if not 0xD800 <= cp <= 0xDFFF
               and unicodedata.category(chr(cp)) != "Cn"]
        if not cps:
            continue
        sample = rng.sample(cps, min(10, len(cps)))
        out.append("".join(chr(c) + rng.choice(["", "", " ", "a"]) for c in sample))
    # Random strings over the interesting alphabet: the pre-tokenizer's branch coverage.
    for _ in range(2500):
        out.append("".join(rng.choice(INTERESTING) for _ in range(rng.randrange(1, 30))))
    # Random valid Unicode (any scalar value, assigned or not).
    for _ in range(300):
        s = []
        for _ in range(rng.randrange(1, 20)):
            cp = rng.randrange(0x110000)
            while 0xD800 <= cp <= 0xDFFF:
                cp = rng.randrange(0x110000)
            s.append(chr(cp))
        out.append("".join(s))
    # Longer mixed documents.
    for _ in range(20):
        out.append(" ".join(rng.choice(PROSE + CODE_SNIPPETS) for _ in range(rng.randrange(5, 25))))
    return out


# 1 MB inputs: built from the corpus with a generator the C++ test repeats exactly (splitmix64 picks).
BIG_INPUTS = [(1, 1 << 20), (2, 1 << 20), (3, (1 << 20) + 12345)]


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return state, z ^ (z >> 31)


def big_input(entries, seed, min_bytes):
    """Concatenates corpus entries picked by splitmix64(seed) until the UTF-8 size reaches min_bytes."""
    encoded = [e.encode("utf-8") for e in entries]
    state = seed
    parts = []
    size = 0
    while size < min_bytes:
        state, r = splitmix64(state)
        e = encoded[r % len(encoded)]
        parts.append(e)
        size += len(e)
    return b"".join(parts).decode("utf-8")


def fnv1a64_ids(ids):
    h = 0xCBF29CE484222325
    for i in ids:
        for b in (i & 0xFFFFFFFF).to_bytes(4, "little"):
            h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


if __name__ == "__main__":
    c = corpus()
    print(len(c), sum(len(s.encode()) for s in c), file=sys.stderr)
