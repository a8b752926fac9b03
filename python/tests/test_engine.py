"""The engine's lifetime (close, context manager, garbage collection) and
engine_config keys reaching deepinfer_engine_config."""
import gc
import weakref

import pytest

from deepinfer import LLM, DeepInferError, SamplingParams


def test_close_is_idempotent_and_later_calls_fail():
    llm = LLM(accelerator="cpu", max_num_seqs=2)
    assert not llm.closed
    llm.close()
    llm.close()
    assert llm.closed
    with pytest.raises(DeepInferError, match="closed"):
        llm.generate("x", SamplingParams(max_tokens=1))


def test_context_manager_closes():
    with LLM(accelerator="cpu", max_num_seqs=2) as llm:
        assert len(llm.generate("hi", SamplingParams(max_tokens=2))[0].outputs[0].token_ids) == 2
    assert llm.closed
    with pytest.raises(ZeroDivisionError):
        with LLM(accelerator="cpu", max_num_seqs=2) as llm2:
            1 / 0
    assert llm2.closed


def test_garbage_collection_closes(monkeypatch):
    from deepinfer import llm as llm_module
    closed = []

    class Spy:  # the library with deepinfer_engine_close recorded
        def __init__(self, real):
            self.real = real

        def __getattr__(self, name):
            return getattr(self.real, name)

        def deepinfer_engine_close(self, h):
            closed.append(h.value)
            self.real.deepinfer_engine_close(h)

    monkeypatch.setattr(llm_module, "lib", Spy(llm_module.lib))
    llm = LLM(accelerator="cpu", max_num_seqs=2)
    handle = llm._handle.value
    ref = weakref.ref(llm)
    del llm
    gc.collect()
    assert ref() is None and closed == [handle]


def test_many_engines_open_and_close():
    for _ in range(5):
        with LLM(accelerator="cpu", max_num_seqs=1, max_model_len=256) as llm:
            assert llm.max_model_len == 256


def test_engine_config_reaches_the_engine():
    with LLM(accelerator="cpu", max_num_seqs=3, max_num_batched_tokens=64, chunk_size=16, max_model_len=512,
             seed=5, batch_invariant=True, async_scheduling=None, page_rows=32) as llm:
        assert llm.max_model_len == 512
        plan = llm.plan
        assert (plan["num_slots"], plan["max_num_batched_tokens"], plan["chunk_size"]) == (3, 64, 16)
        assert plan["page_rows_kv"] == 32 and plan["batch_invariant"] == 1 and plan["accelerator"] == "cpu"
        assert "3 sequences" in llm.plan_text
        # an engine seed gives unseeded requests reproducible seeds
        a = llm.generate("The old man said", SamplingParams(max_tokens=8))[0].outputs[0].text
    with LLM(accelerator="cpu", seed=5) as llm:
        b = llm.generate("The old man said", SamplingParams(max_tokens=8))[0].outputs[0].text
    assert a == b


def test_ep_dp_reach_the_engine_and_match_one_rank():
    """ep / dp / eplb_* are engine_config keys (deepinfer_engine_config's fields): --ep 2 --dp 2 with
    EPLB gives one rank's tokens and logprobs; a layout the engine refuses raises its message."""
    prompts = ["The quick brown fox", "Once upon a time", "1 2 3 4"]
    sp = SamplingParams(max_tokens=4, temperature=0.8, top_p=0.95, seq_seed=3, logprobs=1)
    with LLM(accelerator="cpu", max_num_seqs=4) as one:
        ref = one.generate(prompts, sp)
    with LLM(accelerator="cpu", max_num_seqs=4, ep=2, dp=2, eplb_replicas=1, eplb_interval=1) as par:
        got = par.generate(prompts, sp)
    for a, b in zip(ref, got):
        assert a.outputs[0].token_ids == b.outputs[0].token_ids
        assert a.outputs[0].logprobs == b.outputs[0].logprobs
    with pytest.raises(DeepInferError, match="--ep must equal --dp"):
        LLM(accelerator="cpu", ep=4, dp=2)
