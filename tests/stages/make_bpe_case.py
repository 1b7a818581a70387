#!/usr/bin/env python3
"""make_bpe_case.py OUTDIR [MB]: a byte-level BPE trained here with HF
`tokenizers` (GPT-2 pre-tokenization: ByteLevel, add_prefix_space=False),
and text with its ids, for tests/stages/bpe_vs_hf.sh:

  OUTDIR/tokenizer.json            the trained tokenizer (<|endoftext|> special)
  OUTDIR/vocab.json, merges.txt    the same model in GPT-2's two-file form
  OUTDIR/text.txt                  about MB megabytes (default 4) of mixed text
  OUTDIR/ids.u32                   HF's ids of text.txt, uint32 little-endian
  OUTDIR/allcp.txt, allcp.u32      every code point up to U+2FFFF (and a few
                                   above) between letters, digits, spaces and
                                   quotes, then long runs (letters, spaces,
                                   newlines, digits, CJK, emoji, punctuation),
                                   and HF's ids of it
  OUTDIR/docs/N.txt, docs.u32      a few documents and HF's ids of each one
                                   joined by <|endoftext|> (--eot-between-files)

The text is drawn (fixed seed) from pieces meant to reach every branch of
GPT-2's pattern: accents (composed and combining), CJK, emoji with
modifiers and joiners, Arabic, Cyrillic, Greek, Devanagari, tabs, runs of
spaces and newlines, CR LF, no-break and ideographic spaces, digits mixed
with letters, contractions in both cases, punctuation runs, and literal
<|endoftext|>. Exits 77 (skip) when `tokenizers` is missing."""
import random
import struct
import sys
import os

try:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
except ImportError:
    print("SKIP: python3 cannot import tokenizers (pip install tokenizers; bash tools/setup.sh --tests)")
    sys.exit(77)

out = sys.argv[1]
mb = float(sys.argv[2]) if len(sys.argv) > 2 else 4.0
os.makedirs(os.path.join(out, "docs"), exist_ok=True)
rng = random.Random(20251125)

words = ("the of and to in is that it for was on are with as his they be at one have this from or had by word but "
         "what some we can out other were all there when up use your how said an each she which do their time if "
         "will way about many then them write would like so these her long make thing see him two has look more "
         "day could go come did number sound no most people my over know water than call first who may down side "
         "been now find any new work part take get place made live where after back little only round man year "
         "came show every good me give our under name very through just form sentence great think say help low "
         "line differ turn cause much mean before move right boy old too same tell does set three want air well "
         "also play small end put home read hand port large spell add even land here must big high such follow "
         "act why ask men change went light kind off need house picture try us again animal point mother world "
         "near build self earth father").split()
accented = ("café naïve résumé Straße über façade Ærø smörgåsbord jalapeño São Paulo Zürich Ångström crème brûlée "
            "déjà vu fiancée Łódź Dvořák Ölüdeniz ĳssel").split()
combining = ["e\u0301", "a\u0308", "n\u0303o", "Zu\u0308rich", "o\u0302\u0323"]
cjk = ["東京", "中文字符", "日本語のテキスト", "漢字", "한국어 문장", "カタカナ", "ひらがな", "北京大学", "我爱你",
       "你好，世界！", "「引用」", "第三章"]
emoji = ["😀", "👍🏽", "🇫🇷", "👨‍👩‍👧‍👦", "🎉🎉", "❤️", "🤖", "✨", "🙂🙃", "🏳️‍🌈", "🍣🍜"]
other = ["Привет", "мир", "Ελληνικά", "λόγος", "مرحبا", "بالعالم", "नमस्ते", "दुनिया", "שלום", "ไทย",
         "Ω≈ç√∫", "½", "²³", "Ⅻ", "٣٤٥", "१२३"]
numbers = ["123", "3.14", "1990s", "abc123", "x2", "4th", "v1.2.3", "0x1F", "12,345", "2025-11-25", "A1B2C3",
           "99%", "$5", "1e-9", "３４５", "7z"]
contractions = ["don't", "I'm", "we'll", "they've", "it's", "you'd", "we're", "DON'T", "It'S", "'s", "''s",
                "rock'n'roll", "o'clock", "y'all'd've", "'tis", "'", "’s", "can’t"]
punct = [".", ",", "!", "?", "...", "--", "—", "(", ")", "\"", "«»", "{}", "[x]", "#", "@user", "http://a.b/c?d=e",
         "a_b", "->", "=>", ";", ":", "¿", "¡", "•", "…", "§1"]
spaces = [" "] * 30 + ["  ", "   ", "\t", "\t\t", " \t", "\n", "\n\n", "\n\n\n", "   \n", " \n ", "\r\n", "\u00a0",
                       "\u3000", "\u2009", "\u2028", "\x0b", "\x0c", "      "]
pools = [(words, 40), (accented, 6), (combining, 1), (cjk, 5), (emoji, 3), (other, 5), (numbers, 5),
         (contractions, 5), (punct, 8)]
flat = [p for p, w in pools for _ in range(w)]


def piece():
    pool = rng.choice(flat)
    w = rng.choice(pool)
    if pool is words and rng.random() < 0.1:
        w = w.capitalize() if rng.random() < 0.7 else w.upper()
    return w


def text_of(nbytes):
    parts, n = [], 0
    while n < nbytes:
        w = piece()
        s = rng.choice(spaces) if rng.random() < 0.85 else ""
        if rng.random() < 0.002:
            w = "<|endoftext|>"
        parts.append(w + s)
        n += len((w + s).encode())
    return "".join(parts)


text = text_of(int(mb * 1e6))
with open(os.path.join(out, "text.txt"), "w", encoding="utf-8", newline="") as f:
    f.write(text)

tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(vocab_size=4000, min_frequency=2, special_tokens=["<|endoftext|>"],
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
# trained on a different draw than the text it encodes, so some words are unseen
train_text = text_of(int(mb * 0.5e6))
tok.train_from_iterator([train_text[i:i + 100000] for i in range(0, len(train_text), 100000)], trainer=trainer)
tok.save(os.path.join(out, "tokenizer.json"))
tok.model.save(out)   # vocab.json, merges.txt

ids = text_ids = tok.encode(text).ids
assert tok.decode(ids) == text.replace("<|endoftext|>", ""), "HF round trip"
with open(os.path.join(out, "ids.u32"), "wb") as f:
    f.write(struct.pack("<%dI" % len(ids), *ids))

# every code point in a few contexts: the Unicode classes of the pattern
# (\p{L}, \p{N}, White_Space) as HF's Oniguruma reads them
cps = [c for c in range(1, 0x30000) if not 0xD800 <= c <= 0xDFFF] + [0xE0001, 0xE0100, 0xF0000, 0x10FFFD]
ctx = ["a", " ", "1", "\n", "'", "  ", "x1", "é"]
allcp = "".join(rng.choice(ctx) + chr(c) + rng.choice(ctx) + chr(c) * rng.randint(1, 3) for c in cps)
# and long pieces (the encoder's heap): runs of letters, spaces, digits, CJK, emoji, punctuation
allcp += " " + "".join(rng.choice("ACGT") for _ in range(20000)) + " " * 5000 + "x" + "\n" * 3000
allcp += "".join(rng.choice("0123456789") for _ in range(10000)) + " " + "".join(rng.choice(cjk) for _ in range(1000))
allcp += " " + "".join(rng.choice(emoji) for _ in range(1000)) + " " + "".join(rng.choice("!?.,;:-") for _ in range(5000))
allcp += " " + "".join(rng.choice(words) for _ in range(3000)) + "\t" * 100 + " \n" * 100
with open(os.path.join(out, "allcp.txt"), "w", encoding="utf-8", newline="") as f:
    f.write(allcp)
ids = tok.encode(allcp).ids
with open(os.path.join(out, "allcp.u32"), "wb") as f:
    f.write(struct.pack("<%dI" % len(ids), *ids))

eot = tok.token_to_id("<|endoftext|>")
all_ids = []
for k in range(3):
    d = text_of(20000 + 7000 * k)
    with open(os.path.join(out, "docs", "%d.txt" % k), "w", encoding="utf-8", newline="") as f:
        f.write(d)
    if k:
        all_ids.append(eot)
    all_ids += tok.encode(d).ids
with open(os.path.join(out, "docs.u32"), "wb") as f:
    f.write(struct.pack("<%dI" % len(all_ids), *all_ids))
print("made %s: %d bytes of text, %d ids, vocab %d" % (out, len(text.encode()), len(text_ids), tok.get_vocab_size()))
