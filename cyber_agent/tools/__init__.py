"""Tools: the registry, the context injected into tools, and the built-in tools."""
