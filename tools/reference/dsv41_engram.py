"""Engram n-gram hashing (architecture.md §5.8): layout constants and per-position hash ids.

The constants (primes, offsets, multipliers, pad class) are computed once by `engram_constants`
and shipped in json; the model only reads them. `compressed_token_map` builds the class map from a
`tokenizers.Tokenizer` with the §5.8 normaliser sequence.
"""
import torch


def is_prime(n):
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    f = 3
    while f * f <= n:
        if n % f == 0:
            return False
        f += 2
    return True


def engram_primes(n_layers, max_ngram, n_heads, engram_vocab_size):
    """[layer][n-gram size - 2][head]: the next unused prime above engram_vocab_size - 1, restarted
    per n-gram size but never reused (drawn globally in order)."""
    seen, out = set(), []
    for _ in range(n_layers):
        per = []
        for _ in range(max_ngram - 1):
            cur, sizes = engram_vocab_size - 1, []
            for _ in range(n_heads):
                cur += 1
                while not is_prime(cur) or cur in seen:
                    cur += 1
                seen.add(cur)
                sizes.append(cur)
            per.append(sizes)
        out.append(per)
    return out


def engram_multipliers(layer_ids, max_ngram, compressed_vocab):
    """numpy PCG64 stream as in the release: default_rng(10007*layer).integers(0, bound, max_ngram)*2+1.
    Needs numpy once, at export time; the values are then shipped in engram_hash.json."""
    import numpy as np
    bound = max(1, (np.iinfo(np.int64).max // compressed_vocab) // 2)
    return [[int(v) * 2 + 1 for v in np.random.default_rng(10007 * l).integers(0, bound, size=(max_ngram,), dtype=np.int64)]
            for l in layer_ids]


def engram_constants(cfg, compressed_vocab, pad_class):
    primes = engram_primes(len(cfg.engram_layer_ids), cfg.engram_max_ngram_size, cfg.engram_n_heads, cfg.engram_vocab_size)
    offsets = []
    for layer in primes:
        flat = [p for per in layer for p in per]
        offsets.append([sum(flat[:i]) for i in range(len(flat))])
    return {"primes": primes, "num_embeddings": [sum(p for per in l for p in per) for l in primes],
            "multipliers": engram_multipliers(cfg.engram_layer_ids, cfg.engram_max_ngram_size, compressed_vocab),
            "offsets": offsets, "pad_class": pad_class}


def compressed_token_map(tok):
    """§5.8: decode each id alone; U+FFFD -> key = raw token string; else the normalised text
    (NFKC, NFD, StripAccents, Lowercase, whitespace runs -> ' ', lone ' ' kept, Strip); empty -> text."""
    from tokenizers import Regex, normalizers
    sentinel = "\ue000"
    norm = normalizers.Sequence([
        normalizers.NFKC(), normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase(),
        normalizers.Replace(Regex(r"[ \t\r\n]+"), " "), normalizers.Replace(Regex(r"^ $"), sentinel),
        normalizers.Strip(), normalizers.Replace(sentinel, " ")])
    keys, out = {}, []
    for t in range(tok.get_vocab_size(with_added_tokens=True)):
        text = tok.decode([t], skip_special_tokens=False)
        if "\ufffd" in text:
            key = tok.id_to_token(t)
        else:
            n = norm.normalize_str(text)
            key = n if n else text
        out.append(keys.setdefault(key, len(keys)))
    return out, len(keys)


class EngramHasher:
    """Hash ids for every position of sequences that start at position 0 (text only: no DEAD)."""

    def __init__(self, token_map, consts, max_ngram, n_heads):
        self.map = torch.tensor(token_map, dtype=torch.long)
        self.primes = torch.tensor(consts["primes"], dtype=torch.long)        # [L, n-1, H]
        self.offsets = torch.tensor(consts["offsets"], dtype=torch.long)      # [L, (n-1)*H]
        self.mult = torch.tensor(consts["multipliers"], dtype=torch.long)     # [L, n]
        self.pad = int(consts["pad_class"])
        self.max_ngram, self.n_heads = max_ngram, n_heads

    def __call__(self, ids):
        """ids [B, S] -> hash ids [B, S, n_engram_layers, (max_ngram-1)*n_heads]."""
        dev = ids.device
        c = self.map.to(dev)[ids]
        B, S = c.shape
        pos = torch.arange(S, device=dev)
        toks, blocked = [], torch.zeros(B, S, dtype=torch.bool, device=dev)
        for s in range(self.max_ngram):
            src = c[:, (pos - s).clamp_min(0)]
            blocked = blocked | (pos < s)
            toks.append(torch.where(blocked, torch.full_like(src, self.pad), src))
        prod = torch.stack(toks, -1).unsqueeze(2) * self.mult.to(dev)        # [B, S, L, n]
        h, outs = prod[..., 0], []
        for n in range(1, self.max_ngram):
            h = torch.bitwise_xor(h, prod[..., n])
            outs.append(h.unsqueeze(-1) % self.primes.to(dev)[:, n - 1])     # [B, S, L, H]
        return torch.cat(outs, -1) + self.offsets.to(dev)
