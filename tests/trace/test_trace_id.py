"""Trace and message ids (SPEC T2): generate, parse, validate."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cyber_agent.errors import InvalidIdError
from cyber_agent.trace.trace_id import (
    MAX_TRACE_ID_LENGTH,
    message_id_for,
    new_root_trace_id,
    new_sub_trace_id,
    parse_message_id,
    parse_trace_id,
    validate_trace_id,
)

ROOT = "2f8d3a1c-4b6e-4f9a-8c2d-1e5b7a9f3c4d"
WHEN = datetime(2026, 2, 4, 22, 0, 12, tzinfo=UTC)


def test_root_ids_are_fresh_uuid4s():
    first, second = new_root_trace_id(), new_root_trace_id()
    assert first != second
    assert uuid.UUID(first).version == 4 and str(uuid.UUID(first)) == first
    parsed = parse_trace_id(first)
    assert (parsed.root_id, parsed.parent_id, parsed.mode, parsed.timestamp, parsed.seq, parsed.depth) == (
        first, None, None, None, None, 0)


def test_sub_trace_id_has_the_seed_format_and_parses_back():
    sub = new_sub_trace_id(ROOT, "explore", 1, now=WHEN)
    assert sub == f"{ROOT}@explore-20260204220012-001"
    parsed = parse_trace_id(sub)
    assert (parsed.root_id, parsed.parent_id, parsed.mode, parsed.timestamp, parsed.seq, parsed.depth) == (
        ROOT, ROOT, "explore", WHEN, 1, 1)


def test_nested_sub_trace_ids_spell_out_their_lineage():
    child = new_sub_trace_id(ROOT, "delegate", 2, now=WHEN)
    grandchild = new_sub_trace_id(child, "validator", 12, now=WHEN)
    parsed = parse_trace_id(grandchild)
    assert (parsed.parent_id, parsed.root_id, parsed.mode, parsed.seq, parsed.depth) == (child, ROOT, "validator", 12, 2)
    assert parse_trace_id(parsed.parent_id).parent_id == ROOT


def test_sub_trace_id_uses_the_current_utc_time_by_default():
    before = datetime.now(UTC).replace(microsecond=0)
    stamp = parse_trace_id(new_sub_trace_id(ROOT, "explore", 0)).timestamp
    assert before <= stamp <= datetime.now(UTC)


def test_five_levels_of_delegation_plus_a_validator_fit_the_length_limit():
    trace_id = ROOT
    for _ in range(5):
        trace_id = new_sub_trace_id(trace_id, "delegate", 6, now=WHEN)
    trace_id = new_sub_trace_id(trace_id, "validator", 1, now=WHEN)
    assert len(f"{message_id_for(trace_id, 9999)}.json") <= 255
    assert parse_trace_id(trace_id).depth == 6


@pytest.mark.parametrize(("parent", "mode", "seq"), [
    ("../x", "explore", 1), (ROOT, "Explore", 1), (ROOT, "ex-plore", 1), (ROOT, "", 1), (ROOT, "a/b", 1),
    (ROOT, "explore", -1), (ROOT, "explore", 1_000_000),
])
def test_sub_trace_id_refuses_bad_parts(parent, mode, seq):
    with pytest.raises(InvalidIdError):
        new_sub_trace_id(parent, mode, seq, now=WHEN)


@pytest.mark.parametrize("bad", [
    "not-a-uuid", ROOT.upper(), f"{ROOT}@explore-2026020422001-001", f"{ROOT}@explore-20261304220012-001",
    f"{ROOT}@explore-20260204220012-01", f"{ROOT}@-20260204220012-001", f"{ROOT}@explore", "..", "",
])
def test_parse_refuses_what_is_not_a_t2_id(bad):
    with pytest.raises(InvalidIdError):
        parse_trace_id(bad)


@pytest.mark.parametrize("good", [ROOT, f"{ROOT}@explore-20260204220012-001", "imported_trace.v2", "a", "A-1@b"])
def test_validate_accepts_safe_ids(good):
    assert validate_trace_id(good) == good


@pytest.mark.parametrize("bad", [
    "", "..", "a..b", "../etc", "a/b", "/abs", "a\\b", "a\x00b", ".hidden", "-dash", "a b", "a:b", "é",
    "x" * (MAX_TRACE_ID_LENGTH + 1), None, 1, b"abc", ["a"],
])
def test_validate_refuses_unsafe_ids(bad):
    with pytest.raises(InvalidIdError):
        validate_trace_id(bad)


@given(st.one_of(st.text(), st.text(alphabet="./\\\x00ab-@_"), st.binary(), st.integers(), st.none(),
                 st.lists(st.text())))
def test_validate_never_lets_a_path_through_and_raises_only_invalid_id_error(value):
    try:
        result = validate_trace_id(value)
    except InvalidIdError:
        return
    assert result == value and isinstance(result, str)
    assert "/" not in result and "\\" not in result and "\x00" not in result and ".." not in result
    assert result not in (".", "") and not result.startswith(".")


def test_message_ids_join_trace_id_and_sequence():
    assert message_id_for(ROOT, 7) == f"{ROOT}-0007"
    assert message_id_for(ROOT, 12345) == f"{ROOT}-12345"
    assert parse_message_id(f"{ROOT}-0007") == (ROOT, 7)
    sub = f"{ROOT}@explore-20260204220012-001"
    assert parse_message_id(message_id_for(sub, 3)) == (sub, 3)


@pytest.mark.parametrize("bad", ["", "nodash", "trace-", "trace-x1", "trace-١", "../t-0001", "-0001", None, 3])
def test_parse_message_id_refuses_malformed_ids(bad):
    with pytest.raises(InvalidIdError):
        parse_message_id(bad)


def test_error_names_the_offending_value():
    with pytest.raises(InvalidIdError, match=re.escape("'a/b'")) as info:
        validate_trace_id("a/b")
    assert info.value.value == "a/b"
