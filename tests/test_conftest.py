"""The `shared_data` marker's hook (tests/conftest.py): skip with the missing paths as the reason, or fail
under REQUIRE_SHARED_DATA=1; run on this very test's item."""

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
