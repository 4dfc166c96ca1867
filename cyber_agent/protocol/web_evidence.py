"""Web evidence for validators (SPEC A11): a search adapter and a page fetcher that refuses SSRF.

Disabled by default. A tree gets web evidence only when its root froze
`validator_search.enabled` (`AGENT_VALIDATOR_SEARCH_PROVIDER=serper` plus `SERPER_API_KEY`);
otherwise `search_from_setting` returns None and validators answer `unknown` for evidence they
cannot get.

`SafeFetcher` reads one public page for a validator:

- http and https only, no credentials in the URL, an optional host allowlist;
- it resolves the host itself and refuses any non-public answer (`AddressPolicy`), then connects
  to that very address while sending the original Host header and TLS SNI (DNS pinning), so a
  second resolution (DNS rebinding) cannot move the connection;
- redirects are followed by hand and every hop is checked again from scratch;
- body bytes (after decompression), content types, text length and fetches per validator trace
  are capped;
- every fetch attempt counts as one validation tool call, and the text it hands over as
  material, against the tree budget (`ValidationMeter`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import re
import socket
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any, Protocol

import httpx

from cyber_agent.errors import BudgetExceededError, ConfigurationError, ToolError

__all__ = [
    "AddressPolicy",
    "CLOUD_METADATA_ADDRESSES",
    "DEFAULT_CONTENT_TYPES",
    "FetchPolicy",
    "FetchedPage",
    "Resolver",
    "SERPER_URL",
    "SafeFetcher",
    "SearchAdapter",
    "SearchHit",
    "SearchResults",
    "SerperSearch",
    "UNKNOWN_HINT",
    "VALIDATION_METERED",
    "ValidationMeter",
    "html_to_text",
    "search_from_setting",
    "system_resolver",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""Resolve (host, port) to IP address strings; injected so tests never touch real DNS."""

SERPER_URL = "https://google.serper.dev/search"
VALIDATION_METERED = "validation_metered"
"""ToolResult metadata key: the tool already booked this call against the tree budget."""
UNKNOWN_HINT = "judge criteria that need this evidence as unknown"
"""Appended to refusals so the validator answers `unknown` rather than guessing."""

CLOUD_METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean
    "169.254.170.2",  # AWS ECS task metadata
    "fd00:ec2::254",  # AWS IMDS over IPv6
    "100.100.100.200",  # Alibaba Cloud
    "192.0.0.192",  # Oracle Cloud
))
"""Refused always, even inside an `AddressPolicy.exempt_networks` range."""

DEFAULT_CONTENT_TYPES = (
    "text/html", "application/xhtml+xml", "text/plain", "text/markdown", "text/csv",
    "application/json", "application/xml", "text/xml",
)
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_SHARED_NAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class ValidationMeter(Protocol):
    """What the fetcher books work against; `ResourceBudgetController` is one."""

    async def record_validation_work(self, *, tool_calls: int = 0, material_chars: int = 0, cost_usd: float = 0.0) -> None:
        """Count validator work; raise BudgetExceededError past a limit."""


# ---- search -----------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class SearchHit:
    """One organic search result."""

    title: str
    """Title of the page."""
    url: str
    """Address of the page."""
    snippet: str = ""
    """Provider's excerpt: a lead, not evidence."""


@dataclass(frozen=True, kw_only=True)
class SearchResults:
    """What one search returned and what the provider said it cost."""

    query: str
    """The query as sent."""
    hits: tuple[SearchHit, ...]
    """Organic results, best first."""
    cost_usd: float = 0.0
    """Cost booked into the tree budget (0 when the provider reports none)."""

    def render(self) -> str:
        """Render the hits as numbered text for the validator."""
        if not self.hits:
            return f"No results for {self.query!r}."
        lines = [f"Results for {self.query!r} (snippets are leads; read a page with fetch_page before relying on it):"]
        for index, hit in enumerate(self.hits, start=1):
            lines += [f"{index}. {hit.title}", f"   {hit.url}"] + ([f"   {hit.snippet}"] if hit.snippet else [])
        return "\n".join(lines)


class SearchAdapter(Protocol):
    """A web-search provider."""

    provider: str

    async def search(self, query: str, *, max_results: int = 5) -> SearchResults:
        """Return up to `max_results` hits; raise ToolError naming the failure."""


class SerperSearch:
    """Search through serper.dev (`POST /search` with an `X-API-KEY` header).

    Serper reports credits, not money: `usd_per_credit` converts them into tree cost (an
    estimate; set it to your plan's price). Pass `transport=` or `client=` to test offline.
    """

    provider = "serper"

    def __init__(
        self, api_key: str, *, endpoint: str = SERPER_URL, transport: httpx.AsyncBaseTransport | None = None,
        client: httpx.AsyncClient | None = None, timeout_seconds: float = 15.0, usd_per_credit: float = 0.001,
    ) -> None:
        if not api_key:
            raise ConfigurationError("SERPER_API_KEY", "is empty; set it or leave web search disabled")
        self._api_key = api_key
        self.endpoint = endpoint
        self._transport = transport
        self._client = client
        self.timeout_seconds = timeout_seconds
        self.usd_per_credit = usd_per_credit

    async def search(self, query: str, *, max_results: int = 5) -> SearchResults:
        """POST the query and parse the organic results."""
        headers = {"X-API-KEY": self._api_key, "Content-Type": "application/json"}
        try:
            if self._client is not None:
                response = await self._client.post(self.endpoint, json={"q": query}, headers=headers)
            else:
                async with httpx.AsyncClient(transport=self._transport, timeout=self.timeout_seconds) as client:
                    response = await client.post(self.endpoint, json={"q": query}, headers=headers)
        except httpx.HTTPError as exc:
            raise ToolError(f"web search for {query!r} failed: {type(exc).__name__}: {exc}; {UNKNOWN_HINT}") from None
        if response.status_code != 200:
            raise ToolError(
                f"web search for {query!r} failed: serper answered HTTP {response.status_code}: "
                f"{response.text[:200]}; {UNKNOWN_HINT}"
            )
        try:
            payload = response.json()
        except ValueError:
            raise ToolError(f"web search for {query!r} failed: serper answered with a body that is not JSON") from None
        return self.parse(query, payload, max_results=max_results)

    def parse(self, query: str, payload: Any, *, max_results: int = 5) -> SearchResults:
        """Turn a serper response body into SearchResults (entries without a link are skipped)."""
        if not isinstance(payload, Mapping):
            raise ToolError(f"web search for {query!r} failed: serper answered {type(payload).__name__}, not an object")
        hits = []
        for entry in payload.get("organic") or []:
            if isinstance(entry, Mapping) and isinstance(entry.get("link"), str) and entry["link"]:
                hits.append(SearchHit(
                    title=str(entry.get("title") or entry["link"]), url=entry["link"], snippet=str(entry.get("snippet") or ""),
                ))
        credits = payload.get("credits")
        cost = float(credits) * self.usd_per_credit if isinstance(credits, int | float) and credits > 0 else 0.0
        return SearchResults(query=query, hits=tuple(hits[:max_results]), cost_usd=cost)


def search_from_setting(setting: Mapping[str, Any] | None, environ: Mapping[str, str] | None = None) -> SearchAdapter | None:
    """Return the adapter a root's frozen `validator_search` setting allows, or None (search disabled)."""
    env = os.environ if environ is None else environ
    if not setting or not setting.get("enabled") or setting.get("provider") != "serper":
        return None
    key = env.get("SERPER_API_KEY", "").strip()
    return SerperSearch(key) if key else None


# ---- addresses --------------------------------------------------------------------------
def _embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    if not isinstance(ip, ipaddress.IPv6Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def _address_class(ip: IPAddress) -> str | None:
    """Why `ip` is not a public unicast address, or None when it is one."""
    if ip in CLOUD_METADATA_ADDRESSES:
        return "a cloud metadata address"
    embedded = _embedded_ipv4(ip)
    if embedded is not None and (inner := _address_class(embedded)) is not None:
        return f"{inner} (embedded IPv4 {embedded})"
    for flag, label in (("is_unspecified", "an unspecified"), ("is_loopback", "a loopback"),
                        ("is_link_local", "a link-local"), ("is_multicast", "a multicast"),
                        ("is_reserved", "a reserved"), ("is_private", "a private")):
        if getattr(ip, flag):
            return f"{label} address"
    if ip in _SHARED_NAT:
        return "a shared (carrier-grade NAT) address"
    return None if ip.is_global else "a non-public address"


@dataclass(frozen=True, kw_only=True)
class AddressPolicy:
    """Which resolved addresses a fetch may connect to: public unicast ones only, unless exempted."""

    exempt_networks: tuple[IPNetwork, ...] = ()
    """Non-public networks allowed anyway (tests only); cloud metadata addresses stay refused."""

    @classmethod
    def allowing_loopback_for_tests(cls) -> AddressPolicy:
        """A policy that also allows 127.0.0.0/8 and ::1, for tests against a local server."""
        return cls(exempt_networks=(ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128")))

    def refusal(self, address: str) -> str | None:
        """Return why `address` is refused ("a private address", ...), or None when it may be used."""
        ip = ipaddress.ip_address(address.split("%", 1)[0])
        reason = _address_class(ip)
        if reason is None or CLOUD_METADATA_ADDRESSES & {ip, _embedded_ipv4(ip)}:
            return reason
        return None if any(ip in net for net in self.exempt_networks) else reason


async def system_resolver(host: str, port: int) -> list[str]:
    """Resolve `host` with the event loop's getaddrinfo; return every address it gave."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


# ---- fetching ---------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class FetchPolicy:
    """Limits of `SafeFetcher`; the defaults suit a validator reading a few public pages."""

    allow_hosts: frozenset[str] = frozenset()
    """Hosts allowed exactly; with `allow_suffixes` empty too, any public host is allowed."""
    allow_suffixes: tuple[str, ...] = ()
    """Domains allowed with their subdomains ("example.org" allows "docs.example.org")."""
    max_redirects: int = 3
    """Redirect hops followed before the fetch is refused."""
    max_bytes: int = 1_000_000
    """Body bytes read (after decompression); the rest is cut and the page marked truncated."""
    max_text_chars: int = 50_000
    """Characters of extracted text handed to the validator."""
    max_fetches: int = 10
    """Fetch attempts per validator trace (refused ones included)."""
    content_types: tuple[str, ...] = DEFAULT_CONTENT_TYPES
    """Media types that may be read."""
    timeout_seconds: float = 20.0
    """Wall time of one whole fetch, redirects included."""
    user_agent: str = "cyber-agent-validator/0.1"
    """User-Agent header sent."""

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_text_chars", "max_fetches", "timeout_seconds"):
            if not getattr(self, name) > 0:
                raise ConfigurationError(f"FetchPolicy.{name}", f"must be positive, got {getattr(self, name)!r}")
        if self.max_redirects < 0:
            raise ConfigurationError("FetchPolicy.max_redirects", f"must be 0 or more, got {self.max_redirects!r}")

    def host_allowed(self, host: str) -> bool:
        """True when `host` passes the allowlist."""
        host = host.lower().rstrip(".")
        if not self.allow_hosts and not self.allow_suffixes:
            return True
        if host in {h.lower().rstrip(".") for h in self.allow_hosts}:
            return True
        suffixes = [s.lower().strip(".") for s in self.allow_suffixes]
        return any(host == s or host.endswith("." + s) for s in suffixes)


@dataclass(frozen=True, kw_only=True)
class FetchedPage:
    """A page as a validator reads it."""

    url: str
    """The URL asked for."""
    final_url: str
    """The URL of the last hop."""
    address: str
    """The IP address the last hop connected to."""
    status: int
    """HTTP status of the last hop."""
    content_type: str
    """Media type of the body."""
    title: str
    """HTML title ("" for other types)."""
    text: str
    """Extracted text (tags, scripts and styles removed)."""
    truncated: bool = False
    """The body or the text was cut at a limit."""
    redirects: tuple[str, ...] = ()
    """URLs that redirected, in order."""

    def render(self) -> str:
        """Render the page as the tool result text."""
        head = [f"URL: {self.final_url}" + (f" (redirected from {self.url})" if self.redirects else "")]
        head.append(f"Status: {self.status}; type: {self.content_type}; {len(self.text)} chars"
                    + ("; TRUNCATED at the size limit" if self.truncated else ""))
        if self.title:
            head.append(f"Title: {self.title}")
        return "\n".join(head) + "\n\n" + self.text


@dataclass(frozen=True)
class _Body:
    status: int
    content_type: str
    data: bytes
    charset: str | None
    truncated: bool


class SafeFetcher:
    """Fetch public pages for one validator trace; see the module docstring for the rules."""

    def __init__(
        self, policy: FetchPolicy | None = None, *, address_policy: AddressPolicy | None = None,
        resolver: Resolver | None = None, transport_factory: Callable[[], httpx.AsyncBaseTransport] | None = None,
        meter: ValidationMeter | None = None, fetches_done: int = 0,
    ) -> None:
        self.policy = policy or FetchPolicy()
        self.address_policy = address_policy or AddressPolicy()
        self._resolver = resolver or system_resolver
        # A fresh transport per hop: a pooled TLS connection must never serve another hostname.
        self._transport_factory = transport_factory or (lambda: httpx.AsyncHTTPTransport(retries=0))
        self._meter = meter
        self._fetches = fetches_done

    @property
    def fetches_done(self) -> int:
        """Fetch attempts counted for this validator trace so far."""
        return self._fetches

    async def fetch(self, url: str) -> FetchedPage:
        """Fetch `url` under the policy; raise ToolError naming the URL and the reason on refusal."""
        await self._book(url, tool_calls=1)
        if self._fetches >= self.policy.max_fetches:
            raise ToolError(f"fetch of {url} refused: this validator already made {self._fetches} fetches "
                            f"(limit {self.policy.max_fetches}); {UNKNOWN_HINT}")
        self._fetches += 1
        try:
            async with asyncio.timeout(self.policy.timeout_seconds):
                page = await self._follow(url)
        except TimeoutError:
            raise ToolError(f"fetch of {url} timed out after {self.policy.timeout_seconds}s") from None
        await self._book(url, material_chars=len(page.text))
        return page

    async def _book(self, url: str, **work: int) -> None:
        if self._meter is None:
            return
        try:
            await self._meter.record_validation_work(**work)
        except BudgetExceededError as exc:
            raise ToolError(f"fetch of {url} refused by the tree budget ({exc}); {UNKNOWN_HINT}") from None

    async def _follow(self, url: str) -> FetchedPage:
        try:
            current = httpx.URL(url)
        except (httpx.InvalidURL, TypeError) as exc:
            raise ToolError(f"fetch of {url!r} refused: not a valid URL ({exc})") from None
        redirects: list[str] = []
        while True:
            host, port = self._check_target(current)
            address = await self._resolve(current, host, port)
            outcome = await self._hop(current, host, address)
            if isinstance(outcome, httpx.URL):
                if len(redirects) >= self.policy.max_redirects:
                    raise ToolError(f"fetch of {url} refused: more than {self.policy.max_redirects} redirects "
                                    f"(hop {current} redirects to {outcome})")
                redirects.append(str(current))
                current = outcome
                continue
            title, text = _decode_text(outcome)
            truncated = outcome.truncated or len(text) > self.policy.max_text_chars
            return FetchedPage(
                url=url, final_url=str(current), address=address, status=outcome.status,
                content_type=outcome.content_type, title=title, text=text[: self.policy.max_text_chars],
                truncated=truncated, redirects=tuple(redirects),
            )

    def _check_target(self, url: httpx.URL) -> tuple[str, int]:
        if url.scheme not in ("http", "https"):
            raise ToolError(f"fetch of {url} refused: scheme {url.scheme!r} is not allowed; only http and https")
        if url.userinfo:
            raise ToolError(f"fetch of {url} refused: credentials in the URL are not allowed")
        host = url.raw_host.decode("ascii").lower().rstrip(".")
        if not host:
            raise ToolError(f"fetch of {url} refused: the URL has no host")
        if not self.policy.host_allowed(host):
            allowed = sorted(self.policy.allow_hosts) + [f"*.{s}" for s in self.policy.allow_suffixes]
            raise ToolError(f"fetch of {url} refused: host {host} is not on the allowlist ({', '.join(allowed)})")
        return host, url.port or (443 if url.scheme == "https" else 80)

    async def _resolve(self, url: httpx.URL, host: str, port: int) -> str:
        """Resolve once per hop, refuse if any answer is non-public, and return the address to pin."""
        if _is_ip(host):
            reason = self.address_policy.refusal(host)
            if reason is not None:
                raise ToolError(f"fetch of {url} refused: {host} is {reason}; only public addresses can be fetched")
            return host
        try:
            addresses = [str(a).split("%", 1)[0] for a in await self._resolver(host, port)]
            for address in addresses:
                ipaddress.ip_address(address)
        except (OSError, ValueError) as exc:
            raise ToolError(f"fetch of {url} refused: cannot resolve {host} ({exc})") from None
        if not addresses:
            raise ToolError(f"fetch of {url} refused: {host} resolves to no address")
        for address in addresses:
            reason = self.address_policy.refusal(address)
            if reason is not None:
                raise ToolError(f"fetch of {url} refused: {host} resolves to {address}, {reason}; "
                                "only public addresses can be fetched")
        return addresses[0]

    async def _hop(self, url: httpx.URL, host: str, address: str) -> httpx.URL | _Body:
        """One request to the pinned address; a redirect returns its absolute target."""
        host_header = f"[{host}]" if ":" in host else host
        if url.port is not None:
            host_header += f":{url.port}"
        headers = {"Host": host_header, "User-Agent": self.policy.user_agent, "Accept-Encoding": "gzip, deflate, identity",
                   "Accept": ", ".join(self.policy.content_types)}
        # httpx verifies the certificate against sni_hostname, so TLS still proves the name.
        extensions = {"sni_hostname": host} if url.scheme == "https" and not _is_ip(host) else {}
        async with httpx.AsyncClient(transport=self._transport_factory(), follow_redirects=False, trust_env=False,
                                     timeout=self.policy.timeout_seconds) as client:
            try:
                request = client.build_request("GET", url.copy_with(host=address), headers=headers, extensions=extensions)
                response = await client.send(request, stream=True)
            except httpx.HTTPError as exc:
                raise ToolError(f"fetch of {url} ({host} at {address}) failed: {type(exc).__name__}: {exc}") from None
            try:
                if response.is_redirect:
                    try:
                        return url.join(response.headers["location"])
                    except httpx.InvalidURL as exc:
                        raise ToolError(f"fetch of {url} failed: invalid redirect location ({exc})") from None
                if not 200 <= response.status_code < 300:
                    raise ToolError(f"fetch of {url} failed: the server answered HTTP {response.status_code}")
                media = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
                if media not in self.policy.content_types:
                    raise ToolError(f"fetch of {url} refused: content type {media or '(none)'!r} is not readable; "
                                    f"allowed: {', '.join(self.policy.content_types)}")
                data, truncated = await self._read_capped(url, response)
                return _Body(response.status_code, media, data, response.charset_encoding, truncated)
            except httpx.HTTPError as exc:
                raise ToolError(f"fetch of {url} failed while reading: {type(exc).__name__}: {exc}") from None
            finally:
                await response.aclose()

    async def _read_capped(self, url: httpx.URL, response: httpx.Response) -> tuple[bytes, bool]:
        """Read at most max_bytes of decoded body; decompress by hand so a small bomb cannot grow past the cap."""
        encoding = response.headers.get("content-encoding", "").strip().lower()
        if encoding in ("", "identity"):
            decoder = None
        elif encoding in ("gzip", "x-gzip", "deflate"):
            decoder = zlib.decompressobj(zlib.MAX_WBITS | (16 if "gzip" in encoding else 0))
        else:
            raise ToolError(f"fetch of {url} refused: content encoding {encoding!r} is not supported")
        chunks = response.aiter_raw()
        if response.is_stream_consumed:  # an in-memory response (MockTransport) is already read and decoded
            decoder, chunks = None, _once(response.content)
        body = bytearray()
        async for chunk in chunks:
            room = self.policy.max_bytes - len(body)
            try:
                data = decoder.decompress(chunk, room + 1) if decoder else chunk
            except zlib.error as exc:
                raise ToolError(f"fetch of {url} failed: corrupt {encoding} body ({exc})") from None
            body += data[:room]
            if len(data) > room:
                return bytes(body), True
        return bytes(body), False


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _decode_text(body: _Body) -> tuple[str, str]:
    try:
        raw = body.data.decode(body.charset or "utf-8", errors="replace")
    except LookupError:
        raw = body.data.decode("utf-8", errors="replace")
    return html_to_text(raw) if body.content_type in _HTML_TYPES else ("", raw)


# ---- HTML to text -----------------------------------------------------------------------
_SKIP_TAGS = frozenset({"script", "style", "noscript", "template", "svg", "iframe", "object", "canvas"})
_BLOCK_TAGS = frozenset({
    "p", "div", "br", "li", "ul", "ol", "tr", "table", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article",
    "header", "footer", "main", "nav", "aside", "pre", "blockquote", "hr", "dd", "dt", "dl", "form", "figure",
    "figcaption", "title", "body", "html",
})


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title: list[str] = []
        self._skip = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP_TAGS:
            self._skip += 1
        elif tag == "title":
            self._in_title = True
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")
        elif tag in ("td", "th"):
            self.parts.append(" ")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP_TAGS:
            self._skip = max(0, self._skip - 1)
        elif tag == "title":
            self._in_title = False
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        (self.title if self._in_title else self.parts).append(data)


def html_to_text(html: str) -> tuple[str, str]:
    """Return (title, visible text) of an HTML document; scripts, styles and tags are dropped."""
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    lines = (re.sub(r"[ \t\r\f\v\u00a0]+", " ", line).strip() for line in "".join(parser.parts).split("\n"))
    text = re.sub(r"\n{2,}", "\n", "\n".join(lines)).strip()
    return re.sub(r"\s+", " ", "".join(parser.title)).strip(), text
