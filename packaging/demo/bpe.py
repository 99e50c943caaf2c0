# SPDX-License-Identifier: CC0-1.0
"""A small byte-level BPE in the GPT-2 / Qwen2 style, trained on the story corpus.

Pieces are cut by the qwen2 pre-tokenizer (restricted here to ASCII, which is all the
corpus holds), bytes are spelled with GPT-2's printable byte alphabet, and merges are
learned greedily by pair frequency (ties broken by the pair's spelling, so training is
deterministic). Splash's tokenizer reads the result from the GGUF's tokenizer.ggml.* keys.
"""
import collections
import re

# qwen2's pattern with \p{L} -> [A-Za-z] and \p{N} -> [0-9]: the corpus is ASCII.
PRETOKEN = re.compile(r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\nA-Za-z0-9]?[A-Za-z]+|[0-9]"
                      r"| ?[^\sA-Za-z0-9]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# Qwen's added tokens; chat markup is CONTROL (3), reasoning and tool tags USER_DEFINED (4).
SPECIALS = [("<|endoftext|>", 3), ("<|im_start|>", 3), ("<|im_end|>", 3), ("<think>", 4),
            ("</think>", 4), ("<tool_call>", 4), ("</tool_call>", 4), ("<tool_response>", 4),
            ("</tool_response>", 4)]
SPECIAL_RE = re.compile("(" + "|".join(re.escape(t) for t, _ in SPECIALS) + ")")


def byte_alphabet():
    """GPT-2's map from bytes to printable characters: printable Latin-1 bytes stand
    for themselves, the others take code points from 256 up, in byte order."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + \
        list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


BYTE_CHAR = byte_alphabet()


def spell(piece):
    return "".join(BYTE_CHAR[b] for b in piece.encode("utf-8"))


def pretokenize(text):
    return PRETOKEN.findall(text)


def train(texts, n_merges):
    """Learns up to n_merges merges from an iterable of texts; returns the merge list."""
    counts = collections.Counter()
    for t in texts:
        for seg in SPECIAL_RE.split(t):
            if seg and not SPECIAL_RE.fullmatch(seg):
                counts.update(pretokenize(seg))
    words = [(list(spell(w)), c) for w, c in counts.items()]
    pairs = collections.Counter()
    where = collections.defaultdict(set)
    for i, (sym, c) in enumerate(words):
        for a, b in zip(sym, sym[1:]):
            pairs[(a, b)] += c
            where[(a, b)].add(i)
    merges = []
    while len(merges) < n_merges and pairs:
        best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        (a, b), c = best
        if c < 2:
            break
        merges.append((a, b))
        joined = a + b
        for i in list(where.pop((a, b), ())):
            sym, wc = words[i]
            for x, y in zip(sym, sym[1:]):
                pairs[(x, y)] -= wc
                if pairs[(x, y)] <= 0:
                    del pairs[(x, y)]
            out, j = [], 0
            while j < len(sym):
                if j + 1 < len(sym) and sym[j] == a and sym[j + 1] == b:
                    out.append(joined)
                    j += 2
                else:
                    out.append(sym[j])
                    j += 1
            words[i] = (out, wc)
            for x, y in zip(out, out[1:]):
                pairs[(x, y)] += wc
                where[(x, y)].add(i)
        pairs.pop((a, b), None)
    return merges


class Tokenizer:
    def __init__(self, merges):
        self.merges = merges
        self.tokens = [BYTE_CHAR[b] for b in range(256)] + [a + b for a, b in merges] + \
            [t for t, _ in SPECIALS]
        self.types = [1] * (256 + len(merges)) + [k for _, k in SPECIALS]
        self.id = {t: i for i, t in enumerate(self.tokens[:256 + len(merges)])}
        self.special = {t: 256 + len(merges) + i for i, (t, _) in enumerate(SPECIALS)}
        self.rank = {m: r for r, m in enumerate(merges)}
        self.cache = {}

    def encode_piece(self, piece):
        ids = self.cache.get(piece)
        if ids is not None:
            return ids
        sym = list(spell(piece))
        while len(sym) > 1:
            ranked = [(self.rank.get((x, y), 1 << 30), i) for i, (x, y) in
                      enumerate(zip(sym, sym[1:]))]
            r, i = min(ranked)
            if r == 1 << 30:
                break
            sym[i:i + 2] = [sym[i] + sym[i + 1]]
        ids = [self.id[s] for s in sym]
        self.cache[piece] = ids
        return ids

    def encode(self, text):
        """Text to ids; the special tokens' spellings become their ids."""
        out = []
        for seg in SPECIAL_RE.split(text):
            if not seg:
                continue
            if seg in self.special:
                out.append(self.special[seg])
            else:
                for p in pretokenize(seg):
                    out.extend(self.encode_piece(p))
        return out

    def decode(self, ids):
        inv = {c: b for b, c in BYTE_CHAR.items()}
        out = bytearray()
        for i in ids:
            t = self.tokens[i]
            if self.types[i] != 1:
                out += t.encode()
            else:
                out += bytes(inv[c] for c in t)
        return out.decode("utf-8", "replace")
