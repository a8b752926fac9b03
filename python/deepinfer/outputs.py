"""Output classes shaped like vLLM's (RequestOutput, CompletionOutput,
Logprob, RequestMetrics), copied out of the engine's deepinfer_request_output."""
import ctypes as C
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from . import _structs as S


@dataclass
class Logprob:
    """One candidate token's log-probability; rank is 1-based among the top
    candidates, None for a sampled token outside them."""
    logprob: float
    rank: Optional[int] = None
    decoded_token: Optional[str] = None


@dataclass
class RequestMetrics:
    """Per-request metrics; times are seconds on the engine's monotonic clock."""
    arrival_time: float
    first_scheduled_time: float
    first_token_time: float
    finished_time: float
    time_to_first_token: float
    time_per_output_token: float
    e2e_time: float
    prompt_tokens: int
    output_tokens: int
    computed_tokens: int
    num_preemptions: int
    spec_drafted: int = 0              # draft tokens verified (speculative decoding)
    spec_accepted: int = 0             # of those, accepted


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: List[int]
    finish_reason: Optional[str]       # "stop" (EOS, a stop string or id), "length", "abort", "error"
    stop_reason: object = None          # the stop string or stop token id that ended it, else None
    logprobs: Optional[List[Dict[int, Logprob]]] = None  # per token: {token_id: Logprob}, when requested
    cumulative_logprob: Optional[float] = None
    num_preemptions: int = 0

    def finished(self):
        return self.finish_reason is not None


@dataclass
class RequestOutput:
    request_id: str
    prompt: Optional[str]
    prompt_token_ids: List[int]
    outputs: List[CompletionOutput]
    finished: bool = True
    metrics: Optional[RequestMetrics] = None
    # with SamplingParams(prompt_logprobs=K): per prompt token, None for the first (no context), then
    # {token_id: Logprob} with the prompt token and the top K of that position (vLLM's shape)
    prompt_logprobs: Optional[List[Optional[Dict[int, Logprob]]]] = field(default=None)


def _completion(c, finish_name):
    n = c.n_tokens
    ids = c.token_ids[:n] if n else []
    text = C.string_at(c.text, c.text_len).decode("utf-8", errors="replace") if c.text else ""
    reason = finish_name(c.finish_reason) if c.finish_reason != S.FINISH_NONE else None
    if reason == "eos":  # vLLM's names: end of sequence is "stop" with no stop_reason
        reason = "stop"
    if c.stop_str is not None:
        stop_reason = c.stop_str.decode("utf-8", errors="replace")
    elif c.finish_reason == S.FINISH_STOP and c.stop_token >= 0:
        stop_reason = c.stop_token
    else:
        stop_reason = None
    out = CompletionOutput(index=c.index, text=text, token_ids=list(ids), finish_reason=reason,
                           stop_reason=stop_reason, num_preemptions=c.num_preemptions)
    if c.logprobs:
        k = c.n_top
        lps = c.logprobs[:n] if n else []
        tids = c.top_ids[:n * k] if n and k else []
        tlps = c.top_logprobs[:n * k] if n and k else []
        per_token = []
        for t in range(n):
            top = {tids[t * k + j]: Logprob(tlps[t * k + j], rank=j + 1) for j in range(k)}
            if ids[t] not in top:
                top = {ids[t]: Logprob(lps[t])} | top
            per_token.append(top)
        out.logprobs = per_token
        out.cumulative_logprob = float(sum(lps))
    return out


def _prompt_logprobs(o):
    if not o.prompt_logprobs:
        return None
    n, k = o.n_prompt, o.n_prompt_top
    ids = o.prompt_ids[:n] if n else []
    lps = o.prompt_logprobs[:n] if n else []
    tids = o.prompt_top_ids[:n * k] if n and k else []
    tlps = o.prompt_top_logprobs[:n * k] if n and k else []
    out = [None] if n else []
    for t in range(1, n):
        top = {tids[t * k + j]: Logprob(tlps[t * k + j], rank=j + 1) for j in range(k)}
        if ids[t] not in top:
            top = {ids[t]: Logprob(lps[t])} | top
        out.append(top)
    return out


def from_c(o, prompt_text, finish_name):
    """A RequestOutput from a deepinfer_request_output (must have status OK)."""
    m = o.metrics
    metrics = RequestMetrics(m.arrival_s, m.first_scheduled_s, m.first_token_s, m.finished_s, m.ttft_s, m.tpot_s,
                             m.e2e_s, m.prompt_tokens, m.output_tokens, m.computed_tokens, m.num_preemptions,
                             m.spec_drafted, m.spec_accepted)
    choices = [_completion(o.choices[i], finish_name) for i in range(o.n_choices)]
    return RequestOutput(request_id=str(o.request_id), prompt=prompt_text,
                         prompt_token_ids=list(o.prompt_ids[:o.n_prompt]) if o.n_prompt else [],
                         outputs=choices, finished=bool(o.finished), metrics=metrics,
                         prompt_logprobs=_prompt_logprobs(o))
