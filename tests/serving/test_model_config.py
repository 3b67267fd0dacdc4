"""serving.server.model_config: TF Serving's model_config_list text proto, round trip and errors."""

import pytest

from serving.server.model_config import ModelEntry, read_model_config_list, write_model_config_list


def test_round_trip(tmp_path):
    path = str(tmp_path / "models.config")
    write_model_config_list(path, [("bert", "/models/bert"), ("gpt", "gs://bucket/gpt")])
    assert read_model_config_list(path) == [ModelEntry("bert", "/models/bert"), ModelEntry("gpt", "gs://bucket/gpt")]
    text = open(path).read()
    assert 'name: "bert"' in text and 'base_path: "/models/bert"' in text and 'model_platform: "tensorflow"' in text


def test_policies_and_labels(tmp_path):
    path = tmp_path / "models.config"
    path.write_text("""model_config_list {
  config { name: "a" base_path: "/m/a" model_platform: "tensorflow"
           model_version_policy { specific { versions: 3 versions: 1 } }
           version_labels { key: "stable" value: 1 } version_labels { key: "canary" value: 3 } }
  config { name: "b" base_path: "/m/b" model_version_policy { all {} } }
  config { name: "c" base_path: "/m/c" model_version_policy { latest { num_versions: 2 } } }
}""")
    a, b, c = read_model_config_list(str(path))
    assert (a.version_policy, a.versions, a.labels) == ("specific", (1, 3), {"canary": 3, "stable": 1})
    assert (b.version_policy, c.version_policy, c.num_versions) == ("all", "latest", 2)


@pytest.mark.parametrize("text, message", [
    ('model_config_list { config { nam: "x" } }',
     ':1:30: cannot parse model config: Message type "tensorflow.serving.ModelConfig" has no field named "nam".'),
    ('model_config_list {\n config { name: "x" base_path: "rel/x" } }',
     "Expected model x to have an absolute path or URI; got base_path()=rel/x"),
    ('model_config_list { config { name: "x" base_path: "/a" } config { name: "x" base_path: "/b" } }',
     "Illegal to list model x multiple times in config list"),
    ('model_config_list { config { name: "x" base_path: "/a" model_platform: "tflite" } }',
     "unsupported model_platform 'tflite'"),
    ('custom_model_config { }', "expected a model_config_list, got custom_model_config"),
])
def test_errors(tmp_path, text, message):
    path = tmp_path / "models.config"
    path.write_text(text)
    with pytest.raises(ValueError) as error:
        read_model_config_list(str(path))
    assert message in str(error.value)


def test_missing_file_and_relative_write(tmp_path):
    with pytest.raises(FileNotFoundError, match="model config file not found"):
        read_model_config_list(str(tmp_path / "nope.config"))
    with pytest.raises(ValueError, match="absolute path"):
        write_model_config_list(str(tmp_path / "m.config"), [("x", "relative/x")])
    with pytest.raises(ValueError, match="version_policy"):
        ModelEntry("x", "/x", version_policy="newest")
