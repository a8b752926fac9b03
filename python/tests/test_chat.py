"""chat(): messages rendered with the model's chat encoding, thinking on and
off, batches of conversations, tools; the same as the CLI's --chat."""
from conftest import cli_generate
from deepinfer import SamplingParams

THINK, END_THINK = 8189, 8190  # <think>, </think> in the demo model's tokenizer
HI = [{"role": "user", "content": "hi"}]
GREEDY = SamplingParams(temperature=0, max_tokens=10)


def test_chat_without_thinking_closes_the_think_span(llm):
    o = llm.chat(HI, GREEDY)[0]
    assert o.prompt_token_ids[0] == 0 and o.prompt_token_ids[-1] == END_THINK
    assert len(o.outputs[0].token_ids) == 10 and o.outputs[0].text


def test_chat_with_thinking_opens_it(llm):
    off = llm.chat(HI, GREEDY, thinking=False)[0]
    on = llm.chat(HI, GREEDY, thinking=True)[0]
    assert on.prompt_token_ids[-1] == THINK
    assert on.prompt_token_ids != off.prompt_token_ids
    assert on.outputs[0].token_ids != off.outputs[0].token_ids


def test_chat_equals_the_cli(llm):
    for thinking in (False, True):
        ours = llm.chat([{"role": "user", "content": "Tell me a story"}], GREEDY, thinking=thinking)[0]
        flags = ["--chat", "--prompt", "Tell me a story", "--temperature", "0", "--max-tokens", "10"]
        (line,) = cli_generate(*flags, *(["--thinking"] if thinking else []))
        assert ours.outputs[0].text == line["outputs"][0]["text"]
        assert ours.outputs[0].token_ids == line["outputs"][0]["token_ids"]


def test_a_batch_of_conversations(llm):
    convs = [HI, [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello"}]]
    outs = llm.chat(convs, GREEDY)
    assert len(outs) == 2
    assert outs[0].outputs[0].token_ids == llm.chat(HI, GREEDY)[0].outputs[0].token_ids
    assert outs[0].prompt_token_ids != outs[1].prompt_token_ids


def test_tools_and_reasoning_effort_change_the_prompt(llm):
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                               "parameters": {"type": "object",
                                                              "properties": {"city": {"type": "string"}}}}}]
    plain = llm.chat(HI, GREEDY)[0]
    with_tools = llm.chat(HI, GREEDY, tools=tools)[0]
    assert len(with_tools.prompt_token_ids) > len(plain.prompt_token_ids)
    high = llm.chat(HI, GREEDY, thinking=True, reasoning_effort="max")[0]
    default = llm.chat(HI, GREEDY, thinking=True)[0]
    assert high.prompt_token_ids != default.prompt_token_ids
