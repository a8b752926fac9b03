#!/usr/bin/env python3
"""Oracle for the Engram compressed token map (architecture.md §5.8), python3 stdlib only.

Usage: python3 tools/reference/engram_token_map.py TOKENIZER.json OUT.json [--full]

The reference (DeepSeek-V4.1 inference/engram.py, build_compressed_token_map) decodes every id
alone with the Rust `tokenizers` backend and keys it by a normalized form of the text; equal keys
share a class, classes are numbered in first-seen order. This script re-implements that rule
from its definition, without `tokenizers`:

  1. token string: the added token's content if the id is an added token, else the model vocab
     entry (ByteLevel alphabet).
  2. Rust ByteLevel decoder, one token: if every char is in the byte alphabet, map chars back to
     bytes; otherwise take the token's UTF-8 bytes as they are. Then lossy UTF-8.
  3. Text containing U+FFFD -> key = the raw token string.
  4. Else key = normalizers.Sequence([NFKC, NFD, StripAccents, Lowercase,
     Replace(/[ \\t\\r\\n]+/, " "), Replace(/^ $/, U+E000), Strip, Replace(U+E000, " ")]),
     or the text itself when that is empty.

Semantics of the Rust normalizers that matter (tokenizers' own code):
  * StripAccents drops General_Category = Mark (Mn, Mc AND Me; crate
    unicode-normalization-alignments `is_combining_mark`), not only Mn.
  * NFKC/NFD/StripAccents use that crate's Unicode 9.0.0 tables. Python's unicodedata is newer
    (14.0 for 3.11). Decompositions and combining classes of assigned characters are stable, so
    only characters assigned after 9.0 and General_Category changes can differ; the three
    category changes into/out of Mark since 9.0 (U+1CF2, U+1CF3, U+111C9) are applied below.
    Characters assigned after 9.0 are not detectable with the stdlib; the C implementation
    filters them by ICU's Age property (there are none in the DeepSeek vocabulary).
  * Lowercase maps each char alone with Rust's char::to_lowercase: full mappings (U+0130 ->
    "i\\u0307") and NO final-sigma context. Python's str.lower() of a one-char string is the same.
  * Strip trims Rust char::is_whitespace = the Unicode White_Space property (str.strip() would
    also trim U+001C..U+001F, which are not White_Space).
  * Replace with a Regex uses Oniguruma: ^ and $ are line anchors, but after the first Replace
    no '\\n' is left, so /^ $/ only matches a string that is exactly one space.

Output: JSON in the format of tests/data/golden/v41-tiny-a/engram_token_map.json (vocab_size,
compressed_vocab_size, pad_token_id, pad_class, description) plus "sha256" of the map (the
little-endian int32 array). The map itself is stored compactly as "repeats": the [id, class]
pairs of ids that reuse an earlier class; every other id opens the next new class. With --full
the plain "map" array is written as well.
"""
import hashlib, json, struct, sys, unicodedata

# Unicode White_Space (PropList.txt; unchanged since Unicode 6.3).
WHITE_SPACE = set(map(chr, [*range(0x09, 0x0E), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B),
                            0x2028, 0x2029, 0x202F, 0x205F, 0x3000]))
# General_Category changes between Unicode 9.0 and 14.0 that cross the Mark boundary.
MARK_IN_9 = {"\u1cf2": True, "\u1cf3": True, "\U000111c9": False}
SENTINEL = "\ue000"
PAD_TOKEN_ID = 2


def byte_alphabet():
    """GPT-2 ByteLevel: char -> byte."""
    keep = [*range(33, 127), *range(161, 173), *range(174, 256)]
    chars, n = {}, 0
    for b in range(256):
        if b in keep:
            chars[chr(b)] = b
        else:
            chars[chr(256 + n)] = b
            n += 1
    return chars


def is_mark_u9(c):
    if c in MARK_IN_9:
        return MARK_IN_9[c]
    return unicodedata.category(c)[0] == "M"


def collapse_ws(s):
    out, in_run = [], False
    for c in s:
        if c in " \t\r\n":
            if not in_run:
                out.append(" ")
            in_run = True
        else:
            out.append(c)
            in_run = False
    return "".join(out)


def strip_ws(s):
    i, j = 0, len(s)
    while i < j and s[i] in WHITE_SPACE:
        i += 1
    while j > i and s[j - 1] in WHITE_SPACE:
        j -= 1
    return s[i:j]


def normalize(text):
    s = unicodedata.normalize("NFKC", text)
    s = unicodedata.normalize("NFD", s)
    s = "".join(c for c in s if not is_mark_u9(c))
    s = "".join(c.lower() for c in s)
    s = collapse_ws(s)
    if s == " ":
        s = SENTINEL
    s = strip_ws(s)
    return s.replace(SENTINEL, " ")


def load_tokens(path):
    tj = json.load(open(path, encoding="utf-8"))
    if tj["model"]["type"] != "BPE":
        sys.exit("only BPE tokenizers are supported")
    tokens = {i: s for s, i in tj["model"]["vocab"].items()}
    for a in tj["added_tokens"]:
        tokens[a["id"]] = a["content"]  # added vocabulary wins, as in Rust's decode
    return tokens, max(tokens) + 1


def decode_one(tok, alphabet):
    if tok is None:
        return ""  # an id the tokenizer does not define decodes to nothing
    if all(c in alphabet for c in tok):
        raw = bytes(alphabet[c] for c in tok)
    else:
        raw = tok.encode("utf-8")
    return raw.decode("utf-8", errors="replace")


def build_map(tokens, n):
    alphabet = byte_alphabet()
    classes, lookup = {}, []
    for i in range(n):
        tok = tokens.get(i)
        text = decode_one(tok, alphabet)
        if "\ufffd" in text:
            key = tok
        else:
            key = normalize(text) or text
        lookup.append(classes.setdefault(key, len(classes)))
    return lookup, len(classes)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    tokens, n = load_tokens(sys.argv[1])
    lookup, count = build_map(tokens, n)
    repeats, seen = [], 0
    for i, c in enumerate(lookup):
        if c == seen:
            seen += 1
        else:
            repeats.append([i, c])
    digest = hashlib.sha256(struct.pack("<%di" % n, *lookup)).hexdigest()
    out = {
        "description": "Engram compressed token map (architecture.md §5.8) computed by "
                       "tools/reference/engram_token_map.py from %s. 'repeats' lists the "
                       "[token id, class] pairs of ids that reuse an earlier class; every other "
                       "id opens the next new class (first-seen order). sha256 is over the map "
                       "as little-endian int32." % sys.argv[1].split("/")[-1],
        "vocab_size": n,
        "compressed_vocab_size": count,
        "pad_token_id": PAD_TOKEN_ID,
        "pad_class": lookup[PAD_TOKEN_ID],
        "sha256": digest,
        "repeats": repeats,
    }
    if "--full" in sys.argv[3:]:
        out["map"] = lookup
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print("%d ids -> %d classes, pad class %d, sha256 %s" % (n, count, lookup[PAD_TOKEN_ID], digest))


if __name__ == "__main__":
    main()
