"""The provider flags of `cyber-agent run` (docs/llm.md, settings table)."""

from __future__ import annotations

import argparse

__all__ = ["add_provider_flags", "provider_flags"]


def add_provider_flags(run: argparse.ArgumentParser) -> None:
    """Add the model-call settings to `run`."""
    # Unset flags stay out of RunConfig.provider, so CYBER_AGENT_* variables and the defaults apply.
    group = run.add_argument_group("provider", "model-call settings (docs/llm.md, settings table)")
    group.add_argument("--timeout", type=float, default=None, metavar="S",
                       help="seconds per read of the provider's answer (CYBER_AGENT_TIMEOUT; default 120)")
    group.add_argument("--retries", type=int, default=None, metavar="N",
                       help="retries after the first attempt (CYBER_AGENT_RETRIES; default 2)")
    group.add_argument("--max-tokens", type=int, default=None, metavar="N",
                       help="output-token cap per call (CYBER_AGENT_MAX_TOKENS; default: the provider's)")
    group.add_argument("--dialect", choices=["auto", "native", "xml", "pformat"], default=None,
                       help="how tool calls travel (CYBER_AGENT_DIALECT; default auto)")
    group.add_argument("--stream", action=argparse.BooleanOptionalAction, default=None,
                       help="always (--stream) or never (--no-stream) stream answers (CYBER_AGENT_STREAM)")


def provider_flags(args: argparse.Namespace) -> dict:
    """The provider settings given on the command line, for `RunConfig.provider`."""
    names = {"timeout": "timeout", "retries": "retries", "max_tokens": "max_tokens", "stream": "stream"}
    return {field: getattr(args, flag) for flag, field in names.items() if getattr(args, flag) is not None}
