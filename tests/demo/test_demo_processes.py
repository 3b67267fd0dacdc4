"""The demo's schedule across a stop and a re-run (demo/processes.py, demo/steps.py): a stopped or failed run
leaves no process working, so a re-run starts the commands a first run starts and no others; a re-run that
finds an earlier run's processes still holding its `--demo_dir` (the run was killed with SIGKILL) is refused
before it starts anything. Real processes stand in for the trainings; nothing is trained."""

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from demo import commands, processes
from demo import steps as demo
from tests.conftest import ROOT

# A stand-in for a training: says it is ready, and on SIGTERM "saves" (sleeps a little, so a second SIGTERM
# would be seen) and writes how many SIGTERMs it got, then exits 143 as `models.training.train` does.
TRAINING = """
import signal, sys, time
got = []
signal.signal(signal.SIGTERM, lambda signum, frame: got.append(signum))
print("ready", flush=True)
while not got:
    time.sleep(0.01)
time.sleep(0.5)
open(sys.argv[1], "w").write(str(len(got)))
sys.exit(143)
"""


def _wait_for(condition, seconds: float = 60):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_failure_ends_the_track_beside_with_one_sigterm_and_starts_nothing_after(tmp_path, capsys):
    """Step 7's failure, Ctrl-C or SIGTERM (`steps._stop_beside`): step 8's track, running beside, has its
    running command sent one SIGTERM (a training saves its checkpoint; a second signal would make it give up
    unsaved), starts none of its later commands, and its output is printed before the demo reports."""
    saved, later = tmp_path / "sigterms", tmp_path / "later_started"
    raised = []

    def track(sink):  # the continued track: a training, then (were it not stopped) the next command
        try:
            commands.run([sys.executable, "-c", TRAINING, str(saved)], sink=sink)
        except subprocess.CalledProcessError as e:
            sink.append(f"status {e.returncode}")
        try:
            commands.run([sys.executable, "-c", f"open({str(later)!r}, 'w')"], sink=sink)
        except processes.Stopped as e:
            raised.append(e)

    with processes.holding(str(tmp_path / "demo")):
        demo._start_beside(track)
        sink = demo._BESIDE["continued"][1]
        _wait_for(lambda: "  ready" in sink)
        started = time.monotonic()
        demo._stop_beside()
        assert time.monotonic() - started < 30 and "continued" not in demo._BESIDE
    assert saved.read_text() == "1" and len(raised) == 1 and not later.exists()
    assert capsys.readouterr().out.splitlines()[-2:] == ["  ready", "status 143"]  # nothing echoed after
    commands.run([sys.executable, "-c", "pass"])  # the next run (in this process) starts commands again


DRIVER = """
import sys, time
from demo import processes
with processes.holding(sys.argv[1]):
    with processes.child([sys.executable, "-c", "import time; time.sleep(600)"]) as training:
        print(training.pid, flush=True)
        time.sleep(600)
"""


def test_a_rerun_beside_a_killed_runs_processes_is_refused_before_any_work(tmp_path, capsys):
    """kill -9 of a demo cannot be caught: its training goes on, holding the demo_dir's lock it inherited.
    A re-run then refuses to start (rather than train beside it), naming it; once it ends, the folder is
    free."""
    demo_dir = tmp_path / "demo"
    first = subprocess.Popen([sys.executable, "-c", DRIVER, str(demo_dir)], cwd=ROOT, stdout=subprocess.PIPE,
                             text=True)
    training = int(first.stdout.readline())
    first.kill()
    first.wait()
    try:
        before = sorted(os.listdir(demo_dir))
        assert demo.main(["--demo_dir", str(demo_dir), "--cache_dir", str(tmp_path / "cache")]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err == (f"error: --demo_dir {demo_dir} is in use by another demo run or the processes "
                                     f"it started (PID {training} (python)): wait for them to end, or stop them, "
                                     f"then rerun\n")
        assert sorted(os.listdir(demo_dir)) == before and not (tmp_path / "cache").exists()
    finally:
        os.kill(training, signal.SIGKILL)
    _wait_for(lambda: not processes.holders_of(str(demo_dir / processes.LOCK_FILE)))
    with processes.holding(str(demo_dir)):
        pass


# `python -m demo` with Ctrl-C's default action, which a test runner started in the background may have
# inherited as "ignore" (a shell's `&` does that).
AS_FROM_A_TERMINAL = [sys.executable, "-c", "import runpy, signal; signal.signal(signal.SIGINT, "
                      "signal.default_int_handler); runpy.run_module('demo', run_name='__main__')"]


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_demo_leaves_no_process_behind(signum, tmp_path):
    """`python -m demo` stopped (SIGTERM; SIGINT as Ctrl-C sends it) while step 2's Beam job runs: it stops
    the job, says so in one line, exits 128 + N, and nothing holds its demo_dir any more."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"Sentence {i} of document {d}.\n" + ("\n" if i == 2 else "")
                              for d in range(40) for i in range(3)))
    senses = tmp_path / "senses.jsonl"
    senses.write_text("")
    demo_dir = tmp_path / "demo"
    lock = str(demo_dir / processes.LOCK_FILE)
    run = subprocess.Popen([*AS_FROM_A_TERMINAL, "--demo_dir", str(demo_dir), "--corpus", str(corpus),
                            "--senses", str(senses), "--cache_dir", str(tmp_path / "cache")], cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: any(what == "(pipeline.clean)" for _, what in processes.holders_of(lock)), 300)
        run.send_signal(signum)
        out, err = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 128 + signum, err
    stopped = "interrupted" if signum == signal.SIGINT else "stopped by signal 15"
    assert err.splitlines()[-1] == f"{stopped}: finished steps are kept, so a re-run resumes"
    assert "== 2. cleaning" in out and "== 3." not in out
    assert processes.holders_of(lock) == []
