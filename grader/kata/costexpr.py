"""Safe evaluation of the cost expressions in kata.yaml ("2 * M * N * itemsize").

Only numbers, names bound by the case, + - * / // ** % and parentheses are allowed, and (for
tolerance rules, "2e-3 * sqrt(K / 64)") the functions in FUNCTIONS: a kata file must never be
able to run code.
"""

from __future__ import annotations

import ast
import math
import operator

_BINARY = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow,
    ast.Mod: operator.mod,
}


FUNCTIONS = {"sqrt": math.sqrt, "log2": math.log2, "min": min, "max": max}


class CostExpressionError(ValueError):
    pass


def evaluate(expression: str, names: dict) -> float:
    """The expression's value, a finite real number, or CostExpressionError."""
    try:
        value = _eval(parse(expression).body, names, expression)
        if isinstance(value, complex):  # (-1) ** 0.5
            raise CostExpressionError(f"'{expression}' is not a real number: {value}")
        value = float(value)  # an int too large for a float raises OverflowError here
    except (ZeroDivisionError, OverflowError, TypeError) as exc:  # TypeError: complex // 1
        raise CostExpressionError(f"'{expression}' fails: {exc}") from None
    if not math.isfinite(value):  # 1e999, 1e308 * 10
        raise CostExpressionError(f"'{expression}' is not finite: {value}")
    return value


def number_or_expression(raw) -> float | str:
    """A declared value (a tolerance, a memory budget): a number, or an expression over the
    case's fields kept as text (checked here, evaluated per case)."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        raise CostExpressionError(f"must be a number or an expression, not {raw!r}")
    if isinstance(raw, str):
        try:
            return float(raw)  # YAML reads 1e-3 (no dot) as a string
        except ValueError:
            parse(raw)
            return raw
    return float(raw)


def parse(expression: str) -> ast.Expression:
    """The expression's tree; raises CostExpressionError when it is not valid Python."""
    try:
        return ast.parse(str(expression), mode="eval")
    except SyntaxError as exc:
        raise CostExpressionError(f"cannot parse '{expression}': {exc.msg}") from None


def _eval(node: ast.AST, names: dict, expression: str) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in names or not isinstance(names[node.id], (int, float)):
            raise CostExpressionError(f"'{expression}' uses '{node.id}', which the case does not define")
        return names[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_eval(node.left, names, expression), _eval(node.right, names, expression))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, names, expression)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS \
            and node.args and not node.keywords:
        args = [_eval(a, names, expression) for a in node.args]
        try:
            return FUNCTIONS[node.func.id](*args)
        except (TypeError, ValueError) as exc:
            raise CostExpressionError(f"'{expression}': {node.func.id}{tuple(args)} fails: {exc}") from None
    raise CostExpressionError(f"'{expression}': only arithmetic on numbers and case fields (and sqrt, log2, min, max) is allowed")
