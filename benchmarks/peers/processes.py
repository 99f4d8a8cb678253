"""The contenders' processes, watched from outside: a process and its descendants (Ray's and Sample Factory's
workers included), their summed resident memory, and stopping all of them by process id; and the order a task runs
them in (:func:`interleaved`)."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator


def children_by_parent() -> dict[int, list[int]]:
    """Every process now, as ``{parent pid: [child pids]}`` (from /proc's parent links)."""
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def process_tree(pid: int) -> list[int]:
    """``pid`` and every descendant of it, now."""
    kids, tree, todo = children_by_parent(), [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo.extend(kids.get(p, []))
    return tree


def tree_rss_mib(pids: list[int]) -> float:
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            pass
    return total / 2**20


def cpu_seconds(pid: int, waited_children: bool = False) -> float:
    """User + system CPU seconds of a process (all its threads), from /proc; with ``waited_children`` also those of
    its children it has waited for (ended and reaped). 0 where it cannot be read (the process has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    ticks = fields[11:15] if waited_children else fields[11:13]  # utime stime [cutime cstime]: fields 14-17
    return sum(int(x) for x in ticks) / os.sysconf("SC_CLK_TCK")


def tree_cpu_s(pids: list[int], seen: dict[int, float]) -> float:
    """CPU seconds (user + system, all threads) of every process in ``pids`` and of every one ``seen`` before: each
    process's latest reading is kept in ``seen``, so one that has ended still counts with its last one (the time it
    ran after that reading is lost: the watch reads every 0.25 s). Own time only: a reaped child's time is not
    counted twice through its parent."""
    for p in pids:
        seen[p] = max(seen.get(p, 0.0), cpu_seconds(p))
    return sum(seen.values())


def machine_cpu_s() -> float:
    """CPU seconds the whole machine has been busy (every core: user, nice, system, irq, softirq, steal; not idle
    or iowait), from ``/proc/stat``: beside :func:`tree_cpu_s`, what a process tree's count may have missed."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    busy = sum(fields[:8]) - fields[3] - fields[4]  # user nice system idle iowait irq softirq steal
    return busy / os.sysconf("SC_CLK_TCK")


def stop_tree(proc: subprocess.Popen[str], tree: list[int]) -> None:
    """End the contender and everything it started (Ray's processes too), by process id."""
    everyone = set(tree) | set(process_tree(proc.pid))
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
        for p in everyone - {proc.pid}:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        try:
            proc.wait(timeout=10)
            break
        except subprocess.TimeoutExpired:
            continue


def interleaved(names: list[str], seeds: list[int]) -> Iterator[tuple[int, str]]:
    """``(seed, contender)`` in the order a task runs them: every contender on a seed before the next seed, the
    order rotated by one each seed, so that a drift of the machine's speed falls on every contender alike."""
    for i, seed in enumerate(seeds):
        for name in names[i % len(names):] + names[:i % len(names)]:
            yield seed, name


@dataclass
class Watched:
    """How a watched process went: ``wall_s`` from its start until it was stopped or ended; ``peak_rss_mib`` of its
    whole tree; ``budget_reached``: stopped by the wall-time budget; ``returncode`` after it was stopped;
    ``stderr_tail``: its last three non-empty stderr lines, joined (at most 400 characters); ``line_cpu_s``: for each
    stdout line given to ``on_line``, in order, the CPU seconds its tree had used when the line was read
    (:func:`tree_cpu_s`), so a window between two lines has its CPU time as well as its wall time;
    ``line_machine_cpu_s``: the same for the whole machine (:func:`machine_cpu_s`)."""

    wall_s: float = 0.0
    peak_rss_mib: float = 0.0
    budget_reached: bool = False
    returncode: int | None = None
    stderr_tail: str = ""
    line_cpu_s: list[float] = field(default_factory=list)
    line_machine_cpu_s: list[float] = field(default_factory=list)


def watch(command: list[str], on_line: Callable[[float, str], bool], budget_s: float, cwd: Path,
          env: dict[str, str]) -> Watched:
    """Start ``command`` in a session of its own and give each stdout line, with its arrival time in seconds since
    the start, to ``on_line``; stop the process tree when ``on_line`` returns True, when the process ends or after
    ``budget_s``. The tree's memory and CPU time are sampled every 0.25 s, its CPU time also at each line. The tree is
    stopped also when this is interrupted."""
    out = Watched()
    lines: queue.Queue[tuple[float, str | None]] = queue.Queue()
    stderr = tempfile.TemporaryFile(mode="w+")
    start = time.perf_counter()
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True,
                            start_new_session=True)

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put((time.perf_counter() - start, line))
        lines.put((time.perf_counter() - start, None))

    threading.Thread(target=read, daemon=True).start()
    tree = [proc.pid]
    cpu_seen: dict[int, float] = {}
    next_sample = 0.0
    try:
        while True:
            now = time.perf_counter() - start
            if now >= next_sample:
                alive = process_tree(proc.pid)
                tree[:] = sorted(set(tree) | set(alive))  # everyone seen, for stop_tree
                out.peak_rss_mib = max(out.peak_rss_mib, tree_rss_mib(alive))
                tree_cpu_s(alive, cpu_seen)
                next_sample = now + 0.25
            if now > budget_s:
                out.budget_reached = True
                break
            try:
                at, line = lines.get(timeout=0.05)
            except queue.Empty:
                continue
            if line is None:
                break
            out.line_cpu_s.append(tree_cpu_s(process_tree(proc.pid), cpu_seen))
            out.line_machine_cpu_s.append(machine_cpu_s())
            if on_line(at, line):
                break
    finally:
        out.wall_s = time.perf_counter() - start
        stop_tree(proc, tree)
        out.returncode = proc.returncode
        stderr.seek(0)
        tail = [ln for ln in stderr.read().splitlines() if ln.strip()][-3:]
        out.stderr_tail = " | ".join(tail)[-400:]
        stderr.close()
    return out
