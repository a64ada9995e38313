#!/usr/bin/env python3
"""Differential test: cairn-tokenize against an independent Python model of
llama.cpp's tokenizers, on random mixed text.

- BPE: llama.cpp splits words by running each pre-tokenizer regex (with
  std::regex: ordered alternation, backtracking) over a "collapsed" text in
  which every non-ASCII codepoint is replaced by one stand-in per Unicode
  category group (non-ASCII whitespace by \\v), then merges byte-alphabet
  symbols by rank. Python's `re` has the same matching semantics, so the same
  collapse gives an independent reference for every pre-tokenizer, run here
  over the Qwen3 vocabulary (the pre-tokenizer is swapped with --pre).
- SPM: the score-ordered bigram merge over the whole text, with byte fallback,
  over the stories260K vocabulary.

usage: reference_diff_test.py CAIRN_TOKENIZE SHARED_DIR [SEED]
Exit 0 when every line matches, 1 otherwise, 77 when ../shared is absent.
"""
import heapq
import os
import random
import struct
import subprocess
import sys
import tempfile
import unicodedata

# --- GGUF metadata (key/values only) ---------------------------------------

_SCALARS = {0: 'B', 1: 'b', 2: 'H', 3: 'h', 4: 'I', 5: 'i', 6: 'f', 7: '?', 10: 'Q', 11: 'q', 12: 'd'}


def read_gguf_metadata(path):
    with open(path, 'rb') as f:
        data = f.read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from('<' + fmt, data, pos)
        pos += struct.calcsize(fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take('Q')
        s = data[pos:pos + n].decode('utf-8', 'surrogateescape')
        pos += n
        return s

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take('I'), take('Q')
            return [value(et) for _ in range(n)]
        return take(_SCALARS[t])

    assert data[:4] == b'GGUF', path
    pos = 4
    take('I')
    take('Q')
    n_kv = take('Q')
    kv = {}
    for _ in range(n_kv):
        k = string()
        kv[k] = value(take('I'))
    return kv


# --- byte-level BPE ----------------------------------------------------------

def byte_alphabet():
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


WHITE_SPACE = set(list(range(9, 14)) + [0x20, 0x85, 0xA0, 0x1680] + list(range(0x2000, 0x200B)) +
                  [0x2028, 0x2029, 0x202F, 0x205F, 0x3000])
STAND_IN = {'N': '\xD1', 'L': '\xD2', 'P': '\xD3', 'M': '\xD4', 'S': '\xD5'}
CLASS = {'N': '\xD10-9', 'L': '\xD2A-Za-z', 'P': '\xD3!-#%-*,-/:-;?-@\\[-\\]_\\{\\}', 'M': '\xD4',
         'S': '\xD5\\$\\+<->\\^`\\|'}
STD_SPACE = '\\t\\n\\x0b\\x0c\\r '  # std::regex \s in the C locale


def collapse(cp):
    if cp < 128:
        return chr(cp)
    if cp in WHITE_SPACE:
        return '\x0b'
    return STAND_IN.get(unicodedata.category(chr(cp))[0], '\xD0')


def collapsed_regex(rx):
    import re
    out, inside, i = '', False, 0
    while i < len(rx):
        c = rx[i]
        if c == '[' and (i == 0 or rx[i - 1] != '\\'):
            inside = True
        elif inside and c == ']' and rx[i - 1] != '\\':
            inside = False
        elif rx.startswith('\\p{', i):
            j = rx.index('}', i)
            cls = CLASS[rx[i + 3:j]]
            out += cls if inside else '[' + cls + ']'
            i = j + 1
            continue
        elif rx.startswith('\\s', i):
            out += STD_SPACE if inside else '[' + STD_SPACE + ']'
            i += 2
            continue
        elif rx.startswith('\\S', i):
            assert not inside
            out += '[^' + STD_SPACE + ']'
            i += 2
            continue
        out += c
        i += 1
    return re.compile(out)


GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
LLAMA3 = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|"
          r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = LLAMA3.replace(r"\p{N}{1,3}", r"\p{N}")
QWEN35 = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|"
          r"\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
PRE_TOKENIZERS = {  # name: (regexes, ignore_merges)
    'qwen2': ([QWEN2], False),
    'llama-bpe': ([LLAMA3], True),
    'dbrx': ([LLAMA3], False),
    'qwen35': ([QWEN35], False),
    'smollm': ([r"\p{N}", GPT2], False),
    'gpt-2': ([GPT2], False),
    'default': ([r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", "[0-9][0-9][0-9]"], False),
    'falcon': ([r"[\p{P}\$\+<=>\^~\|`]+", GPT2, "[0-9][0-9][0-9]"], False),
}


class Bpe:
    def __init__(self, kv):
        self.ids = {t: i for i, t in enumerate(kv['tokenizer.ggml.tokens'])}
        self.ranks = {}
        for i, m in enumerate(kv['tokenizer.ggml.merges']):
            p = m.find(' ', 1)
            if p >= 0:
                self.ranks.setdefault((m[:p], m[p + 1:]), i)
        self.alphabet = byte_alphabet()

    def split(self, text, regexes):
        col = ''.join(collapse(ord(c)) for c in text)
        pieces = [len(text)]
        for rx in regexes:
            r, out, start = collapsed_regex(rx), [], 0
            for n in pieces:
                seg, last = col[start:start + n], 0
                for m in r.finditer(seg):
                    if m.end() == m.start():
                        continue
                    if m.start() > last:
                        out.append(m.start() - last)
                    out.append(m.end() - m.start())
                    last = m.end()
                if last < n:
                    out.append(n - last)
                start += n
            pieces = out
        words, s = [], 0
        for n in pieces:
            words.append(text[s:s + n])
            s += n
        return words

    def word(self, w, ignore_merges):
        enc = ''.join(self.alphabet[b] for b in w.encode('utf-8'))
        if ignore_merges and enc in self.ids:
            return [self.ids[enc]]
        sym = list(enc)
        alive = [True] * len(sym)
        nxt = list(range(1, len(sym))) + [-1]
        prv = list(range(-1, len(sym) - 1))
        heap = []

        def add(l, r):
            if l >= 0 and r >= 0 and (sym[l], sym[r]) in self.ranks:
                heapq.heappush(heap, (self.ranks[(sym[l], sym[r])], l, r, sym[l] + sym[r]))

        for i in range(1, len(sym)):
            add(i - 1, i)
        while heap:
            _, l, r, joined = heapq.heappop(heap)
            if not alive[l] or not alive[r] or sym[l] + sym[r] != joined:
                continue
            sym[l], alive[r], nxt[l] = joined, False, nxt[r]
            if nxt[r] >= 0:
                prv[nxt[r]] = l
            add(prv[l], l)
            add(l, nxt[l])
        out, i = [], 0
        while i != -1:
            if sym[i] in self.ids:
                out.append(self.ids[sym[i]])
            else:
                out += [self.ids[ch] for ch in sym[i] if len(ch.encode('utf-8')) == 1 and ch in self.ids]
            i = nxt[i]
        return out

    def tokenize(self, text, pre):
        regexes, ignore = PRE_TOKENIZERS[pre]
        return [t for w in self.split(text, regexes) if w for t in self.word(w, ignore)]


# --- SPM ---------------------------------------------------------------------

class Spm:
    def __init__(self, kv):
        self.ids = {t: i for i, t in enumerate(kv['tokenizer.ggml.tokens'])}
        self.scores = kv['tokenizer.ggml.scores']

    def tokenize(self, text):
        b = (' ' + text).replace(' ', '\u2581').encode('utf-8')
        lens = [1] * 12 + [2, 2, 3, 4]
        syms, o = [], 0
        while o < len(b):
            n = min(lens[b[o] >> 4], len(b) - o)
            syms.append([o, n])
            o += n
        nxt = list(range(1, len(syms))) + [-1]
        prv = list(range(-1, len(syms) - 1))
        heap = []

        def add(l, r):
            if l < 0 or r < 0:
                return
            t = b[syms[l][0]:syms[l][0] + syms[l][1] + syms[r][1]]
            try:
                s = t.decode('utf-8')
            except UnicodeDecodeError:
                return
            if s in self.ids:
                heapq.heappush(heap, (-self.scores[self.ids[s]], l, r, len(t)))

        for i in range(1, len(syms)):
            add(i - 1, i)
        while heap:
            _, l, r, size = heapq.heappop(heap)
            if syms[l][1] == 0 or syms[r][1] == 0 or syms[l][1] + syms[r][1] != size:
                continue
            syms[l][1] += syms[r][1]
            syms[r][1] = 0
            nxt[l] = nxt[r]
            if nxt[r] >= 0:
                prv[nxt[r]] = l
            add(prv[l], l)
            add(l, nxt[l])
        out, i = [1], 0 if syms else -1  # bos
        while i != -1:
            t = b[syms[i][0]:syms[i][0] + syms[i][1]]
            try:
                s = t.decode('utf-8')
            except UnicodeDecodeError:
                s = None
            if s is not None and s in self.ids:
                out.append(self.ids[s])
            else:
                out += [self.ids['<0x%02X>' % c] for c in t]
            i = nxt[i]
        return out


# --- driver ------------------------------------------------------------------

POOL = (list("abcXYZ019 .,;:!?'\"-_/()[]{}<>$+=^~|`@#%&*\\") +
        [' ', '  ', '   ', '\n', '\r\n', '\t', '\n\n', ' \n', "'s", "'S", "'ll", "'RE", "'ve", "'d",
         "'m", "'t", 'the', 'Hello', 'world', '12345', '3.14', '\u00e9', 'e\u0301', '\u0301',
         '\u00a0', '\u3000', '\u2003', '\u0085', '\u4e2d\u6587', '\u65e5\u672c\u8a9e', '\u0414\u0415',
         '\U0001F642', '\U0001F44D\U0001F3FD', '\u20ac', '\u00bd', '\u0660\u0661', '\u2028',
         '\u200b', '\ufeff', '\u0939\u093f', '\u00ad', '\u2581'])


def escape(s):
    return s.replace('\\', '\\\\').replace('\n', '\\n').replace('\t', '\\t').replace('\r', '\\r')


def run_tool(tool, model, texts, extra):
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, 'in.txt'), os.path.join(tmp, 'out.txt')
        with open(src, 'w', encoding='utf-8') as f:
            f.write(''.join(escape(t) + '\n' for t in texts))
        subprocess.run([tool, '--model', model, '--in', src, '--out', dst] + extra, check=True)
        with open(dst) as f:
            return [[int(x) for x in line.split()] for line in f]


def main():
    tool, shared = sys.argv[1], sys.argv[2]
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    qwen3 = os.path.join(shared, 'golden/tokenizer/qwen3-vocab.gguf')
    stories = os.path.join(shared, 'models/stories260K.gguf')
    if not (os.path.exists(qwen3) and os.path.exists(stories)):
        if os.environ.get('CI') == 'true':
            print('FAIL: shared data missing under CI')
            return 1
        print('shared data not present: skipping')
        return 77
    rng = random.Random(seed)
    texts = [''.join(rng.choice(POOL) for _ in range(rng.randint(1, 25))) for _ in range(200)]
    failures = 0
    bpe = Bpe(read_gguf_metadata(qwen3))
    for pre in PRE_TOKENIZERS:
        got = run_tool(tool, qwen3, texts, ['--pre', pre, '--no-add-special'])
        bad = [i for i, t in enumerate(texts) if bpe.tokenize(t, pre) != got[i]]
        failures += len(bad)
        print('bpe %-10s %d/%d match%s' % (pre, len(texts) - len(bad), len(texts),
                                           ' e.g. %r' % texts[bad[0]] if bad else ''))
    spm = Spm(read_gguf_metadata(stories))
    got = run_tool(tool, stories, texts, [])
    bad = [i for i, t in enumerate(texts) if spm.tokenize(t) != got[i]]
    failures += len(bad)
    print('spm stories260K %d/%d match%s' % (len(texts) - len(bad), len(texts),
                                            ' e.g. %r' % texts[bad[0]] if bad else ''))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
