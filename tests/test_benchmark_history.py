"""benchmarks.lib.history: the results file's lines and the verdict against the last figure on the same CPU.
No timing here: the figures are made up."""

import json

from benchmarks.lib import history
from benchmarks.lib.history import Figure


def entry(value, commit="aaa", cpu="AMD EPYC", workload="w", total=40.0, fixed=8.0, higher=True, isa="avx2"):
    figure = Figure("instances_per_cpu_s", value, higher, workload, total, fixed)
    return history.entry("pretraining_data", figure, commit, False, cpu, 2, "2026-12-01T22:00:00Z", isa)


def test_compare_finds_the_last_figure_of_the_same_workload_on_the_same_cpu_model():
    past = [entry(100, "a"), entry(110, "b"), entry(500, "c", cpu="Intel Xeon"), entry(90, "d", workload="other")]
    assert history.compare(past, entry(105))["commit"] == "b"
    assert history.compare(past, entry(105, cpu="Apple M2")) is None


def test_one_cpu_model_with_and_without_avx512_is_two_machines():
    """Both kinds of machine here report "AMD EPYC": the instruction sets keep their figures apart, and a line
    recorded before `cpu_isa` existed is compared with nothing."""
    legacy = entry(300, "old")
    del legacy["cpu_isa"]
    past = [legacy, entry(100, "avx512", isa="avx2+avx512f+avx512_bf16"), entry(60, "avx2")]
    assert history.compare(past, entry(62))["commit"] == "avx2"
    assert history.compare(past, entry(99, isa="avx2+avx512f+avx512_bf16"))["commit"] == "avx512"
    assert history.compare([legacy], entry(62)) is None
    assert "(avx2)" in history.verdict(None, entry(62))


def test_cpu_isa_reads_the_flags_that_matter(tmp_path, monkeypatch):
    info = tmp_path / "cpuinfo"
    info.write_text("processor : 0\nflags : fpu sse avx2 fma avx512f avx512bw avx512_bf16\n")
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    assert history.cpu_isa(str(info)) == "avx2+avx512f+avx512_bf16"
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert history.cpu_isa(str(info)) == "avx2+avx512f+avx512_bf16+onednn_avx2"
    info.write_text("flags : fpu sse avx avx2\n")
    assert history.cpu_isa(str(info)) == "avx2"
    assert history.cpu_isa(str(tmp_path / "missing")) == ""


def test_verdict_says_worse_only_beyond_20_percent_on_a_large_enough_workload():
    before = entry(20_000)
    assert "first figure" in history.verdict(None, before)
    assert "(within 20%)" in history.verdict(before, entry(17_000))
    assert "(better)" in history.verdict(before, entry(25_000))
    worse = history.verdict(before, entry(15_000))  # 25% worse; marginal 32 CPU-s >= 3 x 8
    assert "WORSE by 25%" in worse and "0.75x" in worse and "aaa" in worse
    small = history.verdict(before, entry(15_000, total=20.0, fixed=8.0))  # marginal 12 < 24
    assert "WORSE" not in small and "too small to tell" in small
    assert "fixed cost unknown" in history.verdict(before, entry(15_000, fixed=None))


def test_costs_are_worse_when_they_grow():
    before = entry(8.0, higher=False)
    assert "WORSE by 50%" in history.verdict(before, entry(12.0, higher=False))
    assert "(better)" in history.verdict(before, entry(6.0, higher=False))


def test_large_enough_is_marginal_work_at_least_three_times_the_fixed_cost():
    assert history.large_enough(32.0, 8.0) and not history.large_enough(31.9, 8.0)
    assert history.large_enough(None, 8.0) is None


def test_record_appends_lines_and_compares_with_the_file(tmp_path, capsys):
    first = history.record("bench", [Figure("x_per_cpu_s", 100.0, workload="w")], str(tmp_path))
    second = history.record("bench", [Figure("x_per_cpu_s", 50.0, workload="w", total_cpu_s=100.0,
                                             fixed_cpu_s=5.0)], str(tmp_path))
    assert "first figure" in first[0] and "WORSE by 50%" in second[0]
    lines = [json.loads(line) for line in (tmp_path / "bench.jsonl").read_text().splitlines()]
    assert [e["value"] for e in lines] == [100.0, 50.0]
    assert set(lines[0]) == {"benchmark", "metric", "value", "higher_is_better", "workload", "total_cpu_s",
                             "fixed_cpu_s", "commit", "dirty", "cpu_model", "cpu_isa", "cpus", "time"}
    assert lines[0]["cpu_model"] == history.cpu_model() and "WORSE" in capsys.readouterr().out
    assert lines[0]["cpu_isa"] == history.cpu_isa()


def test_a_long_run_records_the_commit_it_started_on(tmp_path):
    history.record("bench", [Figure("x_per_cpu_s", 1.0, workload="w")], str(tmp_path), measured_at=("abc1234", True))
    entry = history.read(str(tmp_path / "bench.jsonl"))[-1]
    assert (entry["commit"], entry["dirty"]) == ("abc1234", True)
