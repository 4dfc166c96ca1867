"""Validator web evidence (SPEC A11): SSRF refusal, DNS pinning, limits, budget, serper, disabled by default.

Every test stays on this machine: pages come from an asyncio server on 127.0.0.1, names are
answered by a fake resolver, and serper is an httpx.MockTransport.
"""

from __future__ import annotations

import asyncio
import gzip
import importlib
import json
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from recursive_helpers import TASK, clean_agent_env, make_runner, recursive_config, tool_names  # noqa: F401 (autouse fixture)

from cyber_agent.core.resource_budget import ResourceBudget, ResourceBudgetController
from cyber_agent.core.runner import AgentRunner, default_registry
from cyber_agent.core.tool_rights import VALIDATOR_TOOLS, runtime_tool_names
from cyber_agent.protocol.web_evidence import (
    VALIDATION_METERED,
    AddressPolicy,
    FetchPolicy,
    SafeFetcher,
    SearchHit,
    SearchResults,
    SerperSearch,
    search_from_setting,
)
from cyber_agent.errors import ToolError
from cyber_agent.llm.fakes import FunctionModel
from cyber_agent.llm.types import LLMResponse, ToolCall
from cyber_agent.protocol.web_tools import register_web_tools
from cyber_agent.tools.context import ToolContext
from cyber_agent.tools.registry import ToolRegistry
from cyber_agent.trace import InMemoryTraceStore
from cyber_agent.trace.models import Message, Trace

PAGE = (b"<html><head><title>Evidence page</title><style>.x{color:red}</style>"
        b"<script>var secret = 'script text';</script></head>"
        b"<body><h1>Release notes</h1><p>Version 2.1 fixed the &amp; bug.</p></body></html>")


# ---- a local site and a fake resolver -----------------------------------------------------
@dataclass
class LocalSite:
    """An HTTP/1.1 server on 127.0.0.1 that records every request it answers."""

    port: int = 0
    routes: dict[str, tuple[int, dict[str, str], bytes]] = field(default_factory=dict)
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        target = head[0].split(" ")[1]
        headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in head[1:] if line)}
        self.requests.append((target, headers))
        status, extra, body = self.routes.get(target, (404, {"Content-Type": "text/plain"}, b"no such page"))
        lines = [f"HTTP/1.1 {status} X", *(f"{k}: {v}" for k, v in extra.items()),
                 f"Content-Length: {len(body)}", "Connection: close"]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        await writer.drain()
        writer.close()

    def paths(self) -> list[str]:
        return [target for target, _ in self.requests]


@pytest.fixture
async def site() -> AsyncIterator[LocalSite]:
    local = LocalSite()
    server = await asyncio.start_server(local.handle, "127.0.0.1", 0)
    local.port = server.sockets[0].getsockname()[1]
    local.routes.update({
        "/page": (200, {"Content-Type": "text/html; charset=utf-8"}, PAGE),
        "/hop": (302, {"Location": "/page"}, b""),
        "/loop": (302, {"Location": "/loop"}, b""),
        "/big": (200, {"Content-Type": "text/plain"}, b"a" * 5000),
        "/bomb": (200, {"Content-Type": "text/plain", "Content-Encoding": "gzip"}, gzip.compress(b"z" * 2_000_000)),
        "/binary": (200, {"Content-Type": "application/octet-stream"}, b"\x00\x01"),
        "/untyped": (200, {}, b"what am I"),
        "/json": (200, {"Content-Type": "application/json"}, b'{"version": "2.1"}'),
    })
    async with server:
        yield local


class FakeResolver:
    """Answer names from a table; a list of answers is played one per call, the last one repeating."""

    def __init__(self, table: dict[str, list[list[str]]]) -> None:
        self.table = table
        self.calls: list[str] = []

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        self.calls.append(host)
        answers = self.table.get(host)
        if answers is None:
            raise OSError(f"[Errno -2] Name or service not known: {host}")
        return answers[min(self.calls.count(host), len(answers)) - 1]


def fetcher(resolver: FakeResolver, policy: FetchPolicy | None = None, **options) -> SafeFetcher:
    """A fetcher allowed to reach the local site (loopback is exempt for tests only)."""
    return SafeFetcher(policy, address_policy=AddressPolicy.allowing_loopback_for_tests(), resolver=resolver, **options)


def no_network() -> httpx.AsyncBaseTransport:
    raise AssertionError("a refused fetch must never open a connection")


# ---- pinning and redirects --------------------------------------------------------------------
async def test_the_connection_goes_to_the_resolved_address_with_the_original_host(site):
    # A second lookup would answer 10.0.0.5 (rebinding); the fetch must never ask again.
    resolver = FakeResolver({"example.test": [["127.0.0.1"], ["10.0.0.5"]]})
    page = await fetcher(resolver).fetch(f"http://example.test:{site.port}/page")
    assert resolver.calls == ["example.test"]
    assert site.requests[0][1]["host"] == f"example.test:{site.port}"
    assert page.address == "127.0.0.1" and page.status == 200 and page.title == "Evidence page"
    assert "Version 2.1 fixed the & bug." in page.text and "Release notes" in page.text
    assert "script text" not in page.text and "color:red" not in page.text


async def test_https_pins_the_address_and_keeps_the_name_for_sni_and_host():
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, headers={"Content-Type": "text/plain"}, content=b"ok")

    resolver = FakeResolver({"docs.example.org": [["93.184.216.34"]]})
    page = await SafeFetcher(resolver=resolver, transport_factory=lambda: httpx.MockTransport(handler)).fetch(
        "https://docs.example.org/notes?v=2")
    assert page.text == "ok" and page.final_url == "https://docs.example.org/notes?v=2"
    assert seen[0].url.host == "93.184.216.34" and seen[0].url.path == "/notes"
    assert seen[0].headers["host"] == "docs.example.org"
    assert seen[0].extensions["sni_hostname"] == "docs.example.org"


async def test_every_redirect_hop_is_resolved_once_and_checked_again(site):
    resolver = FakeResolver({"example.test": [["127.0.0.1"]]})
    page = await fetcher(resolver).fetch(f"http://example.test:{site.port}/hop")
    assert resolver.calls == ["example.test", "example.test"]
    assert site.paths() == ["/hop", "/page"]
    assert page.redirects == (f"http://example.test:{site.port}/hop",)
    assert page.final_url == f"http://example.test:{site.port}/page"


async def test_a_name_rebound_to_a_private_address_is_refused_at_the_next_hop(site):
    resolver = FakeResolver({"example.test": [["127.0.0.1"], ["10.0.0.5"]]})
    with pytest.raises(ToolError, match=r"example\.test resolves to 10\.0\.0\.5, a private address"):
        await fetcher(resolver).fetch(f"http://example.test:{site.port}/hop")
    assert site.paths() == ["/hop"]


@pytest.mark.parametrize(("location", "expected"), [
    ("http://internal.test:{port}/page", r"internal\.test resolves to 192\.168\.1\.10, a private address"),
    ("http://169.254.169.254/latest/meta-data/", r"169\.254\.169\.254 is a cloud metadata address"),
    ("http://[::ffff:127.0.0.1]:{port}/page", r"loopback address \(embedded IPv4 127\.0\.0\.1\)"),
    ("file:///etc/passwd", r"scheme 'file' is not allowed"),
])
async def test_a_redirect_to_a_forbidden_target_is_refused_at_the_hop(site, location, expected):
    site.routes["/out"] = (302, {"Location": location.format(port=site.port)}, b"")
    resolver = FakeResolver({"example.test": [["127.0.0.1"]], "internal.test": [["192.168.1.10"]]})
    with pytest.raises(ToolError, match=expected):
        await fetcher(resolver).fetch(f"http://example.test:{site.port}/out")
    assert site.paths() == ["/out"]


async def test_redirects_past_the_limit_are_refused(site):
    resolver = FakeResolver({"example.test": [["127.0.0.1"]]})
    with pytest.raises(ToolError, match="more than 3 redirects"):
        await fetcher(resolver).fetch(f"http://example.test:{site.port}/loop")
    assert site.paths() == ["/loop"] * 4
    with pytest.raises(ToolError, match="more than 0 redirects"):
        await fetcher(resolver, FetchPolicy(max_redirects=0)).fetch(f"http://example.test:{site.port}/hop")


# ---- SSRF refusals --------------------------------------------------------------------------
@pytest.mark.parametrize(("address", "reason"), [
    ("10.0.0.5", "a private address"),
    ("192.168.0.1", "a private address"),
    ("127.0.0.1", "a loopback address"),
    ("::1", "a loopback address"),
    ("169.254.10.1", "a link-local address"),
    ("fe80::1", "a link-local address"),
    ("169.254.169.254", "a cloud metadata address"),
    ("fd00:ec2::254", "a cloud metadata address"),
    ("100.100.100.200", "a cloud metadata address"),
    ("::ffff:10.0.0.5", "a private address (embedded IPv4 10.0.0.5)"),
    ("::ffff:169.254.169.254", "a cloud metadata address"),
    ("2002:a00:5::", "a private address (embedded IPv4 10.0.0.5)"),
    ("224.0.0.1", "a multicast address"),
    ("0.0.0.0", "an unspecified address"),
    ("240.0.0.1", "a reserved address"),
    ("100.64.3.4", "a shared (carrier-grade NAT) address"),
])
async def test_a_name_resolving_to_a_non_public_address_is_refused_before_connecting(address, reason):
    resolver = FakeResolver({"evil.example": [[address]]})
    fetch = SafeFetcher(resolver=resolver, transport_factory=no_network)
    with pytest.raises(ToolError) as caught:
        await fetch.fetch("http://evil.example/x")
    assert f"evil.example resolves to {address}, {reason}" in str(caught.value)
    assert "http://evil.example/x" in str(caught.value)


@pytest.mark.parametrize("url", [
    "http://10.0.0.5/", "http://127.0.0.1:8080/", "http://[::1]/", "http://169.254.169.254/latest/meta-data/",
    "http://[::ffff:7f00:1]/", "http://[fd00:ec2::254]/", "http://0.0.0.0/",
])
async def test_address_literals_are_checked_without_a_lookup(url):
    resolver = FakeResolver({})
    with pytest.raises(ToolError, match="only public addresses can be fetched"):
        await SafeFetcher(resolver=resolver, transport_factory=no_network).fetch(url)
    assert resolver.calls == []


async def test_one_private_answer_among_public_ones_refuses_the_name():
    resolver = FakeResolver({"mixed.example": [["93.184.216.34", "10.1.2.3"]]})
    with pytest.raises(ToolError, match=r"resolves to 10\.1\.2\.3, a private address"):
        await SafeFetcher(resolver=resolver, transport_factory=no_network).fetch("http://mixed.example/")


def test_an_exemption_never_covers_cloud_metadata():
    policy = AddressPolicy(exempt_networks=(__import__("ipaddress").ip_network("169.254.0.0/16"),))
    assert policy.refusal("169.254.10.1") is None
    assert policy.refusal("169.254.169.254") == "a cloud metadata address"
    assert AddressPolicy().refusal("93.184.216.34") is None and AddressPolicy().refusal("2606:4700::1111") is None


@pytest.mark.parametrize(("url", "expected"), [
    ("ftp://example.org/file", "scheme 'ftp' is not allowed"),
    ("file:///etc/passwd", "scheme 'file' is not allowed"),
    ("http://user:pw@example.org/", "credentials in the URL"),
    ("http://[not-an-ip]/", "not a valid URL"),
])
async def test_only_plain_http_and_https_urls_are_fetched(url, expected):
    with pytest.raises(ToolError, match=expected):
        await SafeFetcher(resolver=FakeResolver({}), transport_factory=no_network).fetch(url)


# ---- allowlist and limits -----------------------------------------------------------------------
async def test_the_allowlist_admits_listed_hosts_and_subdomains_only(site):
    resolver = FakeResolver({name: [["127.0.0.1"]] for name in ("example.test", "docs.example.test", "pinned.test")})
    policy = FetchPolicy(allow_hosts=frozenset({"pinned.test"}), allow_suffixes=("example.test",))
    for name in ("example.test", "docs.example.test", "pinned.test"):
        assert (await fetcher(resolver, policy).fetch(f"http://{name}:{site.port}/page")).status == 200
    resolver.calls.clear()
    for name in ("notexample.test", "evil.test", "sub.pinned.test"):
        with pytest.raises(ToolError, match=f"host {name} is not on the allowlist"):
            await fetcher(resolver, policy).fetch(f"http://{name}:{site.port}/page")
    assert resolver.calls == []


async def test_a_redirect_off_the_allowlist_is_refused(site):
    site.routes["/away"] = (302, {"Location": f"http://elsewhere.test:{site.port}/page"}, b"")
    resolver = FakeResolver({"example.test": [["127.0.0.1"]], "elsewhere.test": [["127.0.0.1"]]})
    with pytest.raises(ToolError, match="host elsewhere.test is not on the allowlist"):
        await fetcher(resolver, FetchPolicy(allow_suffixes=("example.test",))).fetch(f"http://example.test:{site.port}/away")
    assert site.paths() == ["/away"]


async def test_bodies_are_cut_at_the_byte_cap_even_when_compressed(site):
    resolver = FakeResolver({"example.test": [["127.0.0.1"]]})
    policy = FetchPolicy(max_bytes=1000)
    big = await fetcher(resolver, policy).fetch(f"http://example.test:{site.port}/big")
    assert big.truncated and big.text == "a" * 1000
    bomb = await fetcher(resolver, policy).fetch(f"http://example.test:{site.port}/bomb")
    assert bomb.truncated and bomb.text == "z" * 1000
    short = await fetcher(resolver, FetchPolicy(max_text_chars=10)).fetch(f"http://example.test:{site.port}/json")
    assert short.truncated and short.text == '{"version"' and "TRUNCATED" in short.render()


@pytest.mark.parametrize(("path", "expected"), [
    ("/binary", "content type 'application/octet-stream' is not readable"),
    ("/untyped", r"content type '\(none\)' is not readable"),
    ("/missing", "the server answered HTTP 404"),
])
async def test_unreadable_answers_are_refused(site, path, expected):
    resolver = FakeResolver({"example.test": [["127.0.0.1"]]})
    with pytest.raises(ToolError, match=expected):
        await fetcher(resolver).fetch(f"http://example.test:{site.port}{path}")


async def test_fetches_per_validator_trace_are_capped(site):
    resolver = FakeResolver({"example.test": [["127.0.0.1"]]})
    fetch = fetcher(resolver, FetchPolicy(max_fetches=3), fetches_done=1)
    for _ in range(2):
        await fetch.fetch(f"http://example.test:{site.port}/json")
    with pytest.raises(ToolError, match=r"already made 3 fetches \(limit 3\)"):
        await fetch.fetch(f"http://example.test:{site.port}/json")
    assert len(site.requests) == 2


# ---- tree budget --------------------------------------------------------------------------------
async def budget_root(store: InMemoryTraceStore, **limits) -> tuple[Trace, ResourceBudgetController]:
    budget = ResourceBudget(**limits)
    root = Trace.create(task="root", context={
        "agent_mode": "recursive", "root_trace_id": None, "resource_budget": budget.model_dump(),
        "validator_search": {"provider": "serper", "enabled": True},
    })
    root.lineage.root_trace_id = root.trace_id
    await store.create_trace(root)
    controller = ResourceBudgetController(store=store, root_trace_id=root.trace_id, budget=budget, lock=asyncio.Lock())
    await controller.initialize()
    return root, controller


async def test_each_fetch_counts_one_tool_call_and_its_text_as_material(site):
    store = InMemoryTraceStore()
    _, controller = await budget_root(store)
    resolver = FakeResolver({"example.test": [["127.0.0.1"]]})
    page = await fetcher(resolver, meter=controller).fetch(f"http://example.test:{site.port}/page")
    usage = await controller.usage()
    assert usage.validation_tool_calls == 1 and usage.validation_material_chars == len(page.text) > 0
    with pytest.raises(ToolError):
        await fetcher(resolver, meter=controller).fetch("http://10.0.0.5/")
    assert (await controller.usage()).validation_tool_calls == 2  # a refused attempt is still a tool call


async def test_the_budget_refuses_a_fetch_before_any_request(site):
    store = InMemoryTraceStore()
    _, controller = await budget_root(store, max_validation_tool_calls=1)
    resolver = FakeResolver({"example.test": [["127.0.0.1"]]})
    await fetcher(resolver, meter=controller).fetch(f"http://example.test:{site.port}/json")
    with pytest.raises(ToolError, match="refused by the tree budget.*validation_tool_calls"):
        await fetcher(resolver, meter=controller).fetch(f"http://example.test:{site.port}/json")
    assert len(site.requests) == 1


async def test_the_budget_refuses_material_past_its_limit(site):
    store = InMemoryTraceStore()
    _, controller = await budget_root(store, max_validation_material_chars=10)
    resolver = FakeResolver({"example.test": [["127.0.0.1"]]})
    with pytest.raises(ToolError, match="validation_material_chars"):
        await fetcher(resolver, meter=controller).fetch(f"http://example.test:{site.port}/page")
    usage = await controller.usage()
    assert usage.validation_tool_calls == 1 and usage.validation_material_chars == 0 and usage.refusals == 1


# ---- serper ----------------------------------------------------------------------------------------
async def test_serper_posts_the_query_with_the_key_and_parses_organic_results():
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={
            "searchParameters": {"q": "cyber agent"},
            "organic": [
                {"title": "First", "link": "https://one.example/a", "snippet": "about a", "position": 1},
                {"title": "No link"},
                {"link": "https://two.example/b"},
                {"title": "Third", "link": "https://three.example/c"},
            ],
            "credits": 2,
        })

    search = SerperSearch("secret-key", transport=httpx.MockTransport(handler), usd_per_credit=0.0005)
    results = await search.search("cyber agent", max_results=2)
    assert seen[0].method == "POST" and str(seen[0].url) == "https://google.serper.dev/search"
    assert seen[0].headers["x-api-key"] == "secret-key" and json.loads(seen[0].content) == {"q": "cyber agent"}
    assert results.hits == (SearchHit(title="First", url="https://one.example/a", snippet="about a"),
                            SearchHit(title="https://two.example/b", url="https://two.example/b"))
    assert results.cost_usd == pytest.approx(0.001)
    assert "1. First" in results.render() and "https://two.example/b" in results.render()


async def test_a_serper_failure_is_a_tool_error_that_never_shows_the_key():
    search = SerperSearch("secret-key", transport=httpx.MockTransport(
        lambda request: httpx.Response(403, json={"message": "Unauthorized."})))
    with pytest.raises(ToolError, match="HTTP 403") as caught:
        await search.search("q")
    assert "secret-key" not in str(caught.value)


def test_search_is_disabled_unless_serper_and_its_key_are_configured():
    assert search_from_setting(None, {"SERPER_API_KEY": "k"}) is None
    assert search_from_setting({"provider": None, "enabled": False}, {"SERPER_API_KEY": "k"}) is None
    assert search_from_setting({"provider": "serper", "enabled": True}, {}) is None
    assert isinstance(search_from_setting({"provider": "serper", "enabled": True}, {"SERPER_API_KEY": "k"}), SerperSearch)


# ---- the tools and their rights -------------------------------------------------------------------
class FakeSearch:
    provider = "fake"

    def __init__(self) -> None:
        self.queries: list[str] = []

    async def search(self, query: str, *, max_results: int = 5) -> SearchResults:
        self.queries.append(query)
        return SearchResults(query=query, hits=(SearchHit(title="Hit", url="https://hit.example/"),), cost_usd=0.25)


async def validator_of(store: InMemoryTraceStore, root: Trace, *, web: bool) -> Trace:
    trace = Trace.create(trace_id=f"{root.trace_id}@validator-20250101000000-1", task="validate", parent_trace_id=root.trace_id,
                         agent_type="validator", context={
                             "agent_mode": "recursive", "root_trace_id": root.trace_id, "created_by_tool": "validator",
                             "validation_scope": "root", "web_evidence_enabled": web, "tool_snapshot": sorted(VALIDATOR_TOOLS),
                         })
    await store.create_trace(trace)
    return trace


def tool_context(store: InMemoryTraceStore, trace: Trace, registry: ToolRegistry) -> ToolContext:
    return ToolContext(trace_id=trace.trace_id, store=store, runner=AgentRunner(trace_store=store, tool_registry=registry))


WEB = frozenset({"web_search", "fetch_page"})


def test_validators_get_web_tools_only_when_their_tree_enabled_web_evidence():
    registered = ["read_trajectory", "read_file", "submit_validation", "web_search", "fetch_page", "bash_command"]
    base = {"agent_mode": "recursive", "created_by_tool": "validator", "tool_snapshot": sorted(VALIDATOR_TOOLS)}
    parent = "00000000-0000-4000-8000-000000000000"
    enabled = Trace.create(task="v", parent_trace_id=parent, context={**base, "web_evidence_enabled": True})
    disabled = Trace.create(task="v", parent_trace_id=parent, context=base)
    assert WEB <= runtime_tool_names(registered, None, enabled)
    assert not WEB & runtime_tool_names(registered, None, disabled)
    assert "bash_command" not in runtime_tool_names(registered, None, enabled)
    # On a root the same keys can only come from a custom context: they grant nothing.
    forged_root = Trace.create(task="v", context={**base, "web_evidence_enabled": True})
    assert not WEB & runtime_tool_names(registered, None, forged_root)


async def test_web_search_without_a_provider_says_search_is_disabled(monkeypatch):
    monkeypatch.delenv("SERPER_API_KEY", raising=False)
    store = InMemoryTraceStore()
    root, controller = await budget_root(store)
    validator = await validator_of(store, root, web=True)
    registry = register_web_tools(ToolRegistry())
    result = await registry.execute("web_search", {"query": "x"}, allowed=WEB, context=tool_context(store, validator, registry))
    assert result.is_error and "web search is disabled" in result.content and "unknown" in result.content
    assert (await controller.usage()).validation_tool_calls == 0


async def test_web_tools_refuse_a_validator_whose_tree_did_not_enable_them():
    store = InMemoryTraceStore()
    root, _ = await budget_root(store)
    validator = await validator_of(store, root, web=False)
    registry = register_web_tools(ToolRegistry(), search=FakeSearch())
    context = tool_context(store, validator, registry)
    for name, arguments in (("web_search", {"query": "x"}), ("fetch_page", {"url": "https://example.org/"})):
        result = await registry.execute(name, arguments, allowed=WEB, context=context)
        assert result.is_error and "web evidence is disabled" in result.content


async def test_web_search_books_the_call_its_material_and_the_provider_cost():
    store = InMemoryTraceStore()
    root, controller = await budget_root(store)
    validator = await validator_of(store, root, web=True)
    search = FakeSearch()
    registry = register_web_tools(ToolRegistry(), search=search)
    result = await registry.execute("web_search", {"query": "release 2.1"}, allowed=WEB,
                                    context=tool_context(store, validator, registry))
    usage = await controller.usage()
    assert not result.is_error and "https://hit.example/" in result.content and search.queries == ["release 2.1"]
    assert result.metadata[VALIDATION_METERED] is True
    assert (usage.validation_tool_calls, usage.validation_material_chars) == (1, len(result.content))
    assert usage.cost_usd == pytest.approx(0.25)


async def test_fetch_page_books_its_work_and_counts_earlier_fetches_of_the_trace(site):
    store = InMemoryTraceStore()
    root, controller = await budget_root(store)
    validator = await validator_of(store, root, web=True)
    resolver = FakeResolver({"example.test": [["127.0.0.1"]]})
    registry = register_web_tools(ToolRegistry(), fetcher_factory=lambda **kw: fetcher(resolver, FetchPolicy(max_fetches=2), **kw))
    context = tool_context(store, validator, registry)
    result = await registry.execute("fetch_page", {"url": f"http://example.test:{site.port}/page"}, allowed=WEB, context=context)
    assert not result.is_error and "Version 2.1" in result.content and result.metadata[VALIDATION_METERED] is True
    usage = await controller.usage()
    assert usage.validation_tool_calls == 1 and usage.validation_material_chars == result.metadata["chars"]
    for index in range(2):  # two fetch_page results persisted in the trajectory reach the cap
        await store.add_message(Message.create(trace_id=validator.trace_id, role="tool", tool_call_id=f"c{index}",
                                               tool_name="fetch_page", content="earlier"))
    refused = await registry.execute("fetch_page", {"url": f"http://example.test:{site.port}/page"}, allowed=WEB, context=context)
    assert refused.is_error and "limit 2" in refused.content and refused.metadata[VALIDATION_METERED] is True
    assert len(site.requests) == 1


async def test_fetch_page_refusals_reach_the_model_as_errors_naming_the_address():
    store = InMemoryTraceStore()
    root, _ = await budget_root(store)
    validator = await validator_of(store, root, web=True)
    resolver = FakeResolver({"intranet.example": [["10.0.0.5"]]})
    registry = register_web_tools(ToolRegistry(), fetcher_factory=lambda **kw: SafeFetcher(
        resolver=resolver, transport_factory=no_network, **kw))
    result = await registry.execute("fetch_page", {"url": "http://intranet.example/"}, allowed=WEB,
                                    context=tool_context(store, validator, registry))
    assert result.is_error and "intranet.example resolves to 10.0.0.5, a private address" in result.content


# ---- through the runner: a root validator reads a page ----------------------------------------------
def validator_reading(url: str) -> FunctionModel:
    """The root answers at once; its validator fetches `url` when offered fetch_page, then passes."""

    def answer(messages: list[dict], tools: list[dict] | None) -> LLMResponse:
        names = tool_names(tools)
        if "submit_validation" not in names:
            return LLMResponse(content="the answer")
        results = [str(m["content"]) for m in messages if m.get("role") == "tool"]
        if "fetch_page" in names and not results:
            return LLMResponse(tool_calls=[ToolCall(id="fetch1", name="fetch_page", arguments={"url": url})])
        evidence = results[0][:200] if results else "no web evidence"
        verdict = "pass" if results and "Version 2.1" in results[0] else "unknown"
        return LLMResponse(tool_calls=[ToolCall(id="submit1", name="submit_validation", arguments={
            "verdicts": [{"criterion": 1, "verdict": verdict, "evidence": evidence}], "summary": evidence})])

    return FunctionModel(answer)


async def run_tree_with_web(site: LocalSite, monkeypatch, *, enabled: bool) -> tuple[FunctionModel, InMemoryTraceStore, Trace]:
    if enabled:
        monkeypatch.setenv("AGENT_VALIDATOR_SEARCH_PROVIDER", "serper")
        monkeypatch.setenv("SERPER_API_KEY", "test-key")
    resolver = FakeResolver({"example.test": [["127.0.0.1"]]})
    # The default tools, with the web tools (if the default already has them) re-bound to the local site.
    base = ToolRegistry(spec for spec in default_registry() if spec.name not in WEB)
    registry = register_web_tools(base, fetcher_factory=lambda **kw: fetcher(resolver, **kw))
    model = validator_reading(f"http://example.test:{site.port}/page")
    runner, store = make_runner(model, registry=registry)
    result = await runner.run_result(TASK, recursive_config())
    return model, store, result.trace


async def test_a_root_validator_of_an_enabled_tree_reads_a_page_as_evidence(site, monkeypatch):
    model, store, root = await run_tree_with_web(site, monkeypatch, enabled=True)
    assert root.root_setup.validator_search.model_dump() == {"provider": "serper", "enabled": True}
    offered = [tool_names(request.tools) for request in model.requests]
    validator_offers = [names for names in offered if "submit_validation" in names]
    assert validator_offers and all(WEB <= names for names in validator_offers)
    assert not any(WEB & names for names in offered if "submit_validation" not in names)
    validators = [t for t in await store.list_traces(limit=None) if t.agent_type == "validator"]
    pages = [m for v in validators for m in await store.get_trace_messages(v.trace_id) if m.tool_name == "fetch_page"]
    assert len(pages) == 1 and "Version 2.1 fixed the & bug." in pages[0].text
    assert site.paths() == ["/page"]
    validations = (await store.get_trace(root.trace_id)).protocol.model_dump(mode="json")["validations"]
    assert [v["verdict"] for v in validations] == ["pass"] and "Version 2.1" in validations[0]["criteria"][0]["evidence"]
    usage = await store.get_resource_usage(root.trace_id)
    assert usage.validation_tool_calls >= 1 and usage.validation_material_chars >= pages[0].metadata["chars"]


async def test_the_runner_does_not_count_a_metered_web_call_twice(site, monkeypatch):
    _, store, root = await run_tree_with_web(site, monkeypatch, enabled=True)
    validators = [t for t in await store.list_traces(limit=None) if t.agent_type == "validator"]
    page = next(m for m in await store.get_trace_messages(validators[0].trace_id) if m.tool_name == "fetch_page")
    usage = await store.get_resource_usage(root.trace_id)
    assert (usage.validation_tool_calls, usage.validation_material_chars) == (1, page.metadata["chars"])


async def test_a_tree_started_without_search_gives_its_validators_no_web_tools(site, monkeypatch):
    model, store, root = await run_tree_with_web(site, monkeypatch, enabled=False)
    assert root.root_setup.validator_search.model_dump() == {"provider": None, "enabled": False}
    validator_offers = [tool_names(r.tools) for r in model.requests if "submit_validation" in tool_names(r.tools)]
    assert validator_offers and not any(WEB & names for names in validator_offers)
    assert site.requests == []


# ---- exports and docs ---------------------------------------------------------------------------------
def test_exports_are_sorted_and_the_docs_point_at_real_symbols():
    for module in ("cyber_agent.protocol.web_evidence", "cyber_agent.protocol.web_tools"):
        names = importlib.import_module(module).__all__
        assert names == sorted(names) and all(hasattr(importlib.import_module(module), n) for n in names)
    root = Path(__file__).resolve().parents[2]
    references = re.findall(r"`(cyber_agent/[\w/]+\.py):([\w.]+)`", (root / "docs" / "validator-web.md").read_text())
    assert len(references) > 10
    for file, symbol in references:
        target = importlib.import_module(file[:-3].replace("/", "."))
        for part in symbol.split("."):
            assert hasattr(target, part), f"{file}:{symbol}"
            target = getattr(target, part)
