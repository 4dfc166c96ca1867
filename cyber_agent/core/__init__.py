"""Core: the runner loop, tool dispatch, prompt assembly and mode policy."""
