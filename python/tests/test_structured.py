"""so_args: JSON Schema (a dict or text) and regex outputs checked with
Python's json and re; a schema that does not compile fails with the engine's message."""
import json
import re

import pytest

from deepinfer import DeepInferError, SamplingParams

SCHEMA = {"type": "object",
          "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 99},
                         "b": {"type": "string", "maxLength": 8},
                         "c": {"enum": ["x", "y"]}},
          "required": ["a", "b", "c"], "additionalProperties": False}


def _check(doc):
    assert set(doc) == {"a", "b", "c"}
    assert isinstance(doc["a"], (int, float)) and doc["a"] == int(doc["a"]) and 0 <= doc["a"] <= 99
    assert isinstance(doc["b"], str) and len(doc["b"]) <= 8 and doc["c"] in ("x", "y")


@pytest.mark.parametrize("as_text", [False, True])
def test_json_schema_output_parses_and_matches(llm, as_text):
    so = {"schema_type": "json", "schema": json.dumps(SCHEMA) if as_text else SCHEMA, "whitespace_max": 0}
    outs = llm.generate(["Name:", "Data"], SamplingParams(temperature=0.8, max_tokens=64, seq_seed=2, n=2, so_args=so))
    for o in outs:
        for c in o.outputs:
            assert c.finish_reason == "stop", c.text
            _check(json.loads(c.text))


def test_regex_output_full_matches(llm):
    pattern = r"[0-9]{4}-[0-9]{2}-[0-9]{2}( [a-z]{1,6})?"
    p = SamplingParams(temperature=1.0, max_tokens=32, seq_seed=9, n=3, so_args={"schema_type": "regex", "schema": pattern})
    for c in llm.generate("Date:", p)[0].outputs:
        assert re.fullmatch(pattern, c.text), c.text


def test_ebnf_output(llm):
    grammar = 'root ::= "yes" | "no" | "maybe"'
    p = SamplingParams(temperature=1.0, max_tokens=8, seq_seed=1, n=4, so_args={"schema_type": "ebnf", "schema": grammar})
    for c in llm.generate("Answer:", p)[0].outputs:
        assert c.text in ("yes", "no", "maybe") and c.finish_reason == "stop"


@pytest.mark.parametrize("so, words", [
    ({"schema_type": "json", "schema": '{"type": 5}'}, "type must be a string"),
    ({"schema_type": "json", "schema": "{not json"}, "not valid JSON"),
    ({"schema_type": "regex", "schema": "(["}, "unterminated character class"),
    ({"schema_type": "ebnf", "schema": "root ::= missing"}, "so_args (ebnf)"),
])
def test_a_bad_schema_raises_the_engine_message(llm, so, words):
    with pytest.raises(DeepInferError) as err:
        llm.generate("x", SamplingParams(max_tokens=4, so_args=so))
    assert words in str(err.value) and err.value.status in ("invalid argument", "format error")


def test_a_bad_schema_in_a_batch_names_its_request(llm):
    bad = SamplingParams(max_tokens=4, so_args={"schema_type": "regex", "schema": "(["})
    with pytest.raises(DeepInferError, match=r"^request 1: so_args \(regex\)"):
        llm.generate(["a", "b"], [SamplingParams(max_tokens=4), bad])
