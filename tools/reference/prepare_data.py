#!/usr/bin/env python3
"""Build the plain-text training corpus of the demo model from Debian packages (stdlib only).

Usage: python3 tools/reference/prepare_data.py [.data]
  1. apt-get download the packages below into .data/debs (skipped if already there),
  2. dpkg -x them into .data/root,
  3. decode the SWORD zText/zCom modules (zlib blocks) and the dictd files,
  4. write .data/text/{train,test}.txt and .data/text/sources.json.
The held-out test split is the last 4% of every source (whole trailing books / entries).
Packages, versions and licences: tools/reference/DATA.md.
"""
import glob, gzip, html, json, os, re, struct, subprocess, sys, zlib

PACKAGES = ["sword-text-web", "sword-text-kjv", "sword-comm-mhcc", "sword-comm-tdavid",
            "dict-devil", "dict-jargon"]
SWORD = [  # (name, module dir, entry record size: 10 = (u32 block, u32 off, u16 size), 12 = (u32, u32, u32))
    ("web", "usr/share/sword/modules/texts/ztext/engWEB2015eb", 10),
    ("kjv", "usr/share/sword/modules/texts/ztext/engKJV2006eb", 10),
    ("mhcc", "usr/share/sword/modules/comments/zcom/mhcc", 10),  # zCom4 in .conf, but 10-byte records
    ("tdavid", "usr/share/sword/modules/comments/zcom/tdavid", 12),
]
TEST_FRAC = 0.04


def fetch(data):
    debs = os.path.join(data, "debs")
    os.makedirs(debs, exist_ok=True)
    for p in PACKAGES:
        if not glob.glob(os.path.join(debs, p + "_*.deb")):
            subprocess.run(["apt-get", "download", p], cwd=debs, check=True)
    root = os.path.join(data, "root")
    for deb in sorted(glob.glob(os.path.join(debs, "*.deb"))):
        subprocess.run(["dpkg", "-x", deb, root], check=True)
    return root


def clean_osis(s):
    s = re.sub(r"<note\b.*?</note>", " ", s, flags=re.S)          # footnotes / cross references
    s = re.sub(r"<(title|div type=\"x-milestone\")\b.*?</title>", " ", s, flags=re.S)
    s = re.sub(r"<[^>]*>", " ", s)
    s = html.unescape(s)
    s = re.sub(r"\s+", " ", s).strip()
    return re.sub(r" ([,;:.!?)\]’”])", r"\1", s)  # tag stripping leaves "word ," in the KJV


def read_sword(moddir, recsize):
    """Yield the entries of a SWORD compressed module in index order (old then new testament)."""
    out = []
    for testament in ("ot", "nt"):
        base = [f for f in glob.glob(os.path.join(moddir, testament + ".?z?"))]
        ext = {f[-1]: f for f in base}  # s: block index, v: entry index, z: zlib data
        if not ext:
            continue
        bidx = open(ext["s"], "rb").read()
        blocks = [struct.unpack_from("<III", bidx, i) for i in range(0, len(bidx) - 11, 12)]
        data = open(ext["z"], "rb").read()
        cache, seen = {}, set()
        vidx = open(ext["v"], "rb").read()
        fmt = "<IIH" if recsize == 10 else "<III"
        for i in range(0, len(vidx) - recsize + 1, recsize):
            b, off, size = struct.unpack_from(fmt, vidx, i)
            if size == 0 or b >= len(blocks) or (b, off, size) in seen:
                continue  # commentaries link one entry to every verse of its range: keep it once
            seen.add((b, off, size))
            if b not in cache:
                bo, bs, _ = blocks[b]
                cache = {b: zlib.decompress(data[bo:bo + bs])}
            txt = cache[b][off:off + size].decode("utf-8", "replace")
            txt = clean_osis(txt)
            if len(txt) > 1:
                out.append(txt)
    return out


def read_dictd(path):
    raw = gzip.open(path, "rb").read().decode("utf-8", "replace")
    paras = [re.sub(r"[ \t]+", " ", p.strip()) for p in re.split(r"\n\s*\n", raw)]
    return [re.sub(r"\s*\n\s*", " ", p) for p in paras if len(p) > 1 and not p.startswith("00-database")]


def main():
    data = sys.argv[1] if len(sys.argv) > 1 else ".data"
    root = fetch(data)
    sources = {}
    for name, d, rec in SWORD:
        sources[name] = read_sword(os.path.join(root, d), rec)
    sources["devil"] = read_dictd(os.path.join(root, "usr/share/dictd/devil.dict.dz"))
    sources["jargon"] = read_dictd(os.path.join(root, "usr/share/dictd/jargon.dict.dz"))
    os.makedirs(os.path.join(data, "text"), exist_ok=True)
    stats = {}
    with open(os.path.join(data, "text", "train.txt"), "w") as tr, open(os.path.join(data, "text", "test.txt"), "w") as te:
        for name, entries in sources.items():
            cut = int(len(entries) * (1 - TEST_FRAC))
            tr.write("\n".join(entries[:cut]) + "\n")
            te.write("\n".join(entries[cut:]) + "\n")
            stats[name] = {"entries": len(entries), "train_chars": sum(map(len, entries[:cut])),
                           "test_chars": sum(map(len, entries[cut:])), "test_first_entry": entries[cut][:80]}
    json.dump(stats, open(os.path.join(data, "text", "sources.json"), "w"), indent=1)
    print(json.dumps(stats, indent=1))


if __name__ == "__main__":
    main()
