"""The CPU-seconds of this process and every process it started: what a test's budget counts (tests/conftest.py).

`resource.getrusage` gives this process (all its threads, `RUSAGE_SELF`) and the children it has waited for
(`RUSAGE_CHILDREN`, with the descendants each of them waited for). A child that is still running, or that
was killed and not yet waited for (a zombie: a server a fixture stopped without `wait()`), is in neither: its
CPU time is read from `/proc/<pid>/stat` (its own threads and the children it waited for), for every
descendant still in this process tree. When it is waited for later, its time moves from the second sum to
the first, so `tree_cpu_seconds()` only grows with the work done, whichever test happens to reap it.

Not counted: a descendant whose parent died before it (re-parented out of the tree, such as a daemon that
detached itself), from that moment. Without `/proc` (not Linux) only the `getrusage` sums are counted.
"""

import os
import resource

_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01


def tree_cpu_seconds() -> float:
    """User + system CPU-seconds of this process, its waited-for children and its live (or zombie)
    descendants."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total + _live_descendants_cpu_seconds()


def _has_children() -> bool:
    """Whether this process has any child, running or a zombie (without waiting for any)."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


def _live_descendants_cpu_seconds() -> float:
    if not os.path.isdir("/proc") or not _has_children():
        return 0.0
    stats = _process_stats()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, list(children.get(os.getpid(), ()))
    while todo:
        pid = todo.pop()
        total += stats[pid][1]
        todo.extend(children.get(pid, ()))
    return total * _TICK_S


def _process_stats() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, utime + stime + cutime + cstime in clock ticks) of every process in /proc."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()  # after "pid (comm)": comm may hold spaces
        except (OSError, IndexError):  # gone meanwhile
            continue
        out[int(name)] = (int(fields[1]), sum(int(x) for x in fields[11:15]))
    return out
