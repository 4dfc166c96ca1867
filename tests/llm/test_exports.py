"""The package's exports stay sorted and complete, the layer stays a leaf, and docs/llm.md points at real code."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import cyber_agent.llm as llm

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "cyber_agent" / "llm"
# Public in their module but deliberately not lifted to `cyber_agent.llm`: wire-format details
# and the pytest plugin (importing it would import pytest).
NOT_REEXPORTED = {
    "anthropic": {"ANTHROPIC_VERSION"},
    "anthropic_format": {"STOP_REASONS", "from_anthropic_content", "parse_anthropic_usage"},
    "http_retry": {"ProviderHTTP", "RetryableRead", "ServerSentEvent", "parse_retry_after"},
    "boundary": {"StreamAssembler", "Wire", "call_provider", "output_chars"},
    "usage_check": {"MAX_CALL_COST_USD", "MAX_CALL_TOKENS", "estimated_usage", "read_cost", "read_count", "usage_problem",
                    "validated_usage"},
    "openai_compat": {"estimated_usage", "parse_chat_completion", "parse_openai_usage"},
    "replay": {"FORMAT_VERSION", "canonical_request"},
    "pricing": {"with_cost"},
    "provider_errors": {"Origin", "exhausted_text", "limit_text", "status_hint", "transport_text"},
    "call_site": {"at_site", "current_position", "current_site", "id_mapping", "normalise_ids", "rename_ids", "tree_position"},
    "request_cache": {"RequestCache"},
    "cassette": {"CassetteLLM", "ExchangeRecorder", "RECORD_VERSION", "RecordedExchange", "expand_records", "request_key"},
    "settings": {"DEFAULT_CONNECT_TIMEOUT", "DEFAULT_DEADLINE", "DEFAULT_MAX_BODY_BYTES", "DEFAULT_MAX_ERROR_BYTES",
                 "DEFAULT_MAX_OUTPUT_CHARS", "DEFAULT_READ_TIMEOUT", "DEFAULT_RETRIES", "DIALECT_ENV", "ENV_VARS"},
    "pytest_plugin": {"ScriptedModelFactory", "scripted_model"},
    "demo_recursive": {"FIRST_READ_LINES", "RECURSIVE_HELP", "recursive_step"},
    "demo_checks": {"GRADING_HEADER", "NUMBER", "arithmetic_value", "grade_reply", "grading_request", "numbers_in"},
    "fallible": {"TaskType", "parse_fallible_spec", "task_type"},
    "fabricating": {"FABRICATIONS", "Fabrication", "FabricationKind"},
}


def test_all_is_sorted_and_every_name_exists():
    assert llm.__all__ == sorted(llm.__all__)
    assert all(hasattr(llm, name) for name in llm.__all__)


def test_every_public_module_name_is_reexported_or_listed_as_internal():
    for path in sorted(PACKAGE.glob("*.py")):
        if path.stem == "__init__":
            continue
        module = importlib.import_module(f"cyber_agent.llm.{path.stem}")
        assert module.__all__ == sorted(module.__all__), path.name
        missing = set(module.__all__) - set(llm.__all__) - NOT_REEXPORTED.get(path.stem, set())
        assert not missing, f"{path.name} exports {sorted(missing)} but cyber_agent.llm does not"


def test_llm_imports_nothing_from_cyber_agent_but_errors_and_itself():
    for path in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else (
                [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            for name in names:
                if name.startswith("cyber_agent"):
                    assert name in ("cyber_agent.errors", "cyber_agent._lazy") or name.startswith("cyber_agent.llm"), (path.name, name)


def test_docs_references_point_at_real_symbols():
    text = (ROOT / "docs" / "llm.md").read_text()
    references = re.findall(r"`(cyber_agent/[\w/]+\.py):([\w.]+)`", text)
    assert len(references) > 20
    for file, symbol in references:
        assert (ROOT / file).is_file(), file
        target = importlib.import_module(file[:-3].replace("/", "."))
        for part in symbol.split("."):
            assert hasattr(target, part), f"{file}:{symbol}"
            target = getattr(target, part)


def test_lazy_table_matches_the_type_checking_imports_and_all():
    """`cyber_agent.llm` imports lazily; its table, its TYPE_CHECKING imports and `__all__` must agree."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    checked: dict[str, tuple[str, ...]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.module
                checked[imp.module.removeprefix("cyber_agent.llm.")] = tuple(a.name for a in imp.names)
    assert checked == llm._LAZY
    assert sorted(n for names in llm._LAZY.values() for n in names) == llm.__all__
