"""Text and tokenizers for testing and benchmarking smelt's tokenizer against
the `tokenizers` library (tests/scripts/tokenizer_compare.py,
bench/tokenizer_bench.py).  Everything is made here, seeded: lines of varied
text (scripts, CJK, emoji, combining marks, accents, whitespace runs, digits,
code, contractions, special tokens inline) and tokenizers trained on them
with `tokenizers`, in the shapes real models ship.  Nothing is downloaded."""
import json
import os
import random

WORDS = ("the quick brown fox jumps over a lazy dog while we think about tokenizers and models "
         "language is strange sometimes but mostly it works fine today tomorrow never again "
         "inference compile kernel memory cache attention layer token vocabulary merge").split()
CONTRACTIONS = ["don't", "I'm", "you're", "we'll", "they've", "it's", "she'd", "I'M", "THEY'RE", "We'Ll",
                "'s", "'t", "o'clock", "rock'n'roll", "'ſ", "ʼs"]
SCRIPTS = ["日本語のテキストです", "中文分词测试", "한국어 텍스트", "Привет, мир", "Γειά σου κόσμε",
           "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก", "ሰላም ዓለም", "ᚠᛇᚻ",
           "Ελληνικά", "Tiếng Việt có dấu", "ǅemal ǈubljana"]
ACCENTS = ["café", "naïve", "Ångström", "façade", "Øresund", "jalapeño", "Zürich", "crème brûlée", "smörgåsbord"]
COMBINING = ["e\u0301", "a\u0308\u0304", "Z\u0351\u0360\u0489a\u0334l\u0338g\u0337o", "n\u0303", "\u0301",
             "\u0915\u094d\u0937"]
EMOJI = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷🇯🇵", "❤️", "🤖", "🏳️‍🌈", "😀😀😀", "🧑🏿‍💻", "\U0001F600x"]
SPACES = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000", "\u2028", "\x0b",
          "\x0c", "\u200b", "\u2009", " \t \n\n  ", "\u0085", "\x1c"]
DIGITS = ["12345678", "3.14159", "1,000,000", "2026-11-25", "١٢٣٤", "１２３", "½", "Ⅻ", "0x1F", "42", "7",
          "9999999999999", "x2", "v1.2.3"]
CODE = ["def f(x):\n    return x**2  # comment", "if (a && b) { x += 1; }", '<div class="x">hi</div>',
        "fn main() -> Result<(), Box<dyn Error>>", "for (int i = 0; i < n; ++i)", "SELECT * FROM t WHERE a>=3;",
        "$ ls -la ~/.cache | grep 'x'", "a[i]->b.c = &d;", "λx.x", "#include <stdio.h>", "x = {'a': [1, 2]}"]
PUNCT = ["!!!", "...", "—", "“quotes”", "«»", "?!", "(", ")", ";;", "'", '"', "--", "@#$%^&*", "~", "¿¡"]
SPECIAL = ["<|endoftext|>", "<s>", "</s>", "<|begin_of_text|>", "<|eot_id|>", "<unk>", "<mask>", "hello world"]


def random_char(rng):
    """A code point from a mix of planes (no surrogates)."""
    ranges = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF), (0x900, 0x97F),
              (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F), (0x2100, 0x22FF), (0x3040, 0x30FF),
              (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xFF00, 0xFFEF), (0x1F300, 0x1FAFF), (0x10000, 0x1007F),
              (0x1D400, 0x1D7FF), (0x20000, 0x2A6DF), (0x0, 0x1F)]
    lo, hi = rng.choice(ranges)
    return chr(rng.randint(lo, hi))


def make_lines(n=3000, seed=0):
    rng = random.Random(seed)
    groups = [WORDS, CONTRACTIONS, SCRIPTS, ACCENTS, COMBINING, EMOJI, DIGITS, CODE, PUNCT, SPECIAL]
    weights = [30, 6, 8, 5, 3, 4, 5, 4, 5, 1]
    lines = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 14)):
            if rng.random() < 0.04:
                parts.append("".join(random_char(rng) for _ in range(rng.randint(1, 6))))
            else:
                g = rng.choices(groups, weights)[0]
                w = rng.choice(g)
                if g is WORDS and rng.random() < 0.15:
                    w = w.capitalize() if rng.random() < 0.7 else w.upper()
                parts.append(w)
            parts.append(rng.choice(SPACES) if rng.random() < 0.25 else rng.choice([" ", " ", " ", "", ", ", ". "]))
        line = "".join(parts)
        if rng.random() < 0.1:
            line = rng.choice(SPACES) + line
        lines.append(line)
    lines += ["", " ", "  ", "\n", "a", "<s>", "<s>hello", "hello</s>", " <mask> x", "x<mask>y", "hello world!",
              "xhello worldy", "\u00a0\u00a0b", "a \t\n\n  b", "12345 x", "I'S 'ſ x", "\x00nul\x00"]
    return lines


LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
             r"\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
            r"\s*[\r\n]+|\s+(?!\S)|\s+")


def _set_model_fields(path, **fields):
    with open(path, encoding="utf-8") as f:
        d = json.load(f)
    d["model"].update(fields)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(d, f, ensure_ascii=False, indent=1)


def train_tokenizers(outdir, lines, names=None):
    """Trains the test tokenizers on lines; returns {name: tokenizer.json path}."""
    from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers,
                            processors, trainers)
    os.makedirs(outdir, exist_ok=True)
    out = {}
    byte_tokens = ["<0x%02X>" % b for b in range(256)]

    def want(name):
        return names is None or name in names

    def save(name, tok):
        p = os.path.join(outdir, name + ".json")
        tok.save(p)
        out[name] = p
        return p

    def bytelevel(vocab, prefix, specials):
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=prefix)
        tok.decoder = decoders.ByteLevel()
        tok.post_processor = processors.ByteLevel(trim_offsets=True)
        tok.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=vocab, special_tokens=specials,
                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
        return tok

    if want("gpt2") or want("gpt2_fast"):  # GPT-2's shape
        save("gpt2", bytelevel(4000, False, ["<|endoftext|>"]))
    if want("gpt2_prefix"):  # add_prefix_space, added tokens with lstrip/rstrip/single_word/normalized
        tok = bytelevel(3000, True, ["<|endoftext|>"])
        tok.add_special_tokens([AddedToken("<mask>", lstrip=True, rstrip=False, special=True)])
        tok.add_tokens([AddedToken("hello world", normalized=True), AddedToken("fox", single_word=True),
                        AddedToken("lazy", rstrip=True, lstrip=True)])
        save("gpt2_prefix", tok)
    if want("gpt2_fast"):  # transformers' GPT2TokenizerFast from the same vocab and merges
        from transformers import GPT2TokenizerFast
        d = os.path.join(outdir, "gpt2_files")
        os.makedirs(d, exist_ok=True)
        Tokenizer.from_file(out["gpt2"]).model.save(d)
        fast = GPT2TokenizerFast(vocab_file=os.path.join(d, "vocab.json"), merges_file=os.path.join(d, "merges.txt"))
        fast.save_pretrained(d)
        out["gpt2_fast"] = os.path.join(d, "tokenizer.json")
    if want("llama2"):  # Llama-2 as converted by transformers (legacy): Prepend + Replace normalizer
        tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
        tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                         decoders.Strip(" ", 1, 0)])
        tok.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=1200, show_progress=False,
                                special_tokens=["<unk>", "<s>", "</s>"] + byte_tokens))
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
        save("llama2", tok)
    if want("llama2_meta"):  # newer conversion: Metaspace pre-tokenizer and decoder, prepend_scheme "first"
        tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
        tok.decoder = decoders.Sequence([decoders.Metaspace(replacement="▁", prepend_scheme="first"),
                                         decoders.ByteFallback(), decoders.Fuse()])
        tok.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=1500, show_progress=False,
                                special_tokens=["<unk>", "<s>", "</s>"] + byte_tokens))
        tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", 1), ("</s>", 2)])
        save("llama2_meta", tok)
    if want("meta_unk"):  # Metaspace split=True, always; no byte fallback: unknown characters, not fused
        tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=False))
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
        tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
        tok.train_from_iterator(lines[: len(lines) // 3], trainers.BpeTrainer(vocab_size=600, show_progress=False,
                                special_tokens=["<unk>"], limit_alphabet=80))
        save("meta_unk", tok)
    if want("llama3") or want("qwen2"):  # Llama-3: the split regex, byte-level without its own regex, ignore_merges
        for name, regex in (("llama3", LLAMA3_RE), ("qwen2", QWEN2_RE)):
            if not want(name):
                continue
            tok = Tokenizer(models.BPE())
            tok.pre_tokenizer = pre_tokenizers.Sequence([
                pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
            tok.decoder = decoders.ByteLevel()
            specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
            tok.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=5000, special_tokens=specials,
                                    initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
            if name == "llama3":
                tok.post_processor = processors.Sequence([
                    processors.ByteLevel(trim_offsets=False),
                    processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                                  special_tokens=[("<|begin_of_text|>", 0)])])
            p = save(name, tok)
            if name == "llama3":
                _set_model_fields(p, ignore_merges=True)
    return out
