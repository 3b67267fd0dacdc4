"""Reading BERT-format documents: boundaries, counters, long lines, unreadable files."""

import gzip

import pytest

from pipeline.corpus_io import InputFileError
from pipeline.documents import SKIPPED_AT, ReadDocuments


def test_documents_split_at_blank_lines_and_long_lines_are_skipped(tmp_path):
    path = tmp_path / "c.txt"
    path.write_bytes(b"a b\nc d\n\n\n\ne f\n" + b"x" * 50 + b"\ng h\r\n\nbad \xff\n")
    reader = ReadDocuments(max_line_bytes=40)
    *out, counts = reader.process((3, str(path)))
    assert out == [((3, 0), ["a b", "c d"]), ((3, 1), ["e f", "g h"]), ((3, 2), ["bad \ufffd"])]
    assert counts == {"documents": 3, "empty_documents": 2, "sentences": 5, "lines": 9,
                      "lines_with_invalid_utf8": 1, "lines_over_max_bytes": 1,
                      f"{SKIPPED_AT}{path}:7": 1}  # the skipped line, named for metadata.json


def test_truncated_gzip_names_the_file(tmp_path):
    path = tmp_path / "broken.txt.gz"
    text = "".join(f"line {i} {i * 7919 % 10007}\n" for i in range(5000)).encode()
    data = gzip.compress(text)
    path.write_bytes(data[:len(data) // 2])
    with pytest.raises(InputFileError, match="cannot read input file .*broken.txt.gz"):
        list(ReadDocuments().process((0, str(path))))


def test_line_reader_of_the_vocabulary_job_refuses_a_truncated_gzip_too(tmp_path):
    from pipeline.corpus_io import ReadLines

    text = "".join(f"word{i} " * 3 + "\n" for i in range(5000)).encode()
    data = gzip.compress(text)
    path = tmp_path / "cut.txt.gz"
    path.write_bytes(data[:len(data) // 2])
    with pytest.raises(InputFileError, match="cut.txt.gz"):
        list(ReadLines().process(str(path)))


def test_raw_lines_skips_over_long_lines_without_reading_them_whole(tmp_path):
    from pipeline.corpus_io import raw_lines

    path = tmp_path / "long.txt"
    path.write_bytes(b"short\n" + b"y" * 300_000 + b"\nafter\r\n" + b"z" * 11 + b"\nend")
    assert list(raw_lines(str(path), max_line_bytes=10)) == [b"short", None, b"after", None, b"end"]
    assert list(raw_lines(str(path), max_line_bytes=11))[3] == b"z" * 11
