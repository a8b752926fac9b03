"""generate(): prompt forms, n > 1, seeds, the CLI's greedy output, stop
strings and ids, logprobs, metrics."""
import math

from conftest import DEMO, cli_generate
from deepinfer import CompletionOutput, RequestOutput, SamplingParams

GREEDY = SamplingParams(temperature=0, max_tokens=8)


def test_text_prompt_gives_a_vllm_shaped_output(llm):
    outs = llm.generate("Hello, my name is", GREEDY)
    assert len(outs) == 1 and isinstance(outs[0], RequestOutput)
    o = outs[0]
    assert o.prompt == "Hello, my name is" and o.finished and o.request_id.isdigit()
    assert o.prompt_token_ids[0] == 0  # the BOS token the engine puts in front of text
    assert len(o.outputs) == 1 and isinstance(o.outputs[0], CompletionOutput)
    c = o.outputs[0]
    assert c.index == 0 and len(c.token_ids) == 8 and c.text and c.finish_reason == "length"
    assert c.stop_reason is None and c.logprobs is None
    assert o.metrics.prompt_tokens == len(o.prompt_token_ids) and o.metrics.output_tokens == 8
    assert o.metrics.e2e_time >= o.metrics.time_to_first_token >= 0


def test_token_id_prompts_match_the_text_prompt(llm):
    text = llm.generate("The capital of France is", GREEDY)[0]
    ids = text.prompt_token_ids
    by_list = llm.generate([ids], GREEDY)[0]
    by_flat = llm.generate(ids, GREEDY)[0]
    by_dict = llm.generate({"prompt_token_ids": ids}, GREEDY)[0]
    for o in (by_list, by_flat, by_dict):
        assert o.prompt is None and o.prompt_token_ids == ids
        assert o.outputs[0].token_ids == text.outputs[0].token_ids
        assert o.outputs[0].text == text.outputs[0].text
    assert llm.generate({"prompt": "The capital of France is"}, GREEDY)[0].outputs[0].text == text.outputs[0].text


def test_prompts_keep_their_order_and_per_prompt_params(llm):
    prompts = ["one", "two", "three"]
    params = [SamplingParams(temperature=0, max_tokens=k) for k in (2, 3, 4)]
    outs = llm.generate(prompts, params)
    assert [o.prompt for o in outs] == prompts
    assert [len(o.outputs[0].token_ids) for o in outs] == [2, 3, 4]
    alone = llm.generate("two", params[1])[0]
    assert alone.outputs[0].token_ids == outs[1].outputs[0].token_ids
    assert llm.generate([], GREEDY) == []


def test_n_gives_independent_choices(llm):
    o = llm.generate("It was a dark and stormy night", SamplingParams(n=3, max_tokens=10, seq_seed=4))[0]
    assert [c.index for c in o.outputs] == [0, 1, 2]
    assert all(len(c.token_ids) == 10 for c in o.outputs)
    assert len({tuple(c.token_ids) for c in o.outputs}) > 1
    assert o.metrics.output_tokens == 30


def test_same_seed_same_text_other_seed_other_text(llm):
    def run(seed):
        p = SamplingParams(temperature=1.0, max_tokens=16, seq_seed=seed)
        return llm.generate("The old man said", p)[0].outputs[0].text
    assert run(7) == run(7)
    assert run(7) != run(8)
    # a seeded request is a function of its own prompt and seed, not of the batch around it
    batch = llm.generate(["The old man said", "other"], SamplingParams(max_tokens=16, seq_seed=7))
    assert batch[0].outputs[0].text == run(7)


def test_greedy_equals_the_cli(llm):
    for prompt in ("Hello, my name is", "The future of AI is"):
        ours = llm.generate(prompt, SamplingParams(temperature=0, max_tokens=12))[0].outputs[0]
        (line,) = cli_generate("--prompt", prompt, "--temperature", "0", "--max-tokens", "12")
        theirs = line["outputs"][0]
        assert ours.text == theirs["text"] and ours.token_ids == theirs["token_ids"]
        assert ours.finish_reason == theirs["finish_reason"]


def test_seeded_sampling_equals_the_cli(llm):
    p = SamplingParams(temperature=0.8, top_p=0.95, top_k=50, max_tokens=12, seq_seed=5, n=2)
    ours = llm.generate("The old man said", p)[0]
    (line,) = cli_generate("--prompt", "The old man said", "--temperature", "0.8", "--top-p", "0.95", "--top-k", "50",
                           "--max-tokens", "12", "--seed", "5", "--n", "2")
    assert [c.text for c in ours.outputs] == [c["text"] for c in line["outputs"]]


def test_stop_string_and_stop_token(llm):
    free = llm.generate("Hello, my name is", SamplingParams(temperature=0, max_tokens=12))[0].outputs[0]
    # stop at the third generated token's id
    stop_id = free.token_ids[2]
    o = llm.generate("Hello, my name is", SamplingParams(temperature=0, max_tokens=12, stop_token_ids=[stop_id]))
    c = o[0].outputs[0]
    assert c.finish_reason == "stop" and c.stop_reason == stop_id and c.token_ids == free.token_ids[:3]
    word = free.text.split()[1]
    c = llm.generate("Hello, my name is", SamplingParams(temperature=0, max_tokens=12, stop=[word]))[0].outputs[0]
    assert c.finish_reason == "stop" and c.stop_reason == word and word not in c.text
    assert free.text.startswith(c.text)


def test_logprobs_shape(llm):
    k = 3
    c = llm.generate("The old man said", SamplingParams(max_tokens=6, seq_seed=1, logprobs=k))[0].outputs[0]
    assert len(c.logprobs) == len(c.token_ids) == 6
    total = 0.0
    for tok, entry in zip(c.token_ids, c.logprobs):
        assert tok in entry and len(entry) in (k, k + 1)
        ranked = sorted((lp.rank, lp.logprob) for lp in entry.values() if lp.rank is not None)
        assert [r for r, _ in ranked] == [1, 2, 3]
        assert all(a >= b for (_, a), (_, b) in zip(ranked, ranked[1:]))  # by logprob, descending
        assert all(lp.logprob <= 0 and math.isfinite(lp.logprob) for lp in entry.values())
        total += entry[tok].logprob
    assert math.isclose(c.cumulative_logprob, total, rel_tol=1e-5)
    # logprobs=0: the sampled token's logprob only
    c0 = llm.generate("The old man said", SamplingParams(max_tokens=6, seq_seed=1, logprobs=0))[0].outputs[0]
    assert c0.token_ids == c.token_ids
    assert [list(e) for e in c0.logprobs] == [[t] for t in c.token_ids]
    assert [e[t].logprob for e, t in zip(c0.logprobs, c0.token_ids)] == [e[t].logprob for e, t in
                                                                         zip(c.logprobs, c.token_ids)]


def test_the_default_model_is_the_demo_model(llm):
    import os
    assert os.path.realpath(llm.model_dir) == os.path.realpath(DEMO)
    assert llm.arch == "deepseek_v41" and llm.accelerator == "cpu" and llm.vocab_size > 0
