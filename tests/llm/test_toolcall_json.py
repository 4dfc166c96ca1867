"""parse_tool_arguments never raises, whatever text a model sends."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from cyber_agent.llm import parse_tool_arguments

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@given(st.text())
def test_arbitrary_text_never_raises(text):
    call = parse_tool_arguments("id", "tool", text)
    assert isinstance(call.arguments, dict)
    assert (call.parse_error is None) or (call.raw_arguments == text and call.arguments == {})


@given(JSON_VALUES)
def test_json_objects_parse_and_everything_else_is_a_parse_error(value):
    call = parse_tool_arguments("id", "tool", json.dumps(value))
    if isinstance(value, dict) and value:
        assert call.parse_error is None and call.arguments == value
    elif not isinstance(value, dict):
        assert call.parse_error and "JSON object" in call.parse_error


def test_pathological_but_well_formed_json_is_a_parse_error_not_a_crash():
    huge_int = '{"n": ' + "1" * 5000 + "}"
    deep = "[" * 100_000 + "]" * 100_000
    for text in (huge_int, deep, '{"a":' * 100_000):
        call = parse_tool_arguments("id", "tool", text)
        assert call.parse_error and call.arguments == {} and call.raw_arguments == text
