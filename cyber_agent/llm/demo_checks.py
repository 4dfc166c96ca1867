"""What the offline demo model checks in its head: arithmetic for validators, and answer grading.

Two small abilities the demo's validator and a model-graded scorer need, kept apart from the
roles in `demo.py` and `demo_recursive.py`:

- `arithmetic_value` computes a plain arithmetic expression (+ - * / // % **, parentheses) the
  way a careful reader would, so the demo validator can recompute "the value of 17 * 23 + 4"
  without a tool (validators have no `evaluate`);
- `grade_reply` answers a grading request (`grading_request` writes one): it compares the submitted answer
  with the expected one — every expected number must appear (within 0.005), or, when the
  expected answer has no number, its words must — and replies `GRADE: CORRECT` or
  `GRADE: INCORRECT` with the reason.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable

__all__ = ["GRADING_HEADER", "NUMBER", "arithmetic_value", "grade_reply", "grading_request", "numbers_in"]

GRADING_HEADER = "# Grade an answer"
"""First line of a grading request; the demo model answers such a request with a verdict."""
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
"""A decimal number as the demo model writes them."""

_TOLERANCE = 0.005
_MAX_POWER = 64
_OPS: dict[type[ast.AST], Callable[[float, float], float]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}


def numbers_in(text: str) -> list[float]:
    """Every decimal number in `text`, in order."""
    return [float(n) for n in NUMBER.findall(text)]


def arithmetic_value(expression: str) -> float | None:
    """The value of a plain arithmetic expression, or None when it is not one (or is too big)."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError):
        return None
    try:
        return _value(tree.body)
    except (ArithmeticError, ValueError, TypeError, RecursionError):
        return None


def _value(node: ast.expr) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _value(node.operand)
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _value(node.left), _value(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_POWER:
            raise ValueError("exponent too large for a head calculation")
        return _OPS[type(node.op)](left, right)
    raise ValueError(f"{type(node).__name__} is not plain arithmetic")


def grading_request(task: str, expected: str, submitted: str) -> str:
    """The text of a grading request: the task, the expected and the submitted answer, each fenced by tags."""
    return "\n".join([
        GRADING_HEADER,
        f"<task>\n{task}\n</task>",
        f"<expected>\n{expected}\n</expected>",
        f"<submitted>\n{submitted}\n</submitted>",
        "Judge whether the submitted answer states the expected answer (numbers within 0.005; wording may differ).",
        "Reply with `GRADE: CORRECT` or `GRADE: INCORRECT` on the first line, then one line saying why.",
    ])


def _section(text: str, tag: str) -> str:
    match = re.search(rf"<{tag}>\n?(.*?)\n?</{tag}>", text, re.S)
    return match.group(1).strip() if match else ""


def grade_reply(request: str) -> str:
    """The demo grader's reply to a grading request: a `GRADE:` line and one line of reasons."""
    expected = _section(request, "expected")
    submitted = _section(request, "submitted")
    if not submitted:
        return "GRADE: INCORRECT\nThe submitted answer is empty."
    wanted = numbers_in(expected)
    if wanted:
        found = numbers_in(submitted)
        missing = [w for w in wanted if not any(abs(w - f) < _TOLERANCE for f in found)]
        if missing:
            shown = ", ".join(f"{m:g}" for m in missing)
            return f"GRADE: INCORRECT\nThe expected value(s) {shown} do not appear in the submitted answer."
        return "GRADE: CORRECT\nEvery expected value appears in the submitted answer."
    words = [w for w in re.findall(r"\w+", expected.lower()) if len(w) > 2]
    if words and all(w in submitted.lower() for w in words):
        return "GRADE: CORRECT\nThe submitted answer states the expected answer."
    return "GRADE: INCORRECT\nThe submitted answer does not state the expected answer."
