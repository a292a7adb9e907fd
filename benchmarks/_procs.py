"""Process facts from ``/proc`` for the benchmarks: the JVM this Python process started, the
Python workers below it, and their resident memory (now, and peak since a reset)."""

from __future__ import annotations

import os


def children() -> dict[int, list[int]]:
    """Parent pid -> child pids, for every process."""
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def kib_field(pid: int, file: str, field: str) -> int:
    """Bytes of a ``kB`` field (``VmRSS:``, ``VmHWM:``, ``Pss:``) of ``/proc/<pid>/<file>``; 0 if gone."""
    try:
        with open(f"/proc/{pid}/{file}") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def rss(pid: int) -> int:
    return kib_field(pid, "status", "VmRSS:")


def peak_rss(pid: int) -> int:
    """Peak resident memory since the process started or ``reset_peak`` (``VmHWM``)."""
    return kib_field(pid, "status", "VmHWM:")


def reset_peak(pid: int) -> None:
    """Start a new peak-RSS measurement for ``pid`` (Linux: ``5`` to ``clear_refs``)."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def pss(pid: int) -> int:
    """Proportional set size: shared pages (forked daemons, libraries) split between sharers."""
    return kib_field(pid, "smaps_rollup", "Pss:")


def comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def worker_daemons() -> list[int]:
    """Spark's Python worker daemons under the JVM this process started (one per worker module:
    planning, data source reads, ...); the workers are forked from them."""
    tree = children()
    jvms, workers = jvm_and_python_workers(tree)
    return sorted(w for j in jvms for w in tree.get(j, []) if w in workers)


def jvm_and_python_workers(tree: dict[int, list[int]] | None = None) -> tuple[list[int], list[int]]:
    """The JVMs this process started, and every Python process below them (Spark's Python
    worker daemon and the workers it forks)."""
    tree = children() if tree is None else tree
    jvms = [c for c in tree.get(os.getpid(), []) if comm(c) == "java"]
    workers, stack = [], list(jvms)
    while stack:
        pid = stack.pop()
        for child in tree.get(pid, []):
            stack.append(child)
            if comm(child).startswith("python"):
                workers.append(child)
    return jvms, workers
