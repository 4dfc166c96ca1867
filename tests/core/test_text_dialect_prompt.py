"""Text dialects keep the system prompt byte-identical (H2) while protocol state tightens tool rights.

Under XML or P-format the tool list is rendered into the system message, so the runner sends the
run's static tool list on every call and tells the model about tightened rights in a message.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from typing import Any

import pytest

from cyber_agent.llm.fakes import FunctionModel
from cyber_agent.llm.types import LLMResponse

from tests.core.recursive_helpers import (  # noqa: F401 - clean_agent_env is an autouse fixture
    ROOT, TASK, _criteria_count, brief, call, clean_agent_env, delegate, make_runner, objective_of, recursive_config,
    report, tool_names,
)

TIGHTENED = "[protocol] Until you review the pending child reports with review_task"
RESTORED = "[protocol] Reviews done; your tools are available again."


def _text_call(name: str, **arguments: Any) -> LLMResponse:
    """A call written in the reply text (JSON in the tag: both XML and P-format read it)."""
    return LLMResponse(content=f'<tool_call>{json.dumps({"name": name, "arguments": arguments})}</tool_call>')


class TextTree:
    """One fake model for the tree that answers in the text dialect (or native, if offered tools)."""

    def __init__(self) -> None:
        self.systems: dict[str, list[str]] = defaultdict(list)
        self.users: dict[str, list[list[str]]] = defaultdict(list)
        self.llm = FunctionModel(self._answer)

    @staticmethod
    def _reply(tools: list[dict[str, Any]] | None, name: str, **arguments: Any) -> LLMResponse:
        return call(name, **arguments) if tools else _text_call(name, **arguments)

    def _answer(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> LLMResponse:
        system = str(messages[0].get("content") or "") if messages[0].get("role") == "system" else ""
        names = tool_names(tools)
        if "submit_validation" in names or "submit_validation" in system:
            verdicts = [{"criterion": i, "verdict": "pass", "evidence": "seen in the trajectory"}
                        for i in range(1, _criteria_count(messages) + 1)]
            return self._reply(tools, "submit_validation", verdicts=verdicts, summary="all criteria met")
        key = objective_of(messages) or "?"
        self.systems[key].append(system)
        self.users[key].append([str(m.get("content") or "") for m in messages if m.get("role") == "user"])
        if key != ROOT:
            if tools:
                return report(f"report of {key}")
            return _text_call("submit_report", outcome="completed", summary=f"report of {key}",
                              outputs=[f"report of {key}"])
        turn = len(self.systems[ROOT])
        if turn == 1:
            return delegate(brief("child")) if tools else _text_call("agent", task_brief=brief("child"))
        text = "\n".join(str(m.get("content") or "") for m in messages)
        reviewed = any("review_task" in str(m.get("content") or "") + json.dumps(m.get("tool_calls") or [])
                       for m in messages if m.get("role") == "assistant")
        children = re.findall(r"^Child (\S+) \[", text, re.M)
        if children and not reviewed:
            return self._reply(tools, "review_task", child_trace_id=children[0], decision="accept")
        return LLMResponse(content="final answer of the root")


@pytest.mark.parametrize("dialect", ["xml", "pformat"])
async def test_a_pending_review_never_changes_the_system_prompt_of_a_text_dialect(dialect: str):
    model = TextTree()
    runner, _ = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config(tool_dialect=dialect))
    assert result.status == "completed", result.error
    systems = model.systems[ROOT]
    assert len(systems) == 3  # delegate, review (while pending), answer
    assert len(set(systems)) == 1  # byte-identical in every call
    assert "review_task" in systems[0] and "submit_report" not in systems[0]
    before_review, while_pending, after_review = model.users[ROOT]
    assert not any(TIGHTENED in u for u in before_review)
    assert sum(TIGHTENED in u for u in while_pending) == 1
    notice = next(u for u in while_pending if TIGHTENED in u)
    assert notice.endswith("list_files, read_context_ref, read_file, review_task.")
    assert sum(TIGHTENED in u for u in after_review) == 1 and sum(u == RESTORED for u in after_review) == 1
    assert result.answer == "final answer of the root"


async def test_native_runs_get_the_tightened_tool_list_and_no_rights_message():
    model = TextTree()
    runner, _ = make_runner(model.llm)
    result = await runner.run_result(TASK, recursive_config())
    assert result.status == "completed", result.error
    assert not any(TIGHTENED in u or u == RESTORED for users in model.users[ROOT] for u in users)
