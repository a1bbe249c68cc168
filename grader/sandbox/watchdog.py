"""The parent's watch over a running worker: wall time, memory, processes, output size.

Polled from outside the worker, so nothing the submission does in its own process can lift
these limits. On Linux the worker's whole process tree is read from /proc; elsewhere only the
wall-time and output limits apply.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

POLL_S = 0.02
FREEZE_S = 2.0  # how long freeze() waits for a tree to stop
GIB = 1 << 30


@dataclass
class ResourceLimits:
    """What the worker's process tree may use, held from outside (not a case's time limit: that
    is grader.kata.time_limits, judged by the Referee; nor a kata's memory_budget)."""

    wall_s: float
    memory_bytes: int  # resident memory of the worker and everything it started
    processes: int  # the worker included
    output_bytes: int  # what the submission may print

    def describe(self) -> str:
        return (f"wall time {self.wall_s:g} s, CPU memory {self.memory_bytes / GIB:.1f} GiB, "
                f"{self.processes} processes, output {self.output_bytes >> 20} MiB")


def default_memory_bytes() -> int:
    """Half the machine's memory, between 4 and 32 GiB."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 16 * GIB
    return int(min(32 * GIB, max(4 * GIB, total // 2)))


@dataclass
class Breach:
    kind: str  # time | memory | processes | output
    message: str
    case: str | None = None  # the case that broke its own time limit
    slow: bool | None = None  # a time limit: still working (True), hung (False), cannot tell (None)


def _stat(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first), or None when gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return None
    # The command name is in parentheses and may itself hold spaces or parentheses.
    return stat[stat.rfind(")") + 2:].split()


def _proc_table() -> dict[int, tuple[int, int, int]]:
    """pid -> (parent pid, resident bytes, start time) for every process we can see."""
    page = os.sysconf("SC_PAGE_SIZE")
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat(entry)
        try:
            table[int(entry)] = (int(fields[1]), int(fields[21]) * page, int(fields[19]))
        except (TypeError, IndexError, ValueError):
            continue
    return table


def descendants(root: int, table: dict[int, tuple[int, int, int]]) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in table:
            found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def watch(proc: subprocess.Popen, limits: ResourceLimits, output_path: Path,
          seen: dict[int, int], extra=None, poll_s: float = POLL_S, lengthen=None) -> Breach | None:
    """Wait for proc to exit; returns the first limit it broke (the caller kills it).

    `seen` collects every process of the tree (pid -> start time), so processes that left the
    process group can still be killed afterwards. `extra()`, polled too, returns a Breach of a
    limit the caller keeps (a case's own time limit). `lengthen()`, asked only once the wall
    time has passed, returns the seconds it is lengthened by (the caller bounds them). poll_s: how
    often the process table is read (each read scans /proc).
    """
    deadline = time.monotonic() + limits.wall_s
    can_scan = os.path.isdir("/proc/self")
    while True:
        try:
            proc.wait(timeout=poll_s)
            return None
        except subprocess.TimeoutExpired:
            pass
        late = time.monotonic() - deadline
        if late > 0:
            more = lengthen() if lengthen else 0.0
            if late > more:
                ran = f"{limits.wall_s:g} s" if more < 1 else (
                    f"{limits.wall_s + more:.0f} s (its limit, {limits.wall_s:g} s, and {more:.0f} s "
                    "more for compiling)")
                return Breach("time", f"Time limit exceeded: the submission ran for more than {ran}")
        breach = extra() if extra else None
        if breach:
            return breach
        try:
            size = output_path.stat().st_size
        except OSError:
            size = 0
        if size > limits.output_bytes:
            return Breach("output", f"Output limit exceeded: the submission printed more than "
                                    f"{limits.output_bytes >> 20} MiB")
        if not can_scan:
            continue
        table = _proc_table()
        tree = descendants(proc.pid, table)
        seen.update((pid, table[pid][2]) for pid in tree)
        if len(tree) > limits.processes:
            return Breach("processes", f"Process limit exceeded: the submission started "
                                       f"{len(tree) - 1} processes (at most "
                                       f"{limits.processes - 1} are allowed)")
        resident = sum(table[pid][1] for pid in tree)
        if resident > limits.memory_bytes:
            return Breach("memory", f"Memory limit exceeded: the grading process used "
                                    f"{resident / GIB:.1f} GiB of CPU memory (the limit is "
                                    f"{limits.memory_bytes / GIB:.1f} GiB)")


def _stopped_or_gone(pid: int, started: int) -> bool:
    """Is this process (pid and start time) stopped, a zombie, or gone?"""
    fields = _stat(pid)
    try:
        if int(fields[19]) != started:
            return True  # the pid was reused: ours is gone
        return fields[0] in ("T", "t", "Z", "X", "x")
    except (TypeError, IndexError, ValueError):
        return True


def freeze(seen: dict[int, int], timeout_s: float = FREEZE_S) -> None:
    """Stop (SIGSTOP) the worker's whole tree before it is killed, scanning until no new process
    appears: a stopped process cannot fork, so a child forked between the last poll and the
    kill (and perhaps already out of the session) is found and stopped too. The tree is what
    descends from the processes in `seen` that still run (pid and start time: never a reused
    pid); adds what it finds to `seen`.

    A SIGSTOP takes effect only when its process next leaves the kernel: one in the middle of a
    fork (milliseconds for a process that has imported torch) goes on to finish it, and the child
    appears after that. So the tree counts as frozen only once every process it holds has been
    seen stopped (or gone) before a scan that finds nothing new. Gives up after timeout_s (a
    process stuck in the kernel), leaving the kill to do what it can."""
    import signal

    if not os.path.isdir("/proc/self"):
        return
    deadline = time.monotonic() + timeout_s
    stopped: set[int] = set()
    while True:
        settled = all(_stopped_or_gone(pid, seen[pid]) for pid in stopped)  # read before the scan
        table = _proc_table()
        roots = [pid for pid, started in seen.items() if pid in table and table[pid][2] == started]
        tree = {pid for r in roots for pid in descendants(r, table)}
        new = tree - stopped
        if not new and settled:
            return
        for pid in new:
            seen[pid] = table[pid][2]  # a pid seen before and reused since: this is ours now
            try:
                os.kill(pid, signal.SIGSTOP)
            except (ProcessLookupError, PermissionError):
                pass
        stopped |= new
        if time.monotonic() > deadline:
            return
        if not new:
            time.sleep(0.001)


def kill_all(seen: dict[int, int]) -> None:
    """Kill the processes seen in the tree that still run (the start time rules out reused pids)."""
    import signal

    if not seen:
        return
    table = _proc_table()
    for pid, started in seen.items():
        if pid not in table or table[pid][2] != started:
            continue
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def kill_tree(pid: int) -> None:
    """Stop, then kill, a process and everything it started (its own process group or not)."""
    import signal

    table = _proc_table() if os.path.isdir("/proc/self") else {}
    seen = {pid: table[pid][2]} if pid in table else {}
    freeze(seen)
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    kill_all(seen)
