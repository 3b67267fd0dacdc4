"""How the demo runs the project's commands and keys its steps: child processes with their stdout echoed,
TensorFlow's start-up noise (and three harmless Beam worker warnings) filtered out of stderr, and digests
that tell a step its inputs changed."""

import glob
import hashlib
import os
import re
import subprocess
import sys
import threading

from demo import processes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the project root

# What TensorFlow's C++ side prints at start-up on a CPU machine, before its logging is configured (so
# TF_CPP_MIN_LOG_LEVEL cannot hide it), and warnings that local Beam workers log: harmless, and dropped
# from this process's and its children's stderr.
_TF_NOISE = re.compile(r"^(WARNING: All log messages before absl::InitializeLog|[IWE]0000 [\d:.]+ +\d+ "
                       r"((port|cudart_stub|cuda_platform|cuda_executor|cuda_diagnostics)\.cc:\d+\]|"
                       r"util\.cc:\d+\] oneDNN supports DT_INT64)|"
                       # and Beam's local workers, started with the launcher's options, on two of them
                       r"WARNING:apache_beam\.runners\.portability\.local_job_service:Worker: severity: WARN .*"
                       r"message: \"(Discarding unparseable args|No semi_persistent_directory found|"
                       # and RunInference on a local worker, which cannot read its memory use
                       r"Resource module is not available for current platform))")


def is_noise(line: str) -> bool:
    return bool(_TF_NOISE.match(line))


def filter_stderr() -> threading.Thread:
    """Points file descriptor 2 (this process's C++ code and every child inherit it) at a pipe whose lines are
    passed on to the real stderr unless they are TF's start-up noise. Join the returned thread after
    `close_stderr()` to flush the rest."""
    read_fd, write_fd = os.pipe()
    real_stderr = os.fdopen(os.dup(2), "w")
    os.dup2(write_fd, 2)
    os.close(write_fd)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)

    def forward():
        with os.fdopen(read_fd, errors="replace") as lines:
            for line in lines:
                if not is_noise(line):
                    real_stderr.write(line)
                    real_stderr.flush()

    thread = threading.Thread(target=forward, daemon=True)
    thread.start()
    return thread


def close_stderr() -> None:
    sys.stderr.flush()
    os.close(2)


# tensorflow_hub 0.16.1 imports pkg_resources, whose deprecation warning every child that loads a module
# would print; the children run with it ignored (a user's own PYTHONWARNINGS comes first).
_CHILD_WARNINGS = "ignore:pkg_resources is deprecated:UserWarning"


def child_env() -> dict:
    """The children's environment: unbuffered stdout (progress lines as they come), TF-Hub's warning off."""
    warnings = ",".join(w for w in (os.environ.get("PYTHONWARNINGS"), _CHILD_WARNINGS) if w)
    return dict(os.environ, PYTHONUNBUFFERED="1", PYTHONWARNINGS=warnings)


def child(cmd: list[str]):
    """Context manager: `cmd` started from the project root (`demo.processes.child`: stopped with the demo),
    its stdout piped to the caller as text (stderr: ours)."""
    return processes.child(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, env=child_env())


def say(line: str, sink: list | None = None) -> None:
    """Prints `line`, or keeps it in `sink` (a command run beside others prints its lines when it is done)."""
    if sink is None:
        print(line, flush=True)
    else:
        sink.append(line)


def run(cmd: list[str], echo: bool = True, sink: list | None = None) -> str:
    """Runs `cmd` to the end, echoing its stdout as it comes (but its closing JSON line; into `sink` if
    given); returns the stdout. Raises CalledProcessError on a non-zero exit."""
    lines = []
    with child(cmd) as proc:
        if echo:
            say("$ " + " ".join(cmd), sink)
        for line in proc.stdout:
            lines.append(line)
            if echo and not line.startswith("{"):
                say("  " + line.rstrip(), sink)
        proc.wait()
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, cmd)
    return "".join(lines)


def run_all(cmds: list[list[str]], width: int = 2, sink: list | None = None) -> list[str]:
    """Runs `cmds` at most `width` at a time (what two cores gain on commands that spend their first seconds
    importing on one thread); each one's stdout is echoed when it ends (into `sink` if given). Returns the
    stdouts in order; raises CalledProcessError for the first that failed, once all have ended."""
    import concurrent.futures

    def one(cmd):
        with child(cmd) as proc:
            stdout, _ = proc.communicate()
        return cmd, proc.returncode, stdout

    outputs, failed = [], None
    with concurrent.futures.ThreadPoolExecutor(width) as pool:
        for cmd, status, stdout in pool.map(one, cmds):
            say("$ " + " ".join(cmd) + "".join(
                "\n  " + line for line in stdout.splitlines() if not line.startswith("{")), sink)
            outputs.append(stdout)
            failed = failed or (status and subprocess.CalledProcessError(status, cmd))
    if failed:
        raise failed
    return outputs


def module(name: str, *args: str, echo: bool = True, sink: list | None = None) -> str:
    """`python -m name args...` through `run`."""
    return run([sys.executable, "-m", name, *args], echo=echo, sink=sink)


def last_json(stdout: str) -> dict:
    """A command's closing JSON line."""
    import json
    return json.loads(stdout.strip().splitlines()[-1])


def source_digest(*packages: str) -> str:
    """sha256 over the project's Python sources in `packages`: a step keyed on it reruns when they change."""
    digest = hashlib.sha256()
    for package in packages:
        for path in sorted(glob.glob(os.path.join(ROOT, package, "**", "*.py"), recursive=True)):
            digest.update(os.path.relpath(path, ROOT).encode())
            with open(path, "rb") as f:
                digest.update(f.read())
    return digest.hexdigest()[:16]


def files_key(pattern: str) -> list:
    """[path, size, mtime] of each file matching `pattern`: a step keyed on it reruns when they change."""
    return [[path, os.path.getsize(path), os.path.getmtime(path)] for path in sorted(glob.glob(pattern))]


def key_matches(key_path: str, key) -> bool:
    """Whether the step whose inputs were recorded in `key_path` (`write_key`) ran on these same inputs."""
    import json

    if not os.path.exists(key_path):
        return False
    with open(key_path) as f:
        return json.load(f) == json.loads(json.dumps(key))  # through JSON: tuples compare as lists


def write_key(key_path: str, key) -> None:
    """Records the inputs a step ran on, after its output is complete (so a crash leaves no key)."""
    import json

    with open(key_path + ".tmp", "w") as f:
        json.dump(key, f)
    os.replace(key_path + ".tmp", key_path)


def file_sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def latest_checkpoint(model_dir: str) -> str:
    """The path of `model_dir`'s latest checkpoint (its `checkpoint` file names it relative to `model_dir`)."""
    with open(os.path.join(model_dir, "checkpoint")) as f:
        name = f.readline().split(":", 1)[1].strip().strip('"')
    return os.path.join(model_dir, name)  # an absolute name stays as it is


def size(path: str) -> str:
    """The size of a file or a folder tree, human-readable."""
    total = os.path.getsize(path) if os.path.isfile(path) else sum(
        os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)
    for unit in ("B", "KB", "MB", "GB"):
        if total < 1024 or unit == "GB":
            return f"{total:.0f} {unit}" if unit == "B" else f"{total:.1f} {unit}"
        total /= 1024
