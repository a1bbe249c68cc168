"""The worker's end of its line to the grading parent: runs in the worker, beside the submission.

The worker asks, the parent decides (grader.sandbox.referee): it announces each case, hands over
its outputs and waits for the verdict, asks whether to time at all, and during timing asks after
every call whether to keep its outputs. Nothing here decides anything; what it sends are the
ops of grader.sandbox.protocol, each a record in the one form the parent accepts.
"""

from __future__ import annotations

import json
import socket

from grader.sandbox import protocol


class ParentGone(Exception):
    """The parent closed the line: stop at once."""


class ParentLine:
    """The worker's end: ask(op) -> the parent's answer (a dict)."""

    def __init__(self, fd: int):
        self._sock = socket.socket(fileno=fd)
        self._reader = self._sock.makefile("rb")
        self._writer = self._sock.makefile("wb")

    def ask(self, op: protocol.Op | str, **fields) -> dict:
        """Sends an op (a record of grader.sandbox.protocol) and waits for the answer. A name and
        fields instead go as they are, in whatever form: what the submission, which shares this
        process, can always write on the line (the tests play it so). The worker sends records."""
        request = op.to_dict() if isinstance(op, protocol.Op) else {"op": op, **fields}
        try:
            self._writer.write((json.dumps(request, default=str) + "\n").encode())
            self._writer.flush()
            line = self._reader.readline()
        except OSError as exc:
            raise ParentGone(str(exc)) from None
        if not line:
            raise ParentGone("the grading process closed the line")
        return json.loads(line)


class ParentSampler:
    """The timing loop's sampler (grader.timing.timer.time_pair), answered by the parent."""

    def __init__(self, line: ParentLine, key: str):
        self.line, self.key = line, key
        self._next_key: int | None = None

    def begin(self, calls: int, n_sets: int) -> None:
        self._next_key = self.line.ask(protocol.TimingOp(self.key, calls, n_sets)).get("change_key")

    def change_key(self) -> int:
        """The key of the next call's input change: the parent sent it with its last answer."""
        key, self._next_key = self._next_key, None
        if not isinstance(key, int):
            raise RuntimeError("the grader sent no key for this timed call's input change")
        return key

    def keep(self, call: int) -> int | None:
        answer = self.line.ask(protocol.SampleOp(self.key, call))
        self._next_key = answer.get("change_key")
        return answer.get("set")

