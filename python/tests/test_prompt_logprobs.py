"""SamplingParams(prompt_logprobs=K): RequestOutput.prompt_logprobs shaped like vLLM's (None for the
first prompt token, then {token_id: Logprob} with the prompt token and the top K), consistent with
the generated tokens' logprobs and the same for every choice."""
import math

import pytest

from deepinfer import Logprob, SamplingParams


def test_prompt_logprobs_shape_and_values(llm):
    text = "The capital of France is"
    o = llm.generate(text, SamplingParams(temperature=0, max_tokens=1, prompt_logprobs=3, logprobs=3))[0]
    ids = o.prompt_token_ids
    plp = o.prompt_logprobs
    assert len(plp) == len(ids) and plp[0] is None
    for t in range(1, len(ids)):
        d = plp[t]
        assert ids[t] in d and all(isinstance(v, Logprob) for v in d.values())
        ranked = [(tid, v) for tid, v in d.items() if v.rank is not None]
        assert [v.rank for _, v in ranked] == [1, 2, 3]
        lps = [v.logprob for _, v in ranked]
        assert lps == sorted(lps, reverse=True) and all(x <= 0 and math.isfinite(x) for x in lps)
        assert d[ids[t]].logprob <= lps[0]
    # the prompt extended by the greedy token: its last prompt logprob is that token's logprob
    tok = o.outputs[0].token_ids[0]
    o2 = llm.generate([ids + [tok]], SamplingParams(temperature=0, max_tokens=1, prompt_logprobs=0))[0]
    assert o2.prompt_logprobs[-1][tok].logprob == o.outputs[0].logprobs[0][tok].logprob
    assert all(o2.prompt_logprobs[t][ids[t]].logprob == plp[t][ids[t]].logprob for t in range(1, len(ids)))


def test_prompt_logprobs_off_by_default_and_validated(llm):
    assert llm.generate("hi", SamplingParams(max_tokens=1))[0].prompt_logprobs is None
    with pytest.raises(ValueError, match="prompt_logprobs"):
        SamplingParams(prompt_logprobs=21)
    o = llm.generate("one two three", SamplingParams(max_tokens=2, n=2, seq_seed=1, prompt_logprobs=0))[0]
    assert len(o.outputs) == 2 and len(o.prompt_logprobs) == len(o.prompt_token_ids)
