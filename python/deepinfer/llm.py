"""LLM: an engine (deepinfer_engine) with vLLM's offline API, generate() and
chat(), over deepinfer_generate (every prompt of a call batched together)."""
import ctypes as C
import json
import threading

from . import _structs as S
from ._lib import lib
from .outputs import from_c
from .sampling_params import SamplingParams, _is_int

ACCELERATORS = ("auto", "cpu", "cuda")

# engine_config keys: the deepinfer_engine_config fields LLM() takes as keywords
# (model and accelerator are LLM's own arguments). Kind: "str", "int" (>= 0 is
# checked by the engine), "u64", "tri" (None = the default, else a bool or -1/0/1), or "count" (None = the
# default, else an integer >= 0).
ENGINE_KEYS = {
    "tokenizer": "str",
    "memory_budget": "u64",
    "max_num_batched_tokens": "int",
    "max_num_seqs": "int",
    "chunk_size": "int",
    "batch_invariant": "tri",
    "max_model_len": "int",
    "page_rows": "int",
    "num_pages": "int",
    "async_scheduling": "tri",
    "max_draft_tokens": "int",
    "seed": "u64",
    "engram_hash": "str",
    "cuda_graphs": "tri",
    "yoco_compact": "int",      # V4.1 compact prefill (bounded replay), 0/1
    "yoco_keep_tokens": "int",  # its tail length; 0 = the model's default (140)
    "mtp_varlen": "tri",        # speculative decoding with confidence-scheduled verification, 0/1
    "nextn_decode": "count",    # the longest draft; 0 = no speculation; None = the default
    "ep": "int",                # expert-parallel ranks; 0 = 1
    "dp": "int",                # attention data-parallel ranks; 0 = 1 (dp > 1 needs ep == dp)
    "eplb_replicas": "int",     # EPLB replica slots per rank; 0 = off
    "eplb_interval": "int",     # engine steps between EPLB rebalances; 0 = 32
    "cp_min_tokens": "int",     # context-parallel prefill of chunks >= this many tokens (dp > 1); 0 = off
}


class DeepInferError(RuntimeError):
    """A failure reported by the engine; str() is the engine's message.
    .status is the deepinfer_status name ("invalid argument", ...). When
    requests of a batch failed, .outputs holds every request's result in
    order (None for a failed one), so finished work is never lost, and
    .errors maps the failed indices to their messages."""

    def __init__(self, message, status=None, outputs=None, errors=None):
        super().__init__(message)
        self.status = status
        self.outputs = outputs
        self.errors = errors or {}


def _status_name(st):
    name = lib.deepinfer_status_name(st)
    return name.decode() if name else S.STATUS_NAMES.get(st, str(st))


def _finish_name(r):
    return lib.deepinfer_finish_reason_name(r).decode()


def _cstr(name, v, keep):
    if not isinstance(v, str):
        raise ValueError(f"{name} must be a string, got {v!r}")
    if "\0" in v:
        raise ValueError(f"{name} must not contain a NUL character")
    b = v.encode()
    keep.append(b)
    return b


def _engine_config(model, accelerator, kw, keep):
    for key in kw:
        if key not in ENGINE_KEYS:
            raise TypeError(f"LLM() got an unknown engine_config key {key!r} (known: {', '.join(ENGINE_KEYS)})")
    if accelerator not in ACCELERATORS:
        raise ValueError(f"accelerator must be one of {', '.join(ACCELERATORS)}, got {accelerator!r}")
    cfg = S.EngineConfigC()
    lib.deepinfer_engine_config_init(C.byref(cfg))
    if model is not None:
        cfg.model = _cstr("model", str(model) if hasattr(model, "__fspath__") else model, keep)
    cfg.accelerator = _cstr("accelerator", accelerator, keep)
    for key, v in kw.items():
        kind = ENGINE_KEYS[key]
        if kind == "str":
            if v is not None:
                setattr(cfg, key, _cstr(key, str(v) if hasattr(v, "__fspath__") else v, keep))
        elif kind == "count":
            if v is None:
                v = -1
            if isinstance(v, bool) or not _is_int(v) or not -1 <= v < 1 << 31:
                raise ValueError(f"{key} must be an integer >= 0, or None (the default), got {v!r}")
            setattr(cfg, key, v)
        elif kind == "tri":
            if v is None:
                v = -1
            if not (isinstance(v, bool) or (_is_int(v) and v in (-1, 0, 1))):
                raise ValueError(f"{key} must be a bool, -1 (default) or None, got {v!r}")
            setattr(cfg, key, int(v))
        else:
            limit = 1 << 64 if kind == "u64" else 1 << 31
            if not _is_int(v) or not 0 <= v < limit:
                raise ValueError(f"{key} must be an integer >= 0 (0 = the default), got {v!r}")
            setattr(cfg, key, v)
    return cfg


def _token_ids(name, ids, keep):
    if not all(_is_int(t) for t in ids):
        raise ValueError(f"{name} must be a list of integer token ids")
    if any(not 0 <= t < 1 << 31 for t in ids):
        raise ValueError(f"{name} holds a negative or too large token id")
    arr = (C.c_int32 * max(len(ids), 1))(*ids)
    keep.append(arr)
    return C.cast(arr, C.POINTER(C.c_int32)), len(ids)


def _text_or_ids_prompt(p, i, keep):
    """One generate() prompt as (PromptC, the prompt text or None)."""
    c = S.PromptC()
    if isinstance(p, dict):
        unknown = set(p) - {"prompt", "prompt_token_ids"}
        if unknown or len(p) != 1:
            raise ValueError(f"prompts[{i}]: a dict prompt has exactly one key, 'prompt' or 'prompt_token_ids', "
                             f"got {sorted(p)}")
        if "prompt" in p:
            p = p["prompt"]
            if not isinstance(p, str):
                raise ValueError(f"prompts[{i}]['prompt'] must be a string")
        else:
            p = p["prompt_token_ids"]
            if not isinstance(p, (list, tuple)):
                raise ValueError(f"prompts[{i}]['prompt_token_ids'] must be a list of token ids")
    if isinstance(p, str):
        c.text = _cstr(f"prompts[{i}]", p, keep)
        return c, p
    if isinstance(p, (list, tuple)):
        c.token_ids, c.n_token_ids = _token_ids(f"prompts[{i}]", p, keep)
        return c, None
    raise ValueError(f"prompts[{i}] must be a string, a list of token ids or a dict, got {type(p).__name__}")


class LLM:
    """An engine on one model.

    LLM(model=None, accelerator="auto", **engine_config): model is a directory
    with config.json or ORG/NAME[@REV] in the Hugging Face cache; None picks
    what `deepinfer generate` picks without --model ($DEEPINFER_HF_MODEL_DIR,
    else the embedded demo model models/deepinfer-demo-v41). engine_config
    keys are deepinfer_engine_config's fields (ENGINE_KEYS). Close it with
    close(), a `with` block, or let it be garbage collected.
    """

    def __init__(self, model=None, accelerator="auto", **engine_config):
        self._handle = None
        self._lock = threading.Lock()
        keep = []
        cfg = _engine_config(model, accelerator, engine_config, keep)
        handle = C.c_void_p()
        err = C.create_string_buffer(4096)
        st = lib.deepinfer_engine_open(C.byref(cfg), C.byref(handle), err, len(err))
        if st != S.OK or not handle.value:
            raise DeepInferError(err.value.decode("utf-8", errors="replace") or _status_name(st), _status_name(st))
        self._handle = handle
        plan = S.MemoryPlanC()
        lib.deepinfer_engine_plan(handle, C.byref(plan))
        # the memory plan and resolved configuration (deepinfer_memory_plan) as a dict
        self.plan = {name: (getattr(plan, name).decode() if isinstance(getattr(plan, name), bytes)
                            else getattr(plan, name)) for name, _ in S.MemoryPlanC._fields_}
        self.model_dir = plan.model_dir.decode()
        self.arch = plan.arch.decode()
        self.accelerator = plan.accelerator.decode()
        self.max_model_len = plan.max_model_len
        self.vocab_size = lib.deepinfer_engine_vocab_size(handle)
        self.plan_text = lib.deepinfer_engine_plan_text(handle).decode()

    # ---- lifetime -------------------------------------------------------------
    def close(self):
        """Release the engine; safe to call twice."""
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            lib.deepinfer_engine_close(handle)

    @property
    def closed(self):
        return self._handle is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone already
            pass

    # ---- requests ---------------------------------------------------------------
    def _params(self, sampling_params, n):
        if sampling_params is None:
            return [SamplingParams()]
        if isinstance(sampling_params, SamplingParams):
            return [sampling_params]
        if isinstance(sampling_params, (list, tuple)) and all(isinstance(p, SamplingParams) for p in sampling_params):
            if len(sampling_params) != n:
                raise ValueError(f"{len(sampling_params)} sampling params for {n} prompts: give one, or one per prompt")
            return list(sampling_params)
        raise ValueError("sampling_params must be a SamplingParams, a list of them, or None")

    def _run(self, prompts_c, texts, params, keep):
        n = len(prompts_c)
        if n == 0:
            return []
        params_c = (S.SamplingParamsC * len(params))(*[p.to_c(keep) for p in params])
        arr = (S.PromptC * n)(*prompts_c)
        outs = C.POINTER(C.POINTER(S.RequestOutputC))()
        with self._lock:
            if self._handle is None:
                raise DeepInferError("the engine is closed", "invalid argument")
            st = lib.deepinfer_generate(self._handle, arr, n, params_c, len(params), C.byref(outs))
            if st != S.OK:
                msg = lib.deepinfer_engine_last_error(self._handle).decode("utf-8", errors="replace")
                raise DeepInferError(msg or _status_name(st), _status_name(st))
        try:
            results, errors, first = [], {}, None
            for i in range(n):
                o = outs[i].contents
                if o.status != S.OK:
                    msg = (o.error or b"").decode("utf-8", errors="replace") or _status_name(o.status)
                    errors[i] = msg
                    first = first or (i, msg, _status_name(o.status))
                    results.append(None)
                    continue
                results.append(from_c(o, texts[i], _finish_name))
        finally:
            lib.deepinfer_outputs_free(outs, n)
        if first:  # the others finished: they travel with the exception
            i, msg, status = first
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            raise DeepInferError((f"request {i}: {msg}" if n > 1 else msg) + more, status, results, errors)
        return results

    def generate(self, prompts, sampling_params=None):
        """Complete prompts: a string, a list of strings, a list of token ids,
        a list of token-id lists, or dicts {"prompt": str} / {"prompt_token_ids": [...]}.
        Returns one RequestOutput per prompt, in order."""
        if isinstance(prompts, (str, dict)):
            prompts = [prompts]
        elif isinstance(prompts, (list, tuple)) and prompts and all(_is_int(t) for t in prompts):
            prompts = [list(prompts)]  # one prompt of token ids
        elif not isinstance(prompts, (list, tuple)):
            raise ValueError(f"prompts must be a string, a list or a dict, got {type(prompts).__name__}")
        keep = []
        built = [_text_or_ids_prompt(p, i, keep) for i, p in enumerate(prompts)]
        params = self._params(sampling_params, len(built))
        return self._run([b[0] for b in built], [b[1] for b in built], params, keep)

    def chat(self, messages, sampling_params=None, thinking=False, reasoning_effort=None, tools=None):
        """Chat completions: messages is one conversation (a list of
        {"role", "content", ...} dicts) or a list of conversations, rendered
        with the model's chat encoding; thinking selects V4.1's thinking mode,
        reasoning_effort "low" | "high" | "max" | 1..100, tools a list of
        OpenAI-style tool definitions. Returns one RequestOutput per conversation."""
        if not isinstance(messages, (list, tuple)) or not messages:
            raise ValueError("messages must be a non-empty list of message dicts (or a list of such lists)")
        convs = [messages] if isinstance(messages[0], dict) else list(messages)
        for i, conv in enumerate(convs):
            if not isinstance(conv, (list, tuple)) or not conv or not all(isinstance(m, dict) for m in conv):
                raise ValueError(f"messages[{i}] must be a non-empty list of message dicts")
        if not isinstance(thinking, bool):
            raise ValueError(f"thinking must be a bool, got {thinking!r}")
        if tools is not None and not isinstance(tools, (list, tuple)):
            raise ValueError(f"tools must be a list of tool definitions, got {tools!r}")
        if reasoning_effort is not None and not (isinstance(reasoning_effort, str) or _is_int(reasoning_effort)):
            raise ValueError(f"reasoning_effort must be a string or an integer, got {reasoning_effort!r}")
        keep = []
        effort = _cstr("reasoning_effort", str(reasoning_effort), keep) if reasoning_effort is not None else None
        prompts_c = []
        for i, conv in enumerate(convs):
            doc = {"messages": list(conv), "tools": list(tools)} if tools else list(conv)
            try:
                text = json.dumps(doc, ensure_ascii=False)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"messages[{i}] is not JSON-serialisable: {exc}") from exc
            c = S.PromptC()
            c.messages = _cstr(f"messages[{i}]", text, keep)
            c.thinking = int(thinking)
            c.reasoning_effort = effort
            prompts_c.append(c)
        params = self._params(sampling_params, len(prompts_c))
        return self._run(prompts_c, [None] * len(prompts_c), params, keep)
