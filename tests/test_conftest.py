"""The hooks of tests/conftest.py: the `shared_data` marker (skip with the missing paths as the reason, or fail
under REQUIRE_SHARED_DATA=1) and the per-test time budget; run on this very test's item or in a pytester run."""

import pytest

from tests import conftest


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
    assert conftest.budget_of(request.node) == (conftest.BUDGET_S, "the default 120 s")
    monkeypatch.setenv("TEST_BUDGET_SCALE", "2")
    assert conftest.budget_of(request.node)[0] == 2 * conftest.BUDGET_S
    request.node.add_marker(pytest.mark.budget(300, "the demo end to end"))
    assert conftest.budget_of(request.node) == (600, "its budget of 300 s (x2) (the demo end to end)")


def test_a_budget_without_a_reason_is_refused():
    class Item:
        nodeid = "tests/x.py::test_y"

        def get_closest_marker(self, name):
            return pytest.mark.budget(300).mark if name == "budget" else None

    with pytest.raises(pytest.UsageError, match="test_y: @pytest.mark.budget needs a reason"):
        conftest.budget_of(Item())


def test_a_test_over_its_budget_errors_at_teardown(pytester, monkeypatch):
    """The hook in a pytest run of its own: one test over a (scaled) budget errors, a marked one passes."""
    pytester.makeconftest("from tests.conftest import pytest_runtest_makereport, BUDGET_S  # noqa: F401")
    pytester.makeini("[pytest]\nmarkers =\n    budget(seconds, reason): test budget\n")
    pytester.makepyfile("""
        import time, pytest
        def test_over():
            time.sleep(0.2)
        @pytest.mark.budget(1000, "allowed longer")
        def test_marked():
            time.sleep(0.2)
    """)
    pytester.syspathinsert(conftest.ROOT)
    monkeypatch.setenv("TEST_BUDGET_SCALE", "0.001")  # 0.12 s by default, 1 s for the marked test
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:xdist")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*test_over took * s (setup, call and teardown), over the default 120 s (x0.001)*"])
