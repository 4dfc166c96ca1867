"""The OpenAPI document as API users read it: the developers' cross-references taken out.

Docstrings of the models and routes are the document's descriptions. For developers they cite
requirement ids of the product spec (`(A7)`, `(T7, T9)`), the seed documents (`(seed 003)`) and
code (`` (`cyber_agent/llm/pricing.py:load_user_prices`) ``); none of these mean anything to a
client of `/openapi.json`. `install_user_openapi` builds FastAPI's document once and removes
those parentheticals from every `summary` and `description`, so the docstrings stay the single
source and the published text speaks to users.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import FastAPI

__all__ = ["INTERNAL_LABEL", "install_user_openapi", "user_text"]

_SPEC_ID = r"(?:[AHJT]\d{1,2}(?:[–-]\d{1,2}|[–-][AHJT]\d{1,2})?)"
INTERNAL_LABEL = re.compile(
    r"\s*\((?:"
    rf"{_SPEC_ID}(?:\s*,\s*{_SPEC_ID})*"  # (A7), (A3, A7, A10), (T8–T10)
    r"|seed \d{3}[^)]*"  # (seed 003), (seed 003, endpoints 4–9)
    r"|`(?:cyber_agent|docs)/[^`]*`(?:\s*,\s*`(?:cyber_agent|docs)/[^`]*`)*"  # (`cyber_agent/x.py:Symbol`)
    r")\)"
)
"""A parenthetical that only a developer of this repository can read."""


def user_text(text: str) -> str:
    """`text` without internal labels."""
    return INTERNAL_LABEL.sub("", text)


def _clean(node: Any) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("summary", "description") and isinstance(value, str):
                node[key] = user_text(value)
            else:
                _clean(value)
    elif isinstance(node, list):
        for item in node:
            _clean(item)


def install_user_openapi(app: FastAPI) -> None:
    """Serve `app`'s OpenAPI document with internal labels removed (built once, on first request)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            _clean(schema)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
