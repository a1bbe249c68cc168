"""watchdog.freeze: the tree is stopped whole before it is killed, children forked at the last
moment included. The scheduling it guards against (a SIGSTOP landing while its process is in the
middle of a fork) is rare on demand, so the first tests replay it on a scripted process table;
the last forks for real."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from grader.sandbox import watchdog
from processes import left_running, running_named

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="the watchdog reads /proc")


class ScriptedTree:
    """The worker (pid 100) is in the middle of a fork when it is sent SIGSTOP: it stops only
    `stops_after` scans later, and its child (pid 101) appears just before it stops."""

    def __init__(self, stops_after: int):
        self.scans, self.stops_after = 0, stops_after
        self.signalled: list[tuple[int, int]] = []

    def table(self):
        self.scans += 1
        table = {1: (0, 0, 1), 100: (1, 0, 5000)}
        if self.scans > self.stops_after:
            table[101] = (100, 0, 5001)
        return table

    def stopped_or_gone(self, pid, started):
        return pid != 100 or self.scans > self.stops_after

    def kill(self, pid, sig):
        self.signalled.append((pid, sig))


@pytest.mark.parametrize("stops_after", [2, 5])
def test_a_child_forked_while_the_stop_is_pending_is_frozen_too(monkeypatch, stops_after):
    tree = ScriptedTree(stops_after)
    monkeypatch.setattr(watchdog, "_proc_table", tree.table)
    monkeypatch.setattr(watchdog, "_stopped_or_gone", tree.stopped_or_gone)
    monkeypatch.setattr(watchdog.os, "kill", tree.kill)
    seen = {100: 5000}
    watchdog.freeze(seen)
    assert seen == {100: 5000, 101: 5001}  # kill_all will kill the child
    assert (101, signal.SIGSTOP) in tree.signalled


def test_a_tree_that_never_stops_is_given_up_on_in_time(monkeypatch):
    tree = ScriptedTree(stops_after=10**9)
    monkeypatch.setattr(watchdog, "_proc_table", tree.table)
    monkeypatch.setattr(watchdog, "_stopped_or_gone", tree.stopped_or_gone)
    monkeypatch.setattr(watchdog.os, "kill", tree.kill)
    started = time.monotonic()
    watchdog.freeze({100: 5000}, timeout_s=0.2)
    assert time.monotonic() - started < 2


def test_a_reused_pid_in_the_tree_is_recorded_with_its_own_start_time(monkeypatch):
    # pid 101 was a child that exited; a new child got its pid: that one must be killed.
    tree = ScriptedTree(stops_after=0)
    monkeypatch.setattr(watchdog, "_proc_table", tree.table)
    monkeypatch.setattr(watchdog, "_stopped_or_gone", tree.stopped_or_gone)
    monkeypatch.setattr(watchdog.os, "kill", tree.kill)
    seen = {100: 5000, 101: 42}
    watchdog.freeze(seen)
    assert seen[101] == 5001


def test_a_real_fork_loop_is_stopped_and_killed_whole():
    marker = f"fz{os.getpid() % 10**6}"
    loop = ("import ctypes, os, time\n"
            "libc = ctypes.CDLL(None)\n"
            "for i in range(400):  # still forking when freeze() comes: a child every 2 ms\n"
            "    time.sleep(0.002)\n"
            "    if libc.fork() == 0:\n"
            f"        libc.prctl(15, ctypes.c_char_p(b'{marker}'), 0, 0, 0)\n"
            "        if i % 2: os.setsid()\n"
            "        time.sleep(60); os._exit(0)\n")
    proc = subprocess.Popen([sys.executable, "-c", loop], start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while len(running_named(marker)) < 5 and time.monotonic() < deadline:
            time.sleep(0.02)
        seen = {proc.pid: watchdog._proc_table()[proc.pid][2]}
        watchdog.freeze(seen)
        assert len(seen) > 1
        os.killpg(proc.pid, signal.SIGKILL)
        watchdog.kill_all(seen)
    finally:
        proc.kill()
        proc.wait()
    assert left_running(marker) == []

