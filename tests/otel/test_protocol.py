"""The recursive protocol, approvals and failures on the spans: events and `cyber_agent.*` attributes."""

from __future__ import annotations

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from conftest import SpanIndex
from cyber_agent.core.approvals import CallDecision, current_batch, decide_batch
from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner
from cyber_agent.errors import LLMTransportError
from cyber_agent.llm.fakes import FunctionModel, ScriptedModel
from cyber_agent.otel import export_otel
from cyber_agent.tools.registry import ToolRegistry
from cyber_agent.trace import InMemoryTraceStore
from cyber_agent.trace.protocols import TraceReader


async def spans_of(store: TraceReader, root: str, **options: object) -> SpanIndex:
    exporter = InMemorySpanExporter()
    await export_otel(store, root, exporter=exporter, **options)  # type: ignore[arg-type]
    return SpanIndex(list(exporter.get_finished_spans()))


def events(span, name: str) -> list[dict]:
    return [dict(e.attributes) for e in span.events if e.name == name]


async def test_brief_report_validations_reviews_and_revisions(recursive_tree):
    store, root = recursive_tree
    index = await spans_of(store, root)
    delegate = next(s for s in index.of_operation("invoke_agent") if s.attributes["gen_ai.agent.name"] == "delegate")
    trace = await store.get_trace(delegate.attributes["gen_ai.agent.id"])
    [brief] = events(delegate, "cyber_agent.brief")
    assert brief["cyber_agent.brief.criteria"] == len(trace.protocol.brief.completion_criteria) == 1
    assert delegate.attributes["cyber_agent.report.outcome"] == "completed"
    assert delegate.attributes["cyber_agent.report.outputs"] == 4
    assert delegate.attributes["cyber_agent.review.decision"] == "accept"
    reviews = events(delegate, "cyber_agent.review")
    assert [r["cyber_agent.review.decision"] for r in reviews] == [r.decision for r in trace.protocol.reviews]
    assert {"revise", "accept"} <= {r["cyber_agent.review.decision"] for r in reviews}
    assert [e.timestamp for e in delegate.events] == sorted(e.timestamp for e in delegate.events)

    explores = [s for s in index.of_operation("invoke_agent") if s.attributes["gen_ai.agent.name"] == "explore"]
    assert len(explores) == 4
    for explore in explores:
        verdicts = [v["cyber_agent.validation.verdict"] for v in events(explore, "cyber_agent.validation")]
        # Each report's evidence check (it passes: the demo cites what it read), then its validator.
        assert verdicts == ["pass", "fail", "pass", "pass"], "the demo's first report is rejected, the revision passes"
        [_, failed, _, _] = events(explore, "cyber_agent.validation")
        assert failed["gen_ai.evaluation.score.label"] == "fail"
        judge = index.agent(failed["cyber_agent.validation.validator_trace_id"])
        assert judge.attributes["cyber_agent.validator.verdict"] == "fail"
        [revision] = events(explore, "cyber_agent.revision")
        [link] = explore.links
        assert format(link.context.span_id, "016x") == revision["cyber_agent.revised_by_span"]
        assert index.by_id[link.context.span_id].name == "execute_tool review_task"
        assert index.parent(explore).name == "execute_tool agent"

    validators = [s for s in index.of_operation("invoke_agent") if s.attributes["gen_ai.agent.name"] == "validator"]
    assert len(validators) == 10
    for validator in validators:
        target = validator.attributes["cyber_agent.validator.target_trace_id"]
        assert index.parent(validator) is index.agent(target), "a validator hangs under the trace it judges"
        assert validator.attributes["cyber_agent.validator.verdict"] in ("pass", "fail")
    assert sorted(v.attributes["cyber_agent.validator.scope"] for v in validators).count("root") == 1


async def test_root_carries_anchor_budget_limits_and_usage(recursive_tree):
    store, root = recursive_tree
    index = await spans_of(store, root)
    span = index.agent(root)
    usage = await store.get_resource_usage(root)
    trace = await store.get_trace(root)
    for key in ("agents", "llm_calls", "prompt_tokens", "completion_tokens", "total_tokens", "validation_tool_calls"):
        assert span.attributes[f"cyber_agent.budget.used.{key}"] == getattr(usage, key)
    budget = trace.root_setup.resource_budget
    assert span.attributes["cyber_agent.budget.limit.max_llm_calls"] == budget.max_llm_calls
    assert span.attributes["cyber_agent.budget.limit.max_total_agents"] == budget.max_total_agents
    [anchor] = events(span, "cyber_agent.anchor")
    assert anchor["cyber_agent.anchor.criteria"] == 2 and anchor["cyber_agent.anchor.hash"] == trace.root_setup.anchor_hash
    [root_validation] = events(span, "cyber_agent.validation")
    assert root_validation["cyber_agent.validation.scope"] == "root"
    assert root_validation["cyber_agent.validation.verdict"] == "pass"
    assert span.attributes["cyber_agent.agent_mode"] == "recursive" and span.attributes["cyber_agent.depth"] == 0


def approval_registry() -> ToolRegistry:
    registry = ToolRegistry()

    def deploy(target: str) -> str:
        """Deploy somewhere (needs a human)."""
        return f"deployed {target}"

    def look(path: str) -> str:
        """Look at something."""
        return "looked"

    registry.register(deploy, requires_confirmation=True, editable_params=("target",), side_effects=True)
    registry.register(look)
    return registry


async def approval_tree() -> tuple[InMemoryTraceStore, str]:
    store, registry = InMemoryTraceStore(), approval_registry()
    reply = ScriptedModel.tool_calls(("look", {"path": "a"}, "c1"), ("deploy", {"target": "prod"}, "c2"))
    with ScriptedModel([reply]) as model:
        result = await AgentRunner(trace_store=store, llm_call=model, tool_registry=registry).run_result(
            [{"role": "user", "content": "ship it"}], RunConfig(model="openai:gpt-test"))
    trace_id = result.trace.trace_id
    batch = await current_batch(store, trace_id)
    await decide_batch(store, trace_id, batch.batch_id, [
        CallDecision(call_id="c1", decision="reject", feedback="not needed"),
        CallDecision(call_id="c2", decision="approve", arguments={"target": "staging"}),
    ])
    with ScriptedModel(["done"]) as model:
        await AgentRunner(trace_store=store, llm_call=model, tool_registry=registry).run_result(
            [], RunConfig(trace_id=trace_id))
    return store, trace_id


async def test_approvals_are_events_and_each_call_carries_its_decision():
    store, root = await approval_tree()
    index = await spans_of(store, root)
    span = index.agent(root)
    [requested] = events(span, "cyber_agent.approval.requested")
    [decided] = events(span, "cyber_agent.approval.decided")
    assert list(requested["cyber_agent.approval.tools"]) == ["look", "deploy"]
    assert list(decided["cyber_agent.approval.decisions"]) == ["reject", "approve"]
    assert "cyber_agent.approval.feedback" not in decided and "cyber_agent.approval.arguments" not in decided
    tools = {s.attributes["gen_ai.tool.call.id"]: s for s in index.of_operation("execute_tool")}
    assert tools["c1"].attributes["cyber_agent.approval.decision"] == "reject"
    assert tools["c2"].attributes["cyber_agent.approval.decision"] == "approve"
    chat = index.of_operation("chat")[0]
    assert chat.attributes["gen_ai.provider.name"] == "openai" and chat.attributes["gen_ai.request.model"] == "gpt-test"
    assert chat.name == "chat gpt-test" and chat.kind.name == "CLIENT"

    with_content = await spans_of(store, root, capture_content=True)
    [decided] = events(with_content.agent(root), "cyber_agent.approval.decided")
    assert list(decided["cyber_agent.approval.feedback"]) == ["not needed", ""]


async def test_a_failed_run_is_an_error_span():
    def broken(messages, tools):
        raise LLMTransportError("the provider is down")

    store = InMemoryTraceStore()
    result = await AgentRunner(trace_store=store, llm_call=FunctionModel(broken)).run_result(
        [{"role": "user", "content": "hello"}], RunConfig(model="test-model"))
    assert result.trace.status == "failed"
    span = (await spans_of(store, result.trace.trace_id)).agent(result.trace.trace_id)
    assert span.status.status_code is StatusCode.ERROR and "provider is down" in span.status.description
    assert span.attributes["error.type"] == "failed"
    assert span.attributes["gen_ai.provider.name"] == "cyber_agent.custom"
