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
    for flag, metavar, text in _LIMIT_FLAGS:
        group.add_argument(flag, type=float if metavar == "S" else int, default=None, metavar=metavar, help=text)


_LIMIT_FLAGS = (  # the provider boundary's per-call limits (cyber_agent/llm/boundary.py)
    ("--deadline", "S", "seconds one model call may take overall, retries included (CYBER_AGENT_DEADLINE; default 1200)"),
    ("--max-output-chars", "N", "characters one answer may carry (CYBER_AGENT_MAX_OUTPUT_CHARS; default 4000000)"),
    ("--max-body-bytes", "N", "bytes of an answer body or streamed event read (CYBER_AGENT_MAX_BODY_BYTES; default 16 MiB)"),
    ("--max-error-bytes", "N", "bytes of an error body read (CYBER_AGENT_MAX_ERROR_BYTES; default 64 KiB)"),
)


def provider_flags(args: argparse.Namespace) -> dict:
    """The provider settings given on the command line, for `RunConfig.provider`."""
    names = {"timeout": "timeout", "retries": "retries", "max_tokens": "max_tokens", "stream": "stream",
             "deadline": "deadline", "max_output_chars": "max_output_chars", "max_body_bytes": "max_body_bytes",
             "max_error_bytes": "max_error_bytes"}
    return {field: getattr(args, flag) for flag, field in names.items() if getattr(args, flag) is not None}
