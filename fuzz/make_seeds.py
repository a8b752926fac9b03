#!/usr/bin/env python3
"""Write seed corpora for the libFuzzer targets from the golden checkpoints.

usage: python3 fuzz/make_seeds.py [OUT_DIR]   (default: fuzz-corpus)

OUT_DIR/safetensors/  small valid safetensors files: each golden shard's header
                      with every tensor shrunk to one element (real names,
                      dtypes and ranks, data section rebuilt), plus hand-made
                      files covering scalars, empty tensors and __metadata__.
OUT_DIR/config/       the golden config.json files and variants (reference
                      key names, V4 without drafter, V4.1 flattened).
OUT_DIR/json/         the golden config.json and index files, for fuzz_json.
OUT_DIR/schema/       JSON schemas from the JSON-Schema-Test-Suite fixtures (fuzz_schema).
OUT_DIR/gbnf/         the GBNF fixture grammars (fuzz_gbnf).
OUT_DIR/regex/        the `pattern` regexes of those schemas plus a few hand-made ones (fuzz_regex).
OUT_DIR/chat/         DeepSeek's V4 chat inputs and the reference cases' message lists (fuzz_chat).
OUT_DIR/tokenizer/    texts and invalid-UTF-8 byte strings of the tokenizer oracle fixture (fuzz_tokenizer).
OUT_DIR/tokenizer_load/ the synthetic tokenizer.json files of tests/data/tokenizer/tiny (fuzz_tokenizer_load).
OUT_DIR/oai_request/  OpenAI request bodies and DSML tool-call outputs, behind fuzz_oai_request's mode byte.
"""
import gzip
import json
import os
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests", "data", "golden")
SIZES = {"BF16": 2, "F16": 2, "F32": 4, "I64": 8, "I32": 4, "I8": 1, "U8": 1, "F8_E4M3": 1, "F8_E8M0": 1}


def st_bytes(tensors, metadata=None):
    """tensors: list of (name, dtype, shape); returns a valid safetensors image."""
    header, off = {}, 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dt, shape in tensors:
        n = SIZES[dt]
        for d in shape:
            n *= d
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(h)) + h + bytes(i & 255 for i in range(off))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "fuzz-corpus")
    sd, cd = os.path.join(out, "safetensors"), os.path.join(out, "config")
    os.makedirs(sd, exist_ok=True)
    os.makedirs(cd, exist_ok=True)
    jd = os.path.join(out, "json")
    os.makedirs(jd, exist_ok=True)
    n = 0
    for model in sorted(os.listdir(GOLDEN)):
        mdir = os.path.join(GOLDEN, model)
        if not os.path.isdir(mdir):
            continue
        for f in sorted(os.listdir(mdir)):
            if f.endswith(".safetensors"):
                with open(os.path.join(mdir, f), "rb") as fh:
                    hl = struct.unpack("<Q", fh.read(8))[0]
                    hdr = json.loads(fh.read(hl))
                meta = hdr.pop("__metadata__", None)
                ts = [(k, v["dtype"], [1] * len(v["shape"])) for k, v in sorted(hdr.items())]
                with open(os.path.join(sd, f"{model}-{f}"), "wb") as o:
                    o.write(st_bytes(ts, meta))
                n += 1
        for f in ("config.json", "model.safetensors.index.json"):
            with open(os.path.join(mdir, f), "rb") as fh, open(os.path.join(jd, f"{model}-{f}"), "wb") as o:
                o.write(fh.read())
        with open(os.path.join(mdir, "config.json")) as fh:
            cfg = json.load(fh)
        with open(os.path.join(cd, f"{model}.json"), "w") as o:
            json.dump(cfg, o, indent=1)
        if cfg.get("model_type") == "deepseek_v4":
            ref = {("dim" if k == "hidden_size" else "n_layers" if k == "num_hidden_layers" else k): v
                   for k, v in cfg.items() if k not in ("model_type", "architectures")}
            with open(os.path.join(cd, f"{model}-refnames.json"), "w") as o:
                json.dump(ref, o)
            nodraft = dict(cfg, compress_ratios=cfg["compress_ratios"][:-1], num_nextn_predict_layers=0)
            with open(os.path.join(cd, f"{model}-nodrafter.json"), "w") as o:
                json.dump(nodraft, o)
        else:
            flat = dict(cfg)
            text = flat.pop("text_config")
            text.pop("model_type", None)
            flat.update(text)
            with open(os.path.join(cd, f"{model}-flat.json"), "w") as o:
                json.dump(flat, o)
        n += 2
    extra = {
        "scalar-and-empty.safetensors": st_bytes([("s", "F32", []), ("z", "I64", [0, 3]), ("a", "BF16", [3])],
                                                 {"format": "pt"}),
        "all-dtypes.safetensors": st_bytes([(f"t.{d}", d, [2, 1]) for d in SIZES]),
        "model-prefix.safetensors": st_bytes([("model.layers.0.w", "U8", [4]), ("model.embed.weight", "BF16", [2, 2])]),
        "empty.safetensors": st_bytes([]),
    }
    for name, data in extra.items():
        with open(os.path.join(sd, name), "wb") as o:
            o.write(data)
        n += 1
    n += structured_seeds(out)
    n += text_seeds(out)
    n += oai_seeds(out)
    print(f"wrote {n} seeds under {out}")


def oai_seeds(out):
    """Seeds for fuzz_oai_request: a mode byte (bit 0 chat, 1 thinking, 2 tools) and a body."""
    d = os.path.join(out, "oai_request")
    os.makedirs(d, exist_ok=True)
    dsml = "\uff5cDSML\uff5c"
    call = (f"<{dsml} calls>\n<{dsml} invoke name=\"f\">\n<{dsml} parameter name=\"a\" string=\"false\">[1]"
            f"</{dsml} parameter>\n</{dsml} invoke>\n</{dsml} calls>")
    bodies = [
        (1, {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True,
             "stream_options": {"include_usage": True}, "max_tokens": 8, "seed": 1, "stop": ["a", "b"]}),
        (1, {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "x"}], "tools": [
            {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}], "tool_choice": "auto",
            "logprobs": True, "top_logprobs": 2, "thinking": True, "reasoning_effort": "max"}),
        (1, {"messages": [{"role": "user", "content": "j"}], "response_format": {"type": "json_schema", "json_schema": {
            "name": "n", "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}},
            "chat_template_kwargs": {"thinking": True}}),
        (0, {"prompt": "once", "logprobs": 3, "n": 2, "temperature": 0.5, "top_p": 0.9, "top_k": 5}),
        (0, {"prompt": [1, 2, 3], "structured_outputs": {"regex": "[a-z]+"}, "presence_penalty": 1}),
    ]
    n = 0
    for i, (mode, b) in enumerate(bodies):
        with open(os.path.join(d, f"req{i}"), "wb") as o:
            o.write(bytes([mode]) + json.dumps(b).encode())
        n += 1
    for i, text in enumerate(["why</think>ok", "pre" + call, "r</think>" + call + "\n", call[:40]]):
        with open(os.path.join(d, f"out{i}"), "wb") as o:
            o.write(bytes([6]) + text.encode())
        n += 1
    return n


def text_seeds(out):
    """Seeds for fuzz_chat, fuzz_tokenizer and fuzz_tokenizer_load from tests/data."""
    data = os.path.join(ROOT, "tests", "data")
    dirs = {k: os.path.join(out, k) for k in ("chat", "tokenizer", "tokenizer_load")}
    for d in dirs.values():
        os.makedirs(d, exist_ok=True)
    n = 0
    v4 = os.path.join(data, "chat", "v4")
    for f in sorted(os.listdir(v4)):
        if f.startswith("input_") and f.endswith(".json"):
            with open(os.path.join(v4, f), "rb") as fh, open(os.path.join(dirs["chat"], f), "wb") as o:
                o.write(fh.read())
            n += 1
    with open(os.path.join(data, "chat", "cases.jsonl"), encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            with open(os.path.join(dirs["chat"], f"case{i}.json"), "w", encoding="utf-8") as o:
                json.dump(json.loads(line)["input"], o, ensure_ascii=False)
            n += 1
    with gzip.open(os.path.join(data, "tokenizer", "oracle_deepseek.jsonl.gz"), "rt", encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            if i % 25:  # every 25th case: ~250 texts of every kind
                continue
            c = json.loads(line)
            b = bytes.fromhex(c["hex"]) if "hex" in c else c["text"].encode("utf-8")
            with open(os.path.join(dirs["tokenizer"], f"t{i}"), "wb") as o:
                o.write(b)
            n += 1
    tiny = os.path.join(data, "tokenizer", "tiny")
    for f in sorted(os.listdir(tiny)):
        if f.endswith(".json"):
            with open(os.path.join(tiny, f), "rb") as fh, open(os.path.join(dirs["tokenizer_load"], f), "wb") as o:
                o.write(fh.read())
            n += 1
    return n


def structured_seeds(out):
    """Seeds for fuzz_schema / fuzz_gbnf / fuzz_regex from tests/data/structured."""
    sdir = os.path.join(ROOT, "tests", "data", "structured")
    dirs = {k: os.path.join(out, k) for k in ("schema", "gbnf", "regex")}
    for d in dirs.values():
        os.makedirs(d, exist_ok=True)
    n, pats = 0, set()

    def walk(x):
        if isinstance(x, dict):
            for k, v in x.items():
                if k == "pattern" and isinstance(v, str):
                    pats.add(v)
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    for f in sorted(os.listdir(os.path.join(sdir, "jsts"))):
        if not f.endswith(".json"):
            continue
        with open(os.path.join(sdir, "jsts", f)) as fh:
            cases = json.load(fh)
        for i, c in enumerate(cases):
            with open(os.path.join(dirs["schema"], f"{f[:-5]}-{i}.json"), "w") as o:
                json.dump(c["schema"], o)
            walk(c["schema"])
            n += 1
    for f in sorted(os.listdir(os.path.join(sdir, "gbnf"))):
        if f.endswith(".gbnf"):
            with open(os.path.join(sdir, "gbnf", f), "rb") as fh, open(os.path.join(dirs["gbnf"], f), "wb") as o:
                o.write(fh.read())
            n += 1
    pats.update([r"^[a-z]+(?:-[a-z0-9]+)*$", r"\d{3}-\w{2,4}|[^\s\S]", r"(a|b)*c{2,5}?\u00e9.", r"[\p{L}]", r"(?=x)y"])
    for i, p in enumerate(sorted(pats)):
        with open(os.path.join(dirs["regex"], f"r{i}"), "w") as o:
            o.write(p)
        n += 1
    return n


if __name__ == "__main__":
    main()
