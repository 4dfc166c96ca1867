"""A real pydantic-ai run instrumented with OpenTelemetry (in-memory exporter), offline.

`main` (a FunctionModel) calls its `ask_helper` tool, which runs the `helper` agent (a TestModel)
inside the tool call; then `main` answers. pydantic-ai's instrumentation emits the GenAI spans.
"""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.models.test import TestModel


async def run_agents(*, include_content: bool = True) -> list[ReadableSpan]:
    """Run main → ask_helper → helper; return the finished spans."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    settings = InstrumentationSettings(tracer_provider=provider, include_content=include_content)
    helper: Agent[None, str] = Agent(TestModel(custom_output_text="3"), name="helper")
    helper.instrument = settings

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
        if not returns:
            return ModelResponse(parts=[ToolCallPart("ask_helper", {"question": "1+2"})])
        return ModelResponse(parts=[TextPart(f"The answer is {returns[-1].content}")])

    main: Agent[None, str] = Agent(FunctionModel(answer), name="main")
    main.instrument = settings

    @main.tool
    async def ask_helper(ctx: RunContext[None], question: str) -> str:
        result = await helper.run(question, usage=ctx.usage)
        return result.output

    await main.run("What is 1+2?")
    provider.shutdown()
    return list(exporter.get_finished_spans())
