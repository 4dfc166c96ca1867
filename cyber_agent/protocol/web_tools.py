"""web_search and fetch_page: a validator's reach to public web evidence (SPEC A11).

Only validators of a tree whose root froze web evidence as enabled get these tools
(`cyber_agent/protocol/tool_rights.py:runtime_tool_names`); the tools check it again and refuse
every other caller. Without a configured provider `web_search` answers with an error saying
search is disabled, so the evidence stays `unknown`. Each call books itself against the tree
budget and marks its result `validation_metered` so the runner does not count it twice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Protocol

from pydantic import Field

from cyber_agent.errors import BudgetExceededError, ToolError
from cyber_agent.protocol.mode import AgentPolicy
from cyber_agent.protocol.ports import protocol_runner
from cyber_agent.protocol.web_evidence import (
    UNKNOWN_HINT,
    VALIDATION_METERED,
    SafeFetcher,
    SearchAdapter,
    ValidationMeter,
    search_from_setting,
)
from cyber_agent.tools.context import ToolContext
from cyber_agent.tools.registry import ToolRegistry, ToolResult
from cyber_agent.trace.models import Trace

__all__ = ["FetcherFactory", "fetch_page", "make_web_tools", "register_web_tools", "web_search"]

SEARCH_DISABLED = (
    "web search is disabled: no search provider is configured for this task "
    "(set AGENT_VALIDATOR_SEARCH_PROVIDER=serper and SERPER_API_KEY before the task starts); " + UNKNOWN_HINT
)


class FetcherFactory(Protocol):
    """Build the SafeFetcher of one fetch_page call (`SafeFetcher` itself is the default)."""

    def __call__(self, *, meter: ValidationMeter | None, fetches_done: int) -> SafeFetcher: ...


async def _web_validator(ctx: ToolContext) -> Trace:
    """The calling trace, if it is a validator whose tree enabled web evidence; else ToolError."""
    trace = await ctx.store.get_trace(ctx.trace_id)
    if trace is None:
        raise ToolError(f"trace {ctx.trace_id!r} not found")
    assignment = trace.protocol.validator
    if not trace.is_validator or assignment is None or not assignment.web_evidence_enabled:
        raise ToolError(f"web evidence is disabled for trace {ctx.trace_id!r}: only validators of a tree started "
                        f"with web search enabled may use it; {UNKNOWN_HINT}")
    return trace


async def _meter(ctx: ToolContext, trace: Trace) -> ValidationMeter | None:
    """The tree budget of a recursive trace (a missing one fails closed); None outside recursive trees."""
    if ctx.runner is None or not AgentPolicy.of(trace).is_recursive:
        return None
    meter: ValidationMeter = await protocol_runner(ctx).budget_for(trace)
    return meter


async def _search_setting(ctx: ToolContext, trace: Trace) -> dict[str, Any]:
    root_id = trace.root_id
    root = trace if root_id == trace.trace_id else await ctx.store.get_trace(root_id)
    setup = root.root_setup if root is not None else None
    return setup.validator_search.model_dump() if setup is not None else {}


async def _run_search(ctx: ToolContext, query: str, max_results: int, search: SearchAdapter | None) -> ToolResult:
    trace = await _web_validator(ctx)
    adapter = search or search_from_setting(await _search_setting(ctx, trace))
    if adapter is None:
        return ToolResult.error(SEARCH_DISABLED, **{VALIDATION_METERED: False})
    meter = await _meter(ctx, trace)
    metered = {VALIDATION_METERED: meter is not None}
    try:
        if meter is not None:
            await meter.record_validation_work(tool_calls=1)
        results = await adapter.search(query, max_results=max_results)
        text = results.render()
        if meter is not None:
            # The provider has charged already: book the cost even if the material is refused.
            await meter.record_validation_work(cost_usd=results.cost_usd)
            await meter.record_validation_work(material_chars=len(text))
    except BudgetExceededError as exc:
        return ToolResult.error(f"web search for {query!r} refused by the tree budget ({exc}); {UNKNOWN_HINT}", **metered)
    except ToolError as exc:
        return ToolResult.error(str(exc), **metered)
    return ToolResult(content=text, metadata={
        **metered, "provider": adapter.provider, "hits": len(results.hits), "cost_usd": results.cost_usd,
    })


async def _run_fetch(ctx: ToolContext, url: str, factory: FetcherFactory) -> ToolResult:
    trace = await _web_validator(ctx)
    meter = await _meter(ctx, trace)
    # Counted from the persisted trajectory, so the cap holds across calls and continued runs.
    done = sum(1 for m in await ctx.store.get_trace_messages(ctx.trace_id) if m.role == "tool" and m.tool_name == "fetch_page")
    metered = {VALIDATION_METERED: meter is not None}
    try:
        page = await factory(meter=meter, fetches_done=done).fetch(url)
    except ToolError as exc:
        return ToolResult.error(str(exc), **metered)
    return ToolResult(content=page.render(), metadata={
        **metered, "url": page.url, "final_url": page.final_url, "status": page.status,
        "content_type": page.content_type, "chars": len(page.text), "truncated": page.truncated,
    })


def make_web_tools(
    search: SearchAdapter | None = None, fetcher_factory: FetcherFactory | None = None,
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """Return (web_search, fetch_page) bound to a search adapter and a fetcher factory."""
    factory: FetcherFactory = fetcher_factory or SafeFetcher

    async def web_search(ctx: ToolContext, query: str, max_results: Annotated[int, Field(ge=1, le=10)] = 5) -> ToolResult:
        """Search the public web for evidence on a completion criterion.
        Returns title, URL and snippet per hit. A snippet is a lead, not evidence: read the page
        with fetch_page before relying on it.

        Args:
            query: What to search for.
            max_results: How many hits to return (1-10).
        """
        return await _run_search(ctx, query, max_results, search)

    async def fetch_page(ctx: ToolContext, url: str) -> ToolResult:
        """Read a public web page (http or https) as plain text.
        Private, loopback and link-local addresses are refused; redirects are followed (a few hops)
        and checked; large pages are cut and marked truncated.

        Args:
            url: Absolute http(s) URL of the page.
        """
        return await _run_fetch(ctx, url, factory)

    return web_search, fetch_page


web_search, fetch_page = make_web_tools()


def register_web_tools(
    registry: ToolRegistry, *, search: SearchAdapter | None = None, fetcher_factory: FetcherFactory | None = None,
) -> ToolRegistry:
    """Register web_search and fetch_page on `registry` and return it.

    `search=None` uses the provider the root froze (serper with `SERPER_API_KEY`), or none;
    `fetcher_factory=None` builds a default `SafeFetcher` per call.
    """
    searcher, fetcher = make_web_tools(search, fetcher_factory)
    registry.register(searcher, category="web")
    registry.register(fetcher, category="web")
    return registry
