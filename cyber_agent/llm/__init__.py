"""Model layer: the llm_call contract, providers over httpx, fakes, the offline demo model, record/replay and cost.

Every name below is imported on first use (`__getattr__`), so `import cyber_agent.llm.types` (and
everything built on the types, such as `cyber_agent.trace.models`) loads neither httpx nor any
provider. `tests/llm/test_exports.py` checks that the lazy table, the type-checking imports and
`__all__` agree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cyber_agent._lazy import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from cyber_agent.llm.anthropic import ANTHROPIC_DEFAULT_BASE_URL, AnthropicModel
    from cyber_agent.llm.anthropic_format import to_anthropic_messages, to_anthropic_tools
    from cyber_agent.llm.demo import DemoModel
    from cyber_agent.llm.dialects import (
        DialectLLM,
        DialectName,
        NativeDialect,
        PFormatDialect,
        ToolDialect,
        XmlDialect,
        choose_dialect,
    )
    from cyber_agent.llm.boundary import CallLimits, normalise_reply
    from cyber_agent.llm.fabricating import FabricatingModel
    from cyber_agent.llm.fallible import FallibleModel
    from cyber_agent.llm.fakes import (
        FunctionModel,
        ModelFunction,
        ModelRequest,
        Reply,
        ScriptedModel,
        ToolCallSpec,
    )
    from cyber_agent.llm.http_retry import DEFAULT_TIMEOUT, RetryPolicy, Sleep
    from cyber_agent.llm.openai_compat import OPENAI_DEFAULT_BASE_URL, OpenAICompatModel
    from cyber_agent.llm.pricing import (
        PRICE_TABLE, PRICES_AS_OF, PRICES_ENV, ModelPrice, compute_cost, default_price_table, is_unpriced, load_user_prices,
        lookup_price,
    )
    from cyber_agent.llm.replay import Exchange, RecordingLLM, ReplayLLM, load_exchanges
    from cyber_agent.llm.resolve import Provider, ResolvedModel, resolve_llm, suggest_spec
    from cyber_agent.llm.settings import PriceEntry, ProviderSettings
    from cyber_agent.llm.toolcall_json import parse_tool_arguments
    from cyber_agent.llm.types import DeltaCallback, LLMCall, LLMResponse, RetryRecord, ToolCall, Usage

__all__ = [
    "ANTHROPIC_DEFAULT_BASE_URL",
    "AnthropicModel",
    "CallLimits",
    "DEFAULT_TIMEOUT",
    "DeltaCallback",
    "DemoModel",
    "DialectLLM",
    "DialectName",
    "Exchange",
    "FabricatingModel",
    "FallibleModel",
    "FunctionModel",
    "LLMCall",
    "LLMResponse",
    "ModelFunction",
    "ModelPrice",
    "ModelRequest",
    "NativeDialect",
    "OPENAI_DEFAULT_BASE_URL",
    "OpenAICompatModel",
    "PFormatDialect",
    "PRICES_AS_OF",
    "PRICES_ENV",
    "PRICE_TABLE",
    "PriceEntry",
    "Provider",
    "ProviderSettings",
    "RecordingLLM",
    "ReplayLLM",
    "Reply",
    "ResolvedModel",
    "RetryPolicy",
    "RetryRecord",
    "ScriptedModel",
    "Sleep",
    "ToolCall",
    "ToolCallSpec",
    "ToolDialect",
    "Usage",
    "XmlDialect",
    "choose_dialect",
    "compute_cost",
    "default_price_table",
    "is_unpriced",
    "load_exchanges",
    "load_user_prices",
    "lookup_price",
    "normalise_reply",
    "parse_tool_arguments",
    "resolve_llm",
    "suggest_spec",
    "to_anthropic_messages",
    "to_anthropic_tools",
]

_LAZY: dict[str, tuple[str, ...]] = {
    "anthropic": ("ANTHROPIC_DEFAULT_BASE_URL", "AnthropicModel"),
    "anthropic_format": ("to_anthropic_messages", "to_anthropic_tools"),
    "boundary": ("CallLimits", "normalise_reply"),
    "demo": ("DemoModel",),
    "dialects": ("DialectLLM", "DialectName", "NativeDialect", "PFormatDialect", "ToolDialect", "XmlDialect", "choose_dialect"),
    "fabricating": ("FabricatingModel",),
    "fallible": ("FallibleModel",),
    "fakes": ("FunctionModel", "ModelFunction", "ModelRequest", "Reply", "ScriptedModel", "ToolCallSpec"),
    "http_retry": ("DEFAULT_TIMEOUT", "RetryPolicy", "Sleep"),
    "openai_compat": ("OPENAI_DEFAULT_BASE_URL", "OpenAICompatModel"),
    "pricing": ("PRICE_TABLE", "PRICES_AS_OF", "PRICES_ENV", "ModelPrice", "compute_cost", "default_price_table",
                "is_unpriced", "load_user_prices", "lookup_price"),
    "replay": ("Exchange", "RecordingLLM", "ReplayLLM", "load_exchanges"),
    "resolve": ("Provider", "ResolvedModel", "resolve_llm", "suggest_spec"),
    "settings": ("PriceEntry", "ProviderSettings"),
    "toolcall_json": ("parse_tool_arguments",),
    "types": ("DeltaCallback", "LLMCall", "LLMResponse", "RetryRecord", "ToolCall", "Usage"),
}
"""Module (under `cyber_agent.llm`) → the names it gives this package."""

__getattr__, __dir__ = _lazy_exports(globals(), _LAZY)
