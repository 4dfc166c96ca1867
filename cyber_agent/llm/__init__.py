"""Model layer: the llm_call contract, providers over httpx, fakes and the offline demo model."""

from cyber_agent.llm.types import DeltaCallback, LLMCall, LLMResponse, ToolCall, Usage

__all__ = ["DeltaCallback", "LLMCall", "LLMResponse", "ToolCall", "Usage"]
