"""cyber_agent: run LLM agents and study what they did."""
