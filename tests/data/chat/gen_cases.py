#!/usr/bin/env python3
"""gen_cases.py — expected prompts for tests/unit/test_chat.c.

Runs the reference Python encoders on the chats below and writes
tests/data/chat/cases.jsonl: one {"arch", "thinking", "effort", "input",
"expected"} object per line. The reference encoders are not part of this
repository; pass their paths:

  python3 tests/data/chat/gen_cases.py V4_ENCODER V41_ENCODER

  V4_ENCODER   encoding/encoding_dsv4.py of DeepSeek-V4-Flash (e.g. GitHub
               Mockingjay1316/deepseek-v4-flash-spark @ ae059d91)
  V41_ENCODER  a module exposing apply(messages, tools, thinking, effort):
               vLLM's vllm/tokenizers/deepseek_v41_encoding.py @ 21f4c25c plus
               the request handling of deepseek_v41.py (tools attached to the
               first system message, effort "none" = chat mode, default
               "high"), with REASONING_EFFORT_MAPPINGS set to DeepSeek's
               checkpoint table {"low": 50, "high": 75, "max": 100}.

For V4 the request-level tools go to a leading system/developer message, else
into a new system message at index 0 (vLLM's deepseek_v4.py).
"""
import copy
import importlib.util
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                          "days": {"type": "integer", "minimum": 1, "default": 3},
                          "ratio": {"type": "number", "default": 0.5, "maximum": 1e21, "minimum": 1e-7}},
                          "required": ["city"]}}}
SEARCH = {"type": "function", "function": {"name": "search", "description": "Web search — “quoted”, ünïcode, \t tab",
          "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}


def tc(i, name, args):
    return {"id": "call_%d" % i, "type": "function", "function": {"name": name, "arguments": args}}


CHATS = {
    "simple": [{"role": "user", "content": "Hello"}],
    "system_user": [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "2+2?"}],
    "multi_turn": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                   {"role": "assistant", "content": "Hello!", "reasoning_content": "greet"},
                   {"role": "user", "content": "Weather?"}],
    "tools_request": {"tools": [WEATHER, SEARCH], "messages": [
        {"role": "system", "content": "sys"}, {"role": "user", "content": "Paris weather, 2 days"},
        {"role": "assistant", "content": "", "reasoning_content": "call it",
         "tool_calls": [tc(1, "get_weather", "{\"city\": \"Paris\", \"days\": 2, \"ratio\": 0.25, \"x\": [1, 2.0, -0.0, 1e100, true, null, {\"k\": \"v\"}]}"),
                        tc(2, "search", "{\"q\": \"Paris \\\"weather\\\"\\n\"}")]},
        {"role": "tool", "tool_call_id": "call_2", "content": "search result"},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"},
        {"role": "assistant", "content": "It is 21°C.", "reasoning_content": "done"},
        {"role": "user", "content": "Thanks"}]},
    "tools_no_system": {"tools": [SEARCH], "messages": [{"role": "user", "content": "find x"}]},
    "bad_arguments": [{"role": "user", "content": "go"},
                      {"role": "assistant", "content": "ok", "tool_calls": [tc(1, "f", "not json {"),
                                                                             tc(3, "h", "{}"), tc(4, "k", "{\"a\": 1, \"a\": 2, \"b\": 1.5e-7}")]},
                      {"role": "tool", "tool_call_id": "call_1", "content": "r1"},
                      {"role": "user", "content": "and?"}],
    "response_format": [{"role": "system", "content": "Answer in JSON.",
                         "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object", "properties": {"n": {"type": "number", "default": 100.0}}}}}},
                        {"role": "user", "content": "n?"}],
    "latest_reminder": [{"role": "system", "content": "S"}, {"role": "latest_reminder", "content": "2026-01-01, Paris"},
                        {"role": "user", "content": "What day?"}],
    "task_query": [{"role": "user", "content": "best hot springs", "task": "query"}, {"role": "assistant", "content": "hot springs list"}],
    "task_action": [{"role": "user", "content": "search this", "task": "action"}],
    "consecutive_users": [{"role": "user", "content": "part one"}, {"role": "user", "content": "part two"},
                          {"role": "assistant", "content": "ok"}, {"role": "user", "content": "three"}],
    "developer": [{"role": "system", "content": "S"}, {"role": "developer", "content": "dev rules", "tools": [SEARCH]},
                  {"role": "user", "content": "q"}],
    "dropped_developer": [{"role": "developer", "content": "old rules"}, {"role": "assistant", "content": "a1", "reasoning_content": "r1"},
                          {"role": "user", "content": "q2"}],
    "wo_eos": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "partial", "wo_eos": True}],
    "unicode": [{"role": "user", "content": "你好 👋🏽 <｜User｜> \u00a0 tab\there\r\nnew"}],
    "empty_content": [{"role": "system", "content": None}, {"role": "user", "content": ""}],
}

V41_ONLY = {
    "mid_system": [{"role": "system", "content": "S0"}, {"role": "user", "content": "u1"},
                   {"role": "assistant", "content": "a1", "reasoning_content": "r1"},
                   {"role": "system", "content": "new instructions"}],
    "parts_and_images": [{"role": "user", "content": [{"type": "text", "text": "look"},
                                                       {"type": "image_url", "image_url": {"url": "x.png"}},
                                                       {"type": "text", "text": "what?"}]}],
    "reasoning_alias": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "reasoning": "via alias"},
                        {"role": "user", "content": "q2"}, {"role": "assistant", "content": "a2", "reasoning": "last"}],
    "dict_arguments": [{"role": "user", "content": "go"},
                       {"role": "assistant", "content": "", "tool_calls": [tc(1, "f", {"x": 1, "y": "two"}), tc(2, "g", "\"{\\\"z\\\": 3}\"")]}],
    "trailing_system_only": [{"role": "system", "content": "only system"}],
    "list_arguments": [{"role": "user", "content": "go"}, {"role": "assistant", "content": "", "tool_calls": [tc(1, "g", "[1, 2]")]},
                       {"role": "tool", "tool_call_id": "call_1", "content": None}, {"role": "user", "content": "next"}],
}


def main():
    v4 = load(sys.argv[1], "ref_v4")
    v41 = load(sys.argv[2], "ref_v41")
    out = []

    def add(arch, name, chat, thinking, effort, expected):
        out.append({"name": name, "arch": arch, "thinking": thinking, "effort": effort, "input": chat, "expected": expected})

    for name, chat in CHATS.items():
        msgs = copy.deepcopy(chat["messages"] if isinstance(chat, dict) else chat)
        tools = chat.get("tools") if isinstance(chat, dict) else None
        for thinking in (False, True):
            efforts = [None, "max"] if thinking else [None]
            for effort in efforts:
                m = copy.deepcopy(msgs)
                if tools:
                    if m and m[0].get("role") in ("system", "developer"):
                        m[0] = dict(m[0], tools=tools)
                    else:
                        m.insert(0, {"role": "system", "tools": tools})
                exp = v4.encode_messages(m, thinking_mode="thinking" if thinking else "chat", reasoning_effort=effort)
                add("v4", name, chat, thinking, effort, exp)
    for name, chat in list(CHATS.items()) + list(V41_ONLY.items()):
        msgs = chat["messages"] if isinstance(chat, dict) else chat
        tools = chat.get("tools") if isinstance(chat, dict) else None
        for thinking in (False, True):
            for effort in ([None, "low", "max", "42", "none"] if thinking else [None]):
                e = int(effort) if effort and effort.isdigit() else effort
                exp = v41.apply(copy.deepcopy(msgs), copy.deepcopy(tools), thinking, e)
                add("v41", name, chat, thinking, effort, exp)
    with open(os.path.join(HERE, "cases.jsonl"), "w") as f:
        for c in out:
            f.write(json.dumps(c, ensure_ascii=False) + "\n")
    print("wrote %d cases" % len(out))


if __name__ == "__main__":
    main()
