"""Claims with citations: the record types, and what the evidence check reads in a text.

The records are persisted on the trace, so `cyber_agent/trace/claim_records.py` owns them; this
module re-exports them and adds the text side: which numbers and quoted names a claim states
(`claim_numbers`, `quoted_names`), whether a cited text holds them (`has_number`, `has_quote`),
the value of a cited expression (`expression_value`), and the claims of a final text that has
no report (`claims_from_text`, one uncited claim per line that states something).
"""

from __future__ import annotations

import re

from cyber_agent.llm.demo_checks import arithmetic_value
from cyber_agent.trace.claim_records import MAX_CLAIMS, CheckCode, Claim, ClaimVerdict, EvidenceKind, EvidenceRef

__all__ = [
    "MIN_CHECKED_INTEGER",
    "CheckCode",
    "Claim",
    "ClaimVerdict",
    "EvidenceKind",
    "EvidenceRef",
    "claim_numbers",
    "claims_from_text",
    "expression_value",
    "has_number",
    "has_quote",
    "matches",
    "numbers_of",
    "quoted_names",
]

MIN_CHECKED_INTEGER = 10
"""Integers below this are counts and ordinals ("3 rows", "step 2"): a claim's are not checked."""

_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\d])")
_ANY_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_QUOTED = re.compile(r"\"([^\"\n]{2,120})\"|`([^`\n]{2,120})`|(?<![\w])'([^'\n]{2,120})'(?![\w])")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")


def numbers_of(text: str) -> list[str]:
    """Every unsigned decimal number in `text`, as written (digits inside words included)."""
    return _ANY_NUMBER.findall(text)


def claim_numbers(text: str) -> list[str]:
    """The numbers a claim states that the check looks for: decimals, and integers ≥ MIN_CHECKED_INTEGER."""
    out = []
    for number in _NUMBER.findall(text):
        if "." in number or int(number) >= MIN_CHECKED_INTEGER:
            out.append(number)
    return list(dict.fromkeys(out))


def _decimals(number: str) -> int:
    return len(number.split(".", 1)[1]) if "." in number else 0


def matches(stated: str, value: float) -> bool:
    """True when `value`, rounded to the decimals `stated` is written with, is `stated`."""
    places = _decimals(stated)
    return bool(abs(round(value, places) - float(stated)) < 0.5 * 10.0 ** -places)


def has_number(text: str, stated: str) -> bool:
    """True when `text` holds a number that reads as `stated` (402.5 holds 402.50)."""
    return any(matches(stated, float(n)) for n in numbers_of(text))


def _squash(text: str) -> str:
    return " ".join(text.split()).casefold()


def has_quote(text: str, quote: str) -> bool:
    """True when `quote` occurs in `text`, up to whitespace and case."""
    return _squash(quote) in _squash(text)


def quoted_names(text: str) -> list[str]:
    """Names a text puts in quotes ("...", '...', `...`): a claim says they occur in the material."""
    return [next(g for g in match if g) for match in _QUOTED.findall(text)]


def expression_value(expression: str) -> tuple[float | None, list[str]]:
    """The value of a cited arithmetic expression and its operands (None when it is not arithmetic)."""
    return arithmetic_value(expression), numbers_of(expression)


def claims_from_text(text: str) -> list[Claim]:
    """An implicit report's claims: one uncited claim per line of the final text that states something."""
    out: list[Claim] = []
    for line in text.splitlines():
        line = _BULLET.sub("", line).strip()
        if len(line) < 3 or line.endswith(":") and not claim_numbers(line):
            continue
        out.append(Claim(text=line[:1000]))
        if len(out) == MAX_CLAIMS:
            break
    return out
