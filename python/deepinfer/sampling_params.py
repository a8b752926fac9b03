"""SamplingParams: vLLM's / DeepInfer's per-request sampling parameters.

Python checks types and the ranges include/deepinfer.h documents before any
call (ValueError naming the field); what only the engine can judge (a schema
that does not compile, a seed's effect) comes back as DeepInferError with
the engine's message. to_c() fills a deepinfer_sampling_params.
"""
import ctypes as C
import json
import math

from . import _structs as S

SO_SCHEMA_TYPES = ("json", "regex", "ebnf")
# so_args keys beyond schema_type/schema, as the CLI's JSONL so_args takes them (src/structured/so_args.h)
SO_OPTIONS = ("whitespace_max", "lenient", "start_after_think")
_U64 = 1 << 64


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _num(name, v):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"{name} must be a number, got {v!r}")
    v = float(v)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be a finite number, got {v!r}")
    return v


def _int(name, v):
    if not _is_int(v):
        raise ValueError(f"{name} must be an integer, got {v!r}")
    return v


class SamplingParams:
    """Sampling parameters of one request (all its n choices)."""

    def __init__(self, temperature=1.0, top_p=1.0, top_k=0, min_p=0.0, max_tokens=16, min_tokens=0, n=1,
                 stop=None, stop_token_ids=None, seq_seed=None, logprobs=None, presence_penalty=0.0,
                 frequency_penalty=0.0, repetition_penalty=1.0, ignore_eos=False, skip_special_tokens=True,
                 so_args=None, prompt_logprobs=None):
        self.temperature = temperature
        self.top_p = top_p
        self.top_k = top_k
        self.min_p = min_p
        self.max_tokens = max_tokens
        self.min_tokens = min_tokens
        self.n = n
        self.stop = stop
        self.stop_token_ids = stop_token_ids
        self.seq_seed = seq_seed
        self.logprobs = logprobs
        self.presence_penalty = presence_penalty
        self.frequency_penalty = frequency_penalty
        self.repetition_penalty = repetition_penalty
        self.ignore_eos = ignore_eos
        self.skip_special_tokens = skip_special_tokens
        self.so_args = so_args
        self.prompt_logprobs = prompt_logprobs
        self.verify()

    def __repr__(self):
        return "SamplingParams(" + ", ".join(f"{k}={v!r}" for k, v in vars(self).items()) + ")"

    def _stops(self):
        stop = self.stop
        if stop is None:
            return []
        if isinstance(stop, str):
            stop = [stop]
        if not isinstance(stop, (list, tuple)) or not all(isinstance(s, str) for s in stop):
            raise ValueError(f"stop must be a string or a list of strings, got {self.stop!r}")
        if len(stop) > S.MAX_STOP_STRINGS:
            raise ValueError(f"stop: at most {S.MAX_STOP_STRINGS} stop strings are allowed, got {len(stop)}")
        for i, s in enumerate(stop):
            if not s:
                raise ValueError(f"stop[{i}] must be a non-empty string")
            if "\0" in s:
                raise ValueError(f"stop[{i}] must not contain a NUL character")
        return list(stop)

    def _stop_ids(self):
        ids = self.stop_token_ids
        if ids is None:
            return []
        if not isinstance(ids, (list, tuple)) or not all(_is_int(i) for i in ids):
            raise ValueError(f"stop_token_ids must be a list of integers, got {ids!r}")
        if len(ids) > S.MAX_STOP_IDS:
            raise ValueError(f"stop_token_ids: at most {S.MAX_STOP_IDS} ids are allowed, got {len(ids)}")
        if any(i < 0 or i >= 1 << 31 for i in ids):
            raise ValueError(f"stop_token_ids must be token ids >= 0, got {ids!r}")
        return list(ids)

    def _so(self):
        """so_args as (schema_type, schema text, options) or None."""
        so = self.so_args
        if so is None:
            return None
        if not isinstance(so, dict):
            raise ValueError(f"so_args must be a dict {{'schema_type': ..., 'schema': ...}}, got {so!r}")
        for k in so:
            if k not in ("schema_type", "schema") + SO_OPTIONS:
                raise ValueError(f"so_args: unknown key {k!r} (known: schema_type, schema, {', '.join(SO_OPTIONS)})")
        kind = so.get("schema_type")
        if kind not in SO_SCHEMA_TYPES:
            raise ValueError(f"so_args['schema_type'] must be one of {', '.join(SO_SCHEMA_TYPES)}, got {kind!r}")
        schema = so.get("schema")
        if isinstance(schema, (dict, list, bool)) and kind == "json":
            schema = json.dumps(schema)
        if not isinstance(schema, str):
            raise ValueError(f"so_args['schema'] must be a string{' or a dict' if kind == 'json' else ''}, "
                             f"got {schema!r}")
        if "\0" in schema:
            raise ValueError("so_args['schema'] must not contain a NUL character")
        ws = so.get("whitespace_max", -1)
        if not _is_int(ws) or ws < -1:
            raise ValueError(f"so_args['whitespace_max'] must be an integer >= 0, got {ws!r}")
        for k in ("lenient", "start_after_think"):
            if not isinstance(so.get(k, False), bool):
                raise ValueError(f"so_args[{k!r}] must be a bool, got {so[k]!r}")
        return kind, schema, ws, bool(so.get("lenient")), bool(so.get("start_after_think"))

    def verify(self):
        """Check every field; ValueError names the first bad one."""
        t = _num("temperature", self.temperature)
        if t < 0:
            raise ValueError(f"temperature must be >= 0, got {t}")
        p = _num("top_p", self.top_p)
        if not 0 < p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {p}")
        if _int("top_k", self.top_k) < -1:
            raise ValueError(f"top_k must be -1, 0 (disabled) or positive, got {self.top_k}")
        if not 0 <= _num("min_p", self.min_p) <= 1:
            raise ValueError(f"min_p must be in [0, 1], got {self.min_p}")
        if _num("repetition_penalty", self.repetition_penalty) <= 0:
            raise ValueError(f"repetition_penalty must be > 0, got {self.repetition_penalty}")
        for name in ("presence_penalty", "frequency_penalty"):
            if not -2 <= _num(name, getattr(self, name)) <= 2:
                raise ValueError(f"{name} must be in [-2, 2], got {getattr(self, name)}")
        if not 1 <= _int("max_tokens", self.max_tokens) < 1 << 31:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if not 0 <= _int("min_tokens", self.min_tokens) <= self.max_tokens:
            raise ValueError(f"min_tokens must be in [0, max_tokens={self.max_tokens}], got {self.min_tokens}")
        if not 1 <= _int("n", self.n) <= 1024:
            raise ValueError(f"n must be in [1, 1024], got {self.n}")
        if self.seq_seed is not None and not 0 <= _int("seq_seed", self.seq_seed) < _U64:
            raise ValueError(f"seq_seed must be in [0, 2^64), got {self.seq_seed}")
        if self.logprobs is not None and not 0 <= _int("logprobs", self.logprobs) <= S.MAX_LOGPROBS:
            raise ValueError(f"logprobs must be in [0, {S.MAX_LOGPROBS}] or None, got {self.logprobs}")
        if self.prompt_logprobs is not None and not 0 <= _int("prompt_logprobs", self.prompt_logprobs) <= S.MAX_LOGPROBS:
            raise ValueError(f"prompt_logprobs must be in [0, {S.MAX_LOGPROBS}] or None, got {self.prompt_logprobs}")
        for name in ("ignore_eos", "skip_special_tokens"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool, got {getattr(self, name)!r}")
        self._stops()
        self._stop_ids()
        self._so()

    def to_c(self, keep):
        """A deepinfer_sampling_params for these values; the byte strings it
        borrows are appended to `keep`, which must outlive the call."""
        self.verify()
        from ._lib import lib
        c = S.SamplingParamsC()
        lib.deepinfer_sampling_params_init(C.byref(c))
        c.temperature = self.temperature
        c.top_p = self.top_p
        c.top_k = self.top_k
        c.min_p = self.min_p
        c.repetition_penalty = self.repetition_penalty
        c.presence_penalty = self.presence_penalty
        c.frequency_penalty = self.frequency_penalty
        c.max_tokens = self.max_tokens
        c.min_tokens = self.min_tokens
        c.n = self.n
        c.ignore_eos = int(self.ignore_eos)
        c.skip_special_tokens = int(self.skip_special_tokens)
        if self.seq_seed is not None:
            c.has_seed, c.seed = 1, self.seq_seed
        c.logprobs = -1 if self.logprobs is None else self.logprobs
        c.prompt_logprobs = -1 if self.prompt_logprobs is None else self.prompt_logprobs
        stops = [s.encode() for s in self._stops()]
        keep.extend(stops)
        for i, s in enumerate(stops):
            c.stop[i] = s
        c.n_stop = len(stops)
        ids = self._stop_ids()
        for i, t in enumerate(ids):
            c.stop_ids[i] = t
        c.n_stop_ids = len(ids)
        so = self._so()
        if so:
            kind, schema, ws, lenient, after_think = so
            kb, sb = kind.encode(), schema.encode()
            keep.extend((kb, sb))
            c.so_schema_type, c.so_schema = kb, sb
            c.so_whitespace_max, c.so_lenient, c.so_after_think = ws, int(lenient), int(after_think)
        return c
