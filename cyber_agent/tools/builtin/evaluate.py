"""evaluate: compute the value of a Python-like expression safely (legacy tool, SPEC A6, A12).

The expression is parsed with `ast` and walked by a small interpreter; nothing reaches `eval`.
Allowed: numbers, strings, True/False/None, arithmetic, comparisons, boolean logic,
conditional expressions, list/tuple/dict/set literals, comprehensions, subscripts and slices,
and calls to a fixed set of functions. Names, attributes, lambdas, f-strings, string `%`
formatting and everything else are refused with a ToolError naming the construct.

Work is metered so no expression can exhaust the process: each node evaluated and each item
of every value produced is charged against a budget, sizes are checked before repetition
(`'a' * n`, `[0] * n`) and integer powers/products are bounded in bits (`9**9**9` is refused).
Big-integer `*`, `//`, `%` and `**` are charged by their cost, estimated from the operand sizes
before computing (a division costs about quotient digits × divisor digits): one step over
`_MAX_STEP_COST` is refused, and every step's cost is charged to the same budget. One C-level
step holds the GIL, so this bound, not the registry's worker thread, is what keeps it short.
"""

from __future__ import annotations

import ast
import math
import operator
import statistics
import warnings
from collections.abc import Callable
from typing import Any

from cyber_agent.errors import ToolError

__all__ = ["MAX_EXPRESSION_CHARS", "evaluate", "safe_eval"]

MAX_EXPRESSION_CHARS = 10_000
"""Longest expression accepted."""
_MAX_DEPTH = 100
_MAX_WORK = 1_000_000
_MAX_INT_BITS = 1_000_000
_MAX_ROUND_DIGITS = 1_000
_DIGIT_BITS = 30
"""CPython stores ints in 30-bit digits; costs are counted in digit operations."""
_MAX_STEP_COST = 40_000_000
"""Most digit operations of one big-int step (~0.1 s: a division runs at ~2.5 ns per digit operation)."""
_COST_PER_WORK = 100
"""Digit operations per unit of the work budget (the whole budget buys ~1e8, ~0.25 s)."""
_KARATSUBA_CUTOFF = 70


def _round(number: Any, ndigits: int | None = None) -> Any:
    if ndigits is not None and abs(ndigits) > _MAX_ROUND_DIGITS:
        raise ToolError(f"round(): ndigits must be within ±{_MAX_ROUND_DIGITS}, got {ndigits}")
    return round(number, ndigits) if ndigits is not None else round(number)


def _sum(values: Any, start: Any = 0) -> Any:
    # A list or string start would make sum() a quadratic concatenation.
    if not isinstance(start, (int, float, complex)):
        raise ToolError("sum(): start must be a number")
    return sum(values, start)


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "abs": abs, "min": min, "max": max, "sum": _sum, "len": len, "round": _round, "sorted": sorted,
    "int": int, "float": float, "str": str, "bool": bool, "any": any, "all": all,
    "mean": statistics.mean, "median": statistics.median, "stdev": statistics.stdev,
    "sqrt": math.sqrt, "log": math.log, "exp": math.exp, "floor": math.floor, "ceil": math.ceil,
}
_CONSTANTS: dict[str, Any] = {"pi": math.pi, "e": math.e, "inf": math.inf}
_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos, ast.USub: operator.neg, ast.Not: operator.not_,
}
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b, ast.Is: operator.is_, ast.IsNot: operator.is_not,
}
_NUMBER = (int, float, complex)


def evaluate(expression: str) -> str:
    """Evaluate an arithmetic or data expression safely and return the result.
    Supports numbers, strings, + - * / // % **, comparisons, and/or/not, if-else, lists,
    tuples, dicts, sets, comprehensions, indexing and the functions abs, min, max, sum, len,
    round, sorted, int, float, str, bool, any, all, mean, median, stdev, sqrt, log, exp,
    floor, ceil (constants: pi, e, inf). Example: "round(mean([3, 4, 8]) * 1.2, 2)".

    Args:
        expression: A single expression, e.g. "(17 * 3 + 4) / 5" or "sorted([3, 1, 2])".
    """
    value = safe_eval(expression)
    try:
        return value if isinstance(value, str) else repr(value)
    except ValueError as exc:
        raise ToolError(f"the result is too large to print: {_explain(exc)}") from None


def safe_eval(expression: str) -> Any:
    """Return the value of `expression`; raise ToolError for anything not allowed or failing."""
    if not isinstance(expression, str) or not expression.strip():
        raise ToolError("expression is empty; pass an expression such as '2 * (3 + 4)'")
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ToolError(f"expression is {len(expression)} characters long; the limit is {MAX_EXPRESSION_CHARS}")
    try:
        with warnings.catch_warnings():
            # Invalid escapes in string literals warn at parse time; they are not the model's problem.
            warnings.simplefilter("ignore")
            tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ToolError(f"invalid expression syntax: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise ToolError(f"cannot parse the expression: {type(exc).__name__}") from None
    if _depth(tree) > _MAX_DEPTH:
        raise ToolError(f"expression is nested more than {_MAX_DEPTH} levels deep")
    try:
        return _Interpreter().run(tree.body)
    except ToolError:
        raise
    except (ArithmeticError, TypeError, ValueError, LookupError, statistics.StatisticsError) as exc:
        raise ToolError(f"{type(exc).__name__}: {_explain(exc)}") from None
    except (RecursionError, MemoryError) as exc:
        raise ToolError(f"expression is too expensive to evaluate ({type(exc).__name__})") from None


def _explain(exc: Exception) -> str:
    # CPython's int/str digit limit suggests a process setting the model cannot change.
    if "integer string conversion" in str(exc):
        return "the integer has more than 4300 digits, too many to convert to or from text"
    return str(exc)


def _depth(tree: ast.AST) -> int:
    deepest = 0
    stack = [(tree, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in ast.iter_child_nodes(node))
    return deepest


class _Interpreter:
    """Evaluate one expression tree under a work budget."""

    def __init__(self) -> None:
        self.work = 0
        self.scopes: list[dict[str, Any]] = []

    def run(self, node: ast.expr) -> Any:
        value = self.eval(node)
        self.charge(value)
        return value

    def spend(self, units: int) -> None:
        self.work += units
        if self.work > _MAX_WORK:
            raise ToolError("expression is too expensive to evaluate (work limit reached); simplify it")

    def charge(self, value: Any) -> Any:
        """Charge the size of a produced value (items, characters, 64-bit words)."""
        stack = [value]
        while stack:
            item = stack.pop()
            if isinstance(item, (str, bytes)):
                self.spend(len(item) // 8 + 1)
            elif isinstance(item, int):
                self.spend(item.bit_length() // 64 + 1)
            elif isinstance(item, dict):
                self.spend(1)
                stack.extend(item.keys())
                stack.extend(item.values())
            elif isinstance(item, (list, tuple, set, frozenset)):
                self.spend(1)
                stack.extend(item)
            else:
                self.spend(1)
        return value

    def eval(self, node: ast.expr) -> Any:
        self.spend(1)
        method = getattr(self, f"eval_{type(node).__name__}", None)
        if method is None:
            raise ToolError(f"{_construct(node)} is not allowed in evaluate; use plain arithmetic and the listed functions")
        return method(node)

    def eval_Constant(self, node: ast.Constant) -> Any:
        if not isinstance(node.value, (*_NUMBER, str, bool, type(None))):
            raise ToolError(f"constant {node.value!r} is not allowed")
        return node.value

    def eval_Name(self, node: ast.Name) -> Any:
        for scope in reversed(self.scopes):
            if node.id in scope:
                # Each use of a loop variable pays for its size, so reusing one big value is not free.
                return self.charge(scope[node.id])
        if node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        if node.id in _FUNCTIONS:
            raise ToolError(f"function {node.id!r} can only be called, e.g. {node.id}([1, 2])")
        raise ToolError(f"name {node.id!r} is not allowed; functions: {', '.join(sorted(_FUNCTIONS))}; "
                        f"constants: {', '.join(sorted(_CONSTANTS))}")

    def eval_BinOp(self, node: ast.BinOp) -> Any:
        op = _BINARY.get(type(node.op))
        if op is None:
            raise ToolError(f"operator {type(node.op).__name__} is not allowed")
        left, right = self.eval(node.left), self.eval(node.right)
        if isinstance(node.op, ast.Mod) and not isinstance(left, _NUMBER):
            raise ToolError("% is only allowed between numbers (no string formatting)")
        if isinstance(node.op, ast.Pow):
            _check_power(left, right)
        if isinstance(node.op, ast.Mult):
            self._check_product(left, right)
        if _is_int(left) and _is_int(right):
            self._charge_int_step(node.op, left, right)
        return self.charge(op(left, right))

    def _charge_int_step(self, op: ast.operator, left: int, right: int) -> None:
        """Refuse or charge a big-int step by its estimated cost, before it runs."""
        cost = _int_step_cost(op, left, right)
        if cost > _MAX_STEP_COST:
            symbol = {ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**"}.get(type(op), "?")
            raise ToolError(
                f"integer step {left.bit_length()}-bit {symbol} {right.bit_length()}-bit is too expensive "
                f"(~{cost:.2g} digit operations, limit {_MAX_STEP_COST:.2g}); use smaller numbers or floats")
        self.spend(cost // _COST_PER_WORK)

    def _check_product(self, left: Any, right: Any) -> None:
        if _is_int(left) and _is_int(right):
            if left.bit_length() + right.bit_length() > _MAX_INT_BITS:
                raise ToolError(f"product would exceed {_MAX_INT_BITS} bits")
            return
        seq, count = (left, right) if _is_int(right) else (right, left)
        if isinstance(seq, (str, list, tuple)) and _is_int(count) and count > 0:
            # Check before multiplying: the allocation itself is the attack.
            if count * max(1, _size(seq)) > _MAX_WORK - self.work:
                raise ToolError(f"repeating a sequence of length {len(seq)} {count} times is too large")

    def eval_UnaryOp(self, node: ast.UnaryOp) -> Any:
        return _UNARY[type(node.op)](self.eval(node.operand))

    def eval_BoolOp(self, node: ast.BoolOp) -> Any:
        value: Any = None
        for operand in node.values:
            value = self.eval(operand)
            if isinstance(node.op, ast.And) and not value:
                return value
            if isinstance(node.op, ast.Or) and value:
                return value
        return value

    def eval_Compare(self, node: ast.Compare) -> bool:
        left = self.eval(node.left)
        for op, comparator in zip(node.ops, node.comparators):
            right = self.eval(comparator)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True

    def eval_IfExp(self, node: ast.IfExp) -> Any:
        return self.eval(node.body) if self.eval(node.test) else self.eval(node.orelse)

    def eval_List(self, node: ast.List) -> list[Any]:
        return [self.eval(item) for item in self._plain(node.elts)]

    def eval_Tuple(self, node: ast.Tuple) -> tuple[Any, ...]:
        return tuple(self.eval(item) for item in self._plain(node.elts))

    def eval_Set(self, node: ast.Set) -> set[Any]:
        return {self.eval(item) for item in self._plain(node.elts)}

    def eval_Dict(self, node: ast.Dict) -> dict[Any, Any]:
        if any(key is None for key in node.keys):
            raise ToolError("dict unpacking (**) is not allowed")
        return {self.eval(k): self.eval(v) for k, v in zip(node.keys, node.values)}  # type: ignore[arg-type]

    @staticmethod
    def _plain(items: list[ast.expr]) -> list[ast.expr]:
        if any(isinstance(item, ast.Starred) for item in items):
            raise ToolError("unpacking with * is not allowed")
        return items

    def eval_Subscript(self, node: ast.Subscript) -> Any:
        return self.charge(self.eval(node.value)[self.eval(node.slice)])

    def eval_Slice(self, node: ast.Slice) -> slice:
        parts = (node.lower, node.upper, node.step)
        return slice(*(self.eval(p) if p is not None else None for p in parts))

    def eval_Call(self, node: ast.Call) -> Any:
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
            what = node.func.id if isinstance(node.func, ast.Name) else _construct(node.func)
            raise ToolError(f"calling {what!r} is not allowed; functions: {', '.join(sorted(_FUNCTIONS))}")
        args = [self.eval(arg) for arg in self._plain(node.args)]
        if any(kw.arg is None for kw in node.keywords):
            raise ToolError("keyword unpacking (**) is not allowed")
        kwargs = {kw.arg: self.eval(kw.value) for kw in node.keywords if kw.arg is not None}
        for value in (*args, *kwargs.values()):
            self.charge(value)  # functions walk their inputs; pay for that work up front
        return self.charge(_FUNCTIONS[node.func.id](*args, **kwargs))

    # Comprehensions: the loop variables live in a scope of their own.
    def eval_ListComp(self, node: ast.ListComp) -> list[Any]:
        return [self.eval(node.elt) for _ in self._loops(node.generators)]

    def eval_GeneratorExp(self, node: ast.GeneratorExp) -> list[Any]:
        return self.eval_ListComp(node)  # type: ignore[arg-type]

    def eval_SetComp(self, node: ast.SetComp) -> set[Any]:
        return {self.eval(node.elt) for _ in self._loops(node.generators)}

    def eval_DictComp(self, node: ast.DictComp) -> dict[Any, Any]:
        return {self.eval(node.key): self.eval(node.value) for _ in self._loops(node.generators)}

    def _loops(self, generators: list[ast.comprehension], index: int = 0) -> Any:
        if index == len(generators):
            yield None
            return
        gen = generators[index]
        if gen.is_async:
            raise ToolError("async comprehensions are not allowed")
        iterable = self.eval(gen.iter)
        if not isinstance(iterable, (str, list, tuple, set, frozenset, dict)):
            raise ToolError(f"cannot iterate over {type(iterable).__name__}")
        self.scopes.append({})
        try:
            for item in list(iterable):
                self.spend(1)
                self._bind(gen.target, item)
                if all(self.eval(cond) for cond in gen.ifs):
                    yield from self._loops(generators, index + 1)
        finally:
            self.scopes.pop()

    def _bind(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name):
            self.scopes[-1][target.id] = value
        elif isinstance(target, ast.Tuple) and not any(isinstance(t, ast.Starred) for t in target.elts):
            values = list(value)
            if len(values) != len(target.elts):
                raise ToolError(f"cannot unpack {len(values)} values into {len(target.elts)} names")
            for sub, item in zip(target.elts, values):
                self._bind(sub, item)
        else:
            raise ToolError(f"loop target {_construct(target)} is not allowed; use a name or a tuple of names")


def _check_power(base: Any, exponent: Any) -> None:
    if _is_int(base) and _is_int(exponent) and exponent > 0 and abs(base) > 1:
        if math.log2(abs(base)) * exponent > _MAX_INT_BITS:
            raise ToolError(f"{base} ** {exponent} is too large (over {_MAX_INT_BITS} bits)")


def _int_step_cost(op: ast.operator, left: int, right: int) -> int:
    """Estimate the digit operations CPython spends on `left op right` (ints), from their sizes."""
    a, b = left.bit_length() // _DIGIT_BITS + 1, right.bit_length() // _DIGIT_BITS + 1
    if isinstance(op, (ast.FloorDiv, ast.Mod)):
        # Schoolbook long division: each quotient digit costs a pass over the divisor.
        return a if b == 1 or b > a else (a - b + 1) * b
    if isinstance(op, ast.Mult):
        return _mul_cost(a, b)
    if isinstance(op, ast.Pow) and right > 0 and abs(left) > 1:
        # Repeated squaring: the last squarings, of the result's size, dominate.
        digits = int(math.log2(abs(left)) * right) // _DIGIT_BITS + 1
        return 2 * _mul_cost(digits // 2 + 1, digits // 2 + 1)
    return 0  # + - and comparisons are linear: the produced value's charge covers them


def _mul_cost(a: int, b: int) -> int:
    small, big = min(a, b), max(a, b)
    if small < _KARATSUBA_CUTOFF:
        return small * big
    return int(big / small * small ** 1.585)


def _is_int(value: Any) -> bool:
    return isinstance(value, int)


def _size(value: Any) -> int:
    return len(value) if isinstance(value, str) else sum(1 + (_size(v) if isinstance(v, (str, list, tuple)) else 0)
                                                      for v in value)


def _construct(node: ast.AST) -> str:
    names = {
        "Attribute": "attribute access (x.y)", "Lambda": "lambda", "NamedExpr": "assignment (:=)",
        "JoinedStr": "f-string", "Await": "await", "Yield": "yield", "YieldFrom": "yield",
        "Starred": "unpacking with *",
    }
    return names.get(type(node).__name__, type(node).__name__)
