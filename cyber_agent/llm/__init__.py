"""Model layer: the llm_call contract, providers over httpx, fakes, the offline demo model, record/replay and cost."""

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
from cyber_agent.llm.fakes import FunctionModel, ModelFunction, ModelRequest, Reply, ScriptedModel, ToolCallSpec
from cyber_agent.llm.http_retry import DEFAULT_TIMEOUT, RetryPolicy, Sleep
from cyber_agent.llm.openai_compat import OPENAI_DEFAULT_BASE_URL, OpenAICompatModel
from cyber_agent.llm.pricing import PRICE_TABLE, PRICES_AS_OF, ModelPrice, compute_cost, lookup_price
from cyber_agent.llm.replay import Exchange, RecordingLLM, ReplayLLM, load_exchanges
from cyber_agent.llm.resolve import Provider, ResolvedModel, resolve_llm
from cyber_agent.llm.toolcall_json import parse_tool_arguments
from cyber_agent.llm.types import DeltaCallback, LLMCall, LLMResponse, ToolCall, Usage

__all__ = [
    "ANTHROPIC_DEFAULT_BASE_URL",
    "AnthropicModel",
    "DEFAULT_TIMEOUT",
    "DeltaCallback",
    "DemoModel",
    "DialectLLM",
    "DialectName",
    "Exchange",
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
    "PRICE_TABLE",
    "Provider",
    "RecordingLLM",
    "ReplayLLM",
    "Reply",
    "ResolvedModel",
    "RetryPolicy",
    "ScriptedModel",
    "Sleep",
    "ToolCall",
    "ToolCallSpec",
    "ToolDialect",
    "Usage",
    "XmlDialect",
    "choose_dialect",
    "compute_cost",
    "load_exchanges",
    "lookup_price",
    "parse_tool_arguments",
    "resolve_llm",
    "to_anthropic_messages",
    "to_anthropic_tools",
]
