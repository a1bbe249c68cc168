"""Safe evaluation of the cost expressions in kata.yaml ("2 * M * N * itemsize").

Only numbers, names bound by the case, + - * / // ** % and parentheses are allowed: a kata
file must never be able to run code.
"""

from __future__ import annotations

import ast
import operator

_BINARY = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow,
    ast.Mod: operator.mod,
}


class CostExpressionError(ValueError):
    pass


def evaluate(expression: str, names: dict) -> float:
    try:
        tree = ast.parse(str(expression), mode="eval")
    except SyntaxError as exc:
        raise CostExpressionError(f"cannot parse '{expression}': {exc.msg}") from None
    return _eval(tree.body, names, expression)


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
    raise CostExpressionError(f"'{expression}': only arithmetic on numbers and case fields is allowed")
