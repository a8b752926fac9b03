"""Bad parameters: ValueError from Python before any call where Python can
check (types, ranges); the engine's message otherwise."""
import pytest

from deepinfer import LLM, DeepInferError, SamplingParams


@pytest.mark.parametrize("kw, field", [
    ({"max_tokens": -1}, "max_tokens"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"max_tokens": 2.5}, "max_tokens"),
    ({"top_p": 0}, "top_p"),
    ({"top_p": 1.5}, "top_p"),
    ({"temperature": -0.1}, "temperature"),
    ({"temperature": float("nan")}, "temperature"),
    ({"temperature": "hot"}, "temperature"),
    ({"top_k": -2}, "top_k"),
    ({"min_p": 2}, "min_p"),
    ({"repetition_penalty": 0}, "repetition_penalty"),
    ({"presence_penalty": 3}, "presence_penalty"),
    ({"frequency_penalty": -2.5}, "frequency_penalty"),
    ({"min_tokens": 20, "max_tokens": 10}, "min_tokens"),
    ({"n": 0}, "n"),
    ({"seq_seed": -1}, "seq_seed"),
    ({"seq_seed": 1 << 64}, "seq_seed"),
    ({"logprobs": 21}, "logprobs"),
    ({"stop": [""]}, "stop"),
    ({"stop": ["s"] * 17}, "stop"),
    ({"stop": 5}, "stop"),
    ({"stop_token_ids": [-1]}, "stop_token_ids"),
    ({"ignore_eos": 1}, "ignore_eos"),
    ({"so_args": {"schema_type": "xml", "schema": "a"}}, "schema_type"),
    ({"so_args": {"schema_type": "regex", "schema": {"a": 1}}}, "schema"),
    ({"so_args": {"schema_type": "json", "schema": "{}", "colour": 1}}, "colour"),
])
def test_bad_sampling_params_raise_value_error_naming_the_field(kw, field):
    with pytest.raises(ValueError, match=field):
        SamplingParams(**kw)


def test_fields_changed_after_construction_are_checked_at_generate(llm):
    p = SamplingParams()
    p.max_tokens = -3
    with pytest.raises(ValueError, match="max_tokens"):
        llm.generate("x", p)


def test_edge_values_are_accepted(llm):
    p = SamplingParams(temperature=0, top_p=1, top_k=-1, min_p=1, max_tokens=1, min_tokens=1, logprobs=20,
                       seq_seed=(1 << 64) - 1, presence_penalty=-2, frequency_penalty=2, stop="s",
                       stop_token_ids=[1], ignore_eos=True, skip_special_tokens=False)
    assert len(llm.generate("x", p)[0].outputs[0].token_ids) == 1


@pytest.mark.parametrize("prompts", [None, 5, [1.5], [["a"]], [{"prompt": 1}], [{"text": "a"}], ["a\0b"], [[-1]]])
def test_bad_prompts_raise_value_error(llm, prompts):
    with pytest.raises(ValueError):
        llm.generate(prompts, SamplingParams(max_tokens=2))


def test_engine_side_request_errors_carry_the_engine_message(llm):
    with pytest.raises(DeepInferError, match=r"outside the vocabulary"):
        llm.generate([[1, 2, llm.vocab_size]], SamplingParams(max_tokens=2))
    with pytest.raises(DeepInferError, match=r"(?i)empty"):
        llm.generate([[]], SamplingParams(max_tokens=2))
    with pytest.raises(DeepInferError, match=r"reasoning_effort|effort"):
        llm.chat([{"role": "user", "content": "hi"}], SamplingParams(max_tokens=2), thinking=True,
                 reasoning_effort="enormous")
    assert isinstance(DeepInferError("x"), RuntimeError)


def test_sampling_params_count_must_match(llm):
    with pytest.raises(ValueError, match="one per prompt"):
        llm.generate(["a", "b", "c"], [SamplingParams(), SamplingParams()])


def test_bad_chat_messages(llm):
    for bad in ([], "hi", [{"role": "user", "content": object()}], [[]]):
        with pytest.raises(ValueError):
            llm.chat(bad)
    with pytest.raises(DeepInferError):
        llm.chat([{"content": "no role"}], SamplingParams(max_tokens=2))


def test_unknown_engine_key_is_a_type_error_naming_it():
    with pytest.raises(TypeError, match="max_num_sequences"):
        LLM(max_num_sequences=4)


@pytest.mark.parametrize("kw, words", [
    ({"accelerator": "tpu"}, "accelerator"),
    ({"max_num_seqs": -1}, "max_num_seqs"),
    ({"max_num_seqs": "4"}, "max_num_seqs"),
    ({"batch_invariant": 2}, "batch_invariant"),
    ({"tokenizer": 3}, "tokenizer"),
])
def test_bad_engine_values_raise_value_error(kw, words):
    with pytest.raises(ValueError, match=words):
        LLM(**kw)


def test_engine_open_errors_carry_the_engine_message(tmp_path):
    with pytest.raises(DeepInferError, match="no such directory") as err:
        LLM(model=str(tmp_path / "missing"))
    assert err.value.status == "not found"
    with pytest.raises(DeepInferError, match="max_model_len"):
        LLM(accelerator="cpu", max_model_len=(1 << 31) - 1)
    with pytest.raises(DeepInferError, match=r"max_num_seqs must be in \[1, 16384\]"):
        LLM(accelerator="cpu", max_num_seqs=100000)


def test_a_failed_request_in_a_batch_keeps_the_others_outputs(llm):
    ok = SamplingParams(temperature=0, max_tokens=4)
    with pytest.raises(DeepInferError, match=r"request 1: .*outside the vocabulary") as err:
        llm.generate(["The old man said", [10 ** 9], "In the beginning"], ok)
    outs = err.value.outputs
    assert outs[1] is None and set(err.value.errors) == {1}
    alone = llm.generate(["The old man said", "In the beginning"], ok)
    assert [o.outputs[0].text for o in (outs[0], outs[2])] == [o.outputs[0].text for o in alone]
