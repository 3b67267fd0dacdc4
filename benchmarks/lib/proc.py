"""Process-tree measurements through /proc, shared by the benchmarks (Linux only), and `run_module`, the
benchmarks' way of running one of the project's commands.

`tree_rss_kb(root)`: the summed VmRSS of a process and all its descendants (found through the ppid fields of
/proc/*/stat), and how many there are. `run_tree(cmd, ...)`: runs a command under a small wrapper and
measures its whole process tree:
  - CPU time: the wrapper makes itself a child subreaper (`prctl(PR_SET_CHILD_SUBREAPER)`), runs the command,
    waits for it, then waits for every descendant that was orphaned and re-parented to it, and reports
    `resource.getrusage(RUSAGE_CHILDREN)`: user + sys of the command and of every descendant that was waited
    for (by its own parent or by the wrapper), i.e. the whole tree, the wrapper itself excluded; its
    `ru_maxrss` is the largest peak RSS of any single process of the tree, as the kernel counted it;
  - memory, sampled every `POLL_S` seconds: the summed VmRSS over the tree (the wrapper excluded) and, per
    process, its VmHWM (the kernel's own peak RSS of that process, so a short spike between two samples is
    not missed while the process is alive) with its command line and depth below the wrapper; also each
    process's last seen utime + stime (a per-process CPU breakdown, up to `POLL_S` short per process).
RSS counts shared pages (libraries, copy-on-write memory) once per process, so sums over processes that
share memory overstate the physical memory used.
"""

import json
import os
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the project's checkout
POLL_S = 0.1
_TICK = os.sysconf("SC_CLK_TCK")

WRAPPER = r"""
import ctypes, json, os, resource, signal, subprocess, sys, time
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
result_path, cmd = sys.argv[1], sys.argv[2:]
rc = subprocess.Popen(cmd).wait()
orphans, killed, deadline = 0, 0, time.time() + 60
while True:  # reap descendants orphaned onto this process; kill any still running after 60 s
    try:
        pid, _ = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        break
    if pid:
        orphans += 1
        continue
    if time.time() > deadline:
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    with open(f"/proc/{name}/stat", "rb") as f:
                        stat = f.read()
                except OSError:
                    continue
                if int(stat[stat.rindex(b")") + 2:].split()[1]) == os.getpid():
                    os.kill(int(name), signal.SIGKILL)
                    killed += 1
        deadline = float("inf")
    time.sleep(0.05)
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(result_path, "w") as f:
    json.dump({"rc": rc, "user_s": ru.ru_utime, "sys_s": ru.ru_stime, "max_rss_kb": ru.ru_maxrss,
               "orphans_reaped": orphans, "orphans_killed": killed}, f)
sys.exit(rc)
"""


def pid_stat(pid: int):
    """(ppid, start time, utime + stime in s) of a process, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(b")") + 2:].split()  # after "(comm)": state, ppid, ...
    return int(fields[1]), int(fields[19]), (int(fields[11]) + int(fields[12])) / _TICK


def _children() -> dict[int, list[int]]:
    """ppid -> pids, over every process visible in /proc."""
    tree: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
        tree.setdefault(ppid, []).append(int(name))
    return tree


def status_kb(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) in kB; zeros for a process that is gone or a zombie."""
    rss = hwm = 0
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
                elif line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
                    break  # VmRSS follows VmHWM
    except OSError:
        pass
    return rss, hwm


def _rss_kb(pid: int) -> int:
    return status_kb(pid)[0]


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def tree_rss_kb(root: int) -> tuple[int, int]:
    """(summed VmRSS in kB, number of processes) of `root` and all its descendants."""
    tree, total, count, todo = _children(), 0, 0, [root]
    while todo:
        pid = todo.pop()
        total, count = total + _rss_kb(pid), count + 1
        todo.extend(tree.get(pid, ()))
    return total, count


class _TreeSampler:
    """Samples the descendants of `root` (not `root` itself) every POLL_S seconds."""

    def __init__(self, root: int):
        self.root = root
        self.peak_total_kb = 0
        self.max_procs = 0
        self.procs: dict[tuple[int, int], dict] = {}  # (pid, start time) -> details

    def sample(self) -> None:
        tree, total, count = _children(), 0, 0
        todo = [(pid, 1) for pid in tree.get(self.root, ())]
        while todo:
            pid, depth = todo.pop()
            todo.extend((child, depth + 1) for child in tree.get(pid, ()))
            stat = pid_stat(pid)
            if stat is None:
                continue
            rss, hwm = status_kb(pid)
            total, count = total + rss, count + 1
            info = self.procs.setdefault((pid, stat[1]), {"pid": pid, "start": stat[1], "depth": depth,
                                                           "peak_kb": 0, "cmdline": [], "cpu_s": 0.0})
            info["peak_kb"] = max(info["peak_kb"], rss, hwm)
            info["cpu_s"] = max(info["cpu_s"], stat[2])
            cmdline = _cmdline(pid)
            if cmdline:  # the latest (a process may exec another program)
                info["cmdline"] = cmdline
        self.peak_total_kb = max(self.peak_total_kb, total)
        self.max_procs = max(self.max_procs, count)


def run_tree(cmd: list[str], log_path: str, cwd: str | None = None, env: dict | None = None) -> dict:
    """Runs `cmd` (stdout and stderr to `log_path`) under the subreaper wrapper and measures its tree.

    Returns: rc, wall_s, user_s, sys_s, cpu_s (the whole tree, from rusage), kernel_max_rss_mb (largest
    single process), peak_tree_rss_mb (largest sampled sum of VmRSS), max_procs, and processes: one dict
    per process seen (pid, start, depth, peak_kb, cmdline, cpu_s), in start order.
    """
    result_path = log_path + ".rusage.json"
    with open(log_path, "wb") as log:
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", WRAPPER, result_path] + list(cmd), cwd=cwd, env=env,
                                stdout=log, stderr=subprocess.STDOUT)
        sampler, done = _TreeSampler(proc.pid), threading.Event()

        def poll():
            while not done.is_set():
                sampler.sample()
                done.wait(POLL_S)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        rc = proc.wait()
        wall = time.perf_counter() - start
        done.set()
        poller.join()
    try:
        with open(result_path) as f:
            usage = json.load(f)
    except (OSError, ValueError):
        usage = {"rc": rc, "user_s": float("nan"), "sys_s": float("nan"), "max_rss_kb": 0}
    return {"rc": usage["rc"], "wall_s": wall, "user_s": usage["user_s"], "sys_s": usage["sys_s"],
            "cpu_s": usage["user_s"] + usage["sys_s"], "kernel_max_rss_mb": usage["max_rss_kb"] / 1024,
            "orphans_reaped": usage.get("orphans_reaped", 0), "orphans_killed": usage.get("orphans_killed", 0),
            "peak_tree_rss_mb": sampler.peak_total_kb / 1024, "max_procs": sampler.max_procs,
            "processes": sorted(sampler.procs.values(), key=lambda p: (p["start"], p["pid"]))}


def log_tail(path: str, lines: int = 30) -> str:
    with open(path, errors="replace") as f:
        return "".join(f.readlines()[-lines:])


def child_env(root: str = ROOT, **extra: str) -> dict:
    """The environment of a command run from the checkout at `root`: its packages first on the path,
    TensorFlow's start-up logs quiet, and `extra` variables."""
    return dict(os.environ, PYTHONPATH=root, TF_CPP_MIN_LOG_LEVEL="2", **extra)


def last_json(stdout: str) -> dict:
    """The JSON object a project command prints as its last line."""
    return json.loads(stdout.strip().splitlines()[-1])


def run_module(args: list[str], root: str = ROOT) -> str:
    """Runs `python -m ARGS` from the project root (or the checkout at `root`); returns its stdout, or raises
    with the end of stderr."""
    result = subprocess.run([sys.executable, "-m", *args], cwd=root, capture_output=True, text=True,
                            env=child_env(root))
    if result.returncode:
        raise RuntimeError(f"python -m {' '.join(args)} failed:\n{result.stderr[-4000:]}")
    return result.stdout
