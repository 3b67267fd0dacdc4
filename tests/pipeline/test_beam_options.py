"""The local default runner: in-process for a small input, multi-processing otherwise; explicit options win."""

from apache_beam.options.pipeline_options import DirectOptions, StandardOptions

from pipeline import beam_options
from pipeline.beam_options import IN_PROCESS, LOCAL_DEFAULTS, SMALL_INPUT_BYTES, local_defaults

SMALL, LARGE = SMALL_INPUT_BYTES - 1, SMALL_INPUT_BYTES


def test_a_small_input_runs_in_process_and_a_large_one_on_worker_processes():
    assert local_defaults([], SMALL) == IN_PROCESS
    assert local_defaults([], LARGE) == LOCAL_DEFAULTS
    assert local_defaults([]) == LOCAL_DEFAULTS  # size unknown: the multi-processing default


def test_explicit_runner_and_worker_options_win():
    assert local_defaults(["--runner", "FnApiRunner"], LARGE) == []
    assert local_defaults(["--runner=DataflowRunner"], SMALL) == []
    for given in (["--direct_num_workers", "2"], ["--direct_num_workers=1"],
                  ["--direct_running_mode=multi_processing"]):
        assert local_defaults(given, SMALL) == LOCAL_DEFAULTS


def test_pipeline_options_size_the_input_files(tmp_path, monkeypatch):
    small, large = tmp_path / "small.txt", tmp_path / "large.txt.gz"
    small.write_bytes(b"x" * 100)
    large.write_bytes(b"y" * 100)
    monkeypatch.setattr(beam_options, "SMALL_INPUT_BYTES", 200)  # the .gz file counts 300
    assert beam_options.pipeline_options([], [str(small)]).view_as(StandardOptions).runner == "FnApiRunner"
    multi = beam_options.pipeline_options([], [str(large)]).view_as(DirectOptions)
    assert multi.direct_running_mode == "multi_processing"
    given = beam_options.pipeline_options(["--direct_num_workers", "2"], [str(small)])
    assert given.view_as(DirectOptions).direct_num_workers == 2
    assert given.view_as(StandardOptions).runner == "DirectRunner"
    assert beam_options.pipeline_options([]).view_as(StandardOptions).runner == "DirectRunner"  # files unknown


def test_input_size_counts_gzip_files_by_their_expected_text():
    assert beam_options.input_size([("a.txt", 10), ("b.txt.gz", 10)]) == 10 + 10 * beam_options.GZIP_RATIO


def test_measured_input_size_reads_the_files_sizes(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"x" * 100)
    (tmp_path / "b.txt.gz").write_bytes(b"y" * 7)
    files = sorted(str(p) for p in tmp_path.iterdir())
    assert beam_options.measured_input_size(files) == 100 + 7 * beam_options.GZIP_RATIO
