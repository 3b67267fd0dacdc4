"""The hooks of tests/conftest.py: the `shared_data` marker (skip with the missing paths as the reason, or fail
under REQUIRE_SHARED_DATA=1), the per-test CPU budget and the suite's CPU total; run on this very test's item or in a
pytester run."""

import subprocess
import sys
import textwrap
import time

import pytest

from tests import conftest, process_cpu


@pytest.fixture
def shared(tmp_path, monkeypatch):
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "pretrain.txt.gz").write_bytes(b"")
    monkeypatch.setattr(conftest, "SHARED_DATA", str(tmp_path))
    monkeypatch.delenv("REQUIRE_SHARED_DATA", raising=False)
    return tmp_path


def test_present_paths_and_unmarked_tests_run(request, shared):
    conftest.pytest_runtest_setup(request.node)  # no marker
    request.node.add_marker(pytest.mark.shared_data("corpus/pretrain.txt.gz"))
    conftest.pytest_runtest_setup(request.node)
    request.node.add_marker(pytest.mark.shared_data())  # the folder itself
    conftest.pytest_runtest_setup(request.node)


def test_a_missing_path_skips_with_the_path_as_reason(request, shared):
    request.node.add_marker(pytest.mark.shared_data("corpus/pretrain.txt.gz", "tasks/sst2/train.tsv"))
    with pytest.raises(pytest.skip.Exception) as raised:
        conftest.pytest_runtest_setup(request.node)
    assert str(raised.value) == f"shared data missing: {shared}/tasks/sst2/train.tsv (set SHARED_DATA)"


def test_require_shared_data_turns_the_skip_into_a_failure(request, shared, monkeypatch):
    monkeypatch.setattr(conftest, "SHARED_DATA", str(shared / "absent"))
    monkeypatch.setenv("REQUIRE_SHARED_DATA", "1")
    request.node.add_marker(pytest.mark.shared_data())
    with pytest.raises(pytest.fail.Exception, match=r"shared data missing: .*/absent \(set SHARED_DATA\); "
                                                    r"REQUIRE_SHARED_DATA=1 forbids skipping"):
        conftest.pytest_runtest_setup(request.node)


def test_budget_is_the_default_or_the_marked_one_scaled(request, monkeypatch):
    monkeypatch.delenv("TEST_BUDGET_SCALE", raising=False)
    assert conftest.budget_of(request.node) == (conftest.BUDGET_S, "the default 120 CPU-s")
    monkeypatch.setenv("TEST_BUDGET_SCALE", "2")
    assert conftest.budget_of(request.node)[0] == 2 * conftest.BUDGET_S
    request.node.add_marker(pytest.mark.budget(300, "the demo end to end"))
    assert conftest.budget_of(request.node) == (600, "its budget of 300 CPU-s (x2) (the demo end to end)")


def test_a_budget_without_a_reason_is_refused():
    class Item:
        nodeid = "tests/x.py::test_y"

        def get_closest_marker(self, name):
            return pytest.mark.budget(300).mark if name == "budget" else None

    with pytest.raises(pytest.UsageError, match="test_y: @pytest.mark.budget needs a reason"):
        conftest.budget_of(Item())


BURN_S = 0.6  # CPU-seconds each burning test below uses: over the default budget scaled to 0.24


def _burner(seconds: float, then_sleep: bool = False) -> list[str]:
    """A child process that burns `seconds` of its own CPU, says so, then (optionally) sleeps until killed."""
    code = (f"import sys, time\nend = time.process_time() + {seconds}\nwhile time.process_time() < end: pass\n"
            f"print('burnt', flush=True)\n" + ("time.sleep(600)\n" if then_sleep else ""))
    return [sys.executable, "-c", code]


def test_the_tree_count_takes_in_a_child_before_and_after_it_is_waited_for():
    """A running child counts, a killed one not yet waited for (a zombie) too, and waiting for it moves its
    time from /proc to getrusage without counting it twice."""
    before = process_cpu.tree_cpu_seconds()
    child = subprocess.Popen(_burner(BURN_S, then_sleep=True), stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "burnt"
    running = process_cpu.tree_cpu_seconds() - before
    child.kill()
    while open(f"/proc/{child.pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
        time.sleep(0.01)
    zombie = process_cpu.tree_cpu_seconds() - before
    child.wait()
    waited = process_cpu.tree_cpu_seconds() - before
    assert BURN_S <= running <= zombie <= waited < running + 0.3


INNER_TESTS = """
    import subprocess, sys, threading, time
    import pytest

    KEPT = []  # a killed server's process, as a fixture that never waits for it keeps it

    def burn():
        end = time.thread_time() + BURN_S
        while time.thread_time() < end:
            pass

    def test_sleeps_while_the_machine_is_busy():
        time.sleep(1.5)

    def test_waits_for_a_child_that_sleeps():
        subprocess.run([sys.executable, "-c", "import time; time.sleep(1.5)"], check=True)

    def test_burns_cpu():
        burn()

    def test_burns_cpu_in_a_thread():
        thread = threading.Thread(target=burn)
        thread.start()
        thread.join()

    def test_a_child_it_waits_for_burns_cpu():
        subprocess.run(BURNER, check=True, stdout=subprocess.DEVNULL)

    def test_a_child_it_kills_without_waiting_burns_cpu():
        KEPT.append(subprocess.Popen(SLEEPING_BURNER, stdout=subprocess.PIPE, text=True))
        assert KEPT[-1].stdout.readline().strip() == "burnt"
        KEPT[-1].kill()

    @pytest.mark.budget(1000, "allowed more")
    def test_marked_burns_cpu():
        burn()
"""


def test_a_test_over_its_cpu_budget_errors_at_teardown_and_waiting_does_not_count(pytester, monkeypatch):
    """The hooks in a pytest run of its own, under xdist, beside a busy process that are not its own:
    tests that sleep or wait keep to a budget far under their wall time; tests that burn CPU (in the test,
    a thread, a child waited for or one killed and never waited for) error, unless their budget allows it.
    With --durations, the CPU list names them."""
    pytester.makeconftest("from tests.conftest import pytest_runtest_protocol, pytest_runtest_makereport, "
                          "pytest_terminal_summary  # noqa: F401")
    pytester.makeini("[pytest]\nmarkers =\n    budget(seconds, reason): test budget\n")
    pytester.makepyfile(test_inner=f"BURN_S = {BURN_S}\nBURNER = {_burner(BURN_S)!r}\n"
                                   f"SLEEPING_BURNER = {_burner(BURN_S, then_sleep=True)!r}\n"
                                   + textwrap.dedent(INNER_TESTS))
    monkeypatch.setenv("PYTHONPATH", conftest.ROOT)
    monkeypatch.setenv("TEST_BUDGET_SCALE", "0.002")  # 0.24 CPU-s by default, 2 CPU-s for the marked test
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # not in the inner run's process tree
    try:
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--durations=4",
                                               timeout=240)
    finally:
        hog.kill()
        hog.wait()
    result.assert_outcomes(passed=7, errors=4)
    for name in ("test_burns_cpu", "test_burns_cpu_in_a_thread", "test_a_child_it_waits_for_burns_cpu",
                 "test_a_child_it_kills_without_waiting_burns_cpu"):
        result.stdout.fnmatch_lines([f"*::{name} used * CPU-seconds (its process and the processes it started; "
                                     f"setup, call and teardown; * s wall), over the default 120 CPU-s (x0.002)*"])
    result.stdout.fnmatch_lines(["*4 tests using the most CPU*", "* CPU-s * s wall  test_inner.py::test_*"])
    assert "test_sleeps_while_the_machine_is_busy used" not in result.stdout.str()


SUITE_TESTS = """
    import time

    def burn():
        end = time.process_time() + 0.1
        while time.process_time() < end:
            pass

    def test_one():
        burn()

    def test_two():
        burn()
"""


@pytest.mark.parametrize("budget, args, said", [
    (1000, [], "CPU: 2 tests used * CPU-seconds, within the suite's budget of 1,000"),
    (0.1, [], "CPU: 2 tests used * CPU-seconds: OVER the suite's budget of 0 by 0 (tests/conftest.py "
              "SUITE_BUDGET_S; the costliest tests are listed above)"),
    (0.1, ["-k", "one"], "CPU: 1 test used * CPU-seconds (the suite's budget of 0 is for a whole run)"),
], ids=["within", "over", "a-selection"])
def test_the_summary_gives_the_suites_cpu_against_its_budget_on_a_whole_run(pytester, monkeypatch, budget, args,
                                                                             said):
    """The last line before pytest's own: the tests' CPU-seconds added up, against `SUITE_BUDGET_S` only when
    the run is the whole suite (pytest.ini's `testpaths`, nothing deselected); over it, the run still passes."""
    pytester.makeconftest("import tests.conftest as suite\n"
                          "from tests.conftest import pytest_runtest_protocol, pytest_runtest_makereport, "
                          f"pytest_terminal_summary  # noqa: F401\nsuite.SUITE_BUDGET_S = {budget}\n")
    pytester.makeini("[pytest]\ntestpaths = test_suite.py\n")
    pytester.makepyfile(test_suite=textwrap.dedent(SUITE_TESTS))
    monkeypatch.setenv("PYTHONPATH", conftest.ROOT)
    monkeypatch.delenv("TEST_BUDGET_SCALE", raising=False)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=120)
    assert result.ret == 0
    result.stdout.fnmatch_lines([said])
