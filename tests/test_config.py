"""Project settings: config.toml, then EVENTMEM_<KEY> environment overrides."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from eventmem.core.errors import InvalidInput
from eventmem.journal.config import Config, config_template, load_config, load_settings


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_without_a_file_or_variables_every_setting_has_its_default(tmp_path: Path) -> None:
    config = load_config(tmp_path / "missing.toml", {})
    assert config == Config()
    assert config.embedder == "hashing"
    assert config.fusion == "linear"
    assert (config.vector_weight, config.keyword_weight) == (0.9, 0.1)
    assert config.durability == "fsync"
    assert config.secrets == "scrub"
    assert config.max_memory_bytes == 64 * 1024


def test_values_in_config_toml_are_used(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'fusion = "rrf"\nvector_weight = 0.5\nkeyword_weight = 1\ndurability = "flush"\n'
        'max_memory_bytes = 1000\nsecrets = "refuse"\n',
    )
    config = load_config(path, {})
    assert config.fusion == "rrf"
    assert config.vector_weight == 0.5
    assert config.keyword_weight == 1.0 and isinstance(config.keyword_weight, float)
    assert config.durability == "flush"
    assert config.max_memory_bytes == 1000
    assert config.secrets == "refuse"
    assert config.recency_boost == Config().recency_boost


def test_the_commented_template_loads_as_the_defaults(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, config_template()), {}) == Config()


def test_environment_variables_override_the_file_with_their_types(tmp_path: Path) -> None:
    path = write(tmp_path, 'fusion = "rrf"\nvector_weight = 0.5\nmax_memory_bytes = 1000\n')
    environ = {
        "EVENTMEM_FUSION": "linear",
        "EVENTMEM_VECTOR_WEIGHT": " 0.9 ",
        "EVENTMEM_MAX_MEMORY_BYTES": "2048",
        "EVENTMEM_SNAPSHOT_EVERY_EVENTS": "500",
        "EVENTMEM_RECENCY_HALF_LIFE_DAYS": "7",
    }
    config = load_config(path, environ)
    assert config.fusion == "linear"
    assert config.vector_weight == 0.9
    assert config.max_memory_bytes == 2048 and isinstance(config.max_memory_bytes, int)
    assert config.snapshot_every_events == 500
    assert config.recency_half_life_days == 7.0 and isinstance(config.recency_half_life_days, float)


def test_the_process_environment_is_read_when_none_is_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVENTMEM_DURABILITY", "flush")
    assert load_config(tmp_path / "missing.toml").durability == "flush"


def test_variables_that_are_not_settings_are_ignored(tmp_path: Path) -> None:
    environ = {"EVENTMEM_ROOT": "/somewhere", "EVENTMEM_GLOBAL_DIR": "/elsewhere", "EVENTMEM_NOPE": "1"}
    assert load_config(tmp_path / "missing.toml", environ) == Config()


@pytest.mark.parametrize("value", ["${EVENTMEM_FUSION}", "${env:FUSION}", "", "   "])
def test_an_unexpanded_or_empty_variable_is_ignored(tmp_path: Path, value: str) -> None:
    path = write(tmp_path, 'fusion = "rrf"\n')
    assert load_config(path, {"EVENTMEM_FUSION": value, "EVENTMEM_VECTOR_WEIGHT": value}).fusion == "rrf"
    assert load_config(path, {"EVENTMEM_VECTOR_WEIGHT": value}).vector_weight == Config().vector_weight


def test_a_variable_of_the_wrong_type_names_itself(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="EVENTMEM_MAX_MEMORY_BYTES='lots' is not valid"):
        load_config(tmp_path / "missing.toml", {"EVENTMEM_MAX_MEMORY_BYTES": "lots"})


def test_a_variable_outside_the_allowed_values_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="fusion"):
        load_config(tmp_path / "missing.toml", {"EVENTMEM_FUSION": "magic"})


def test_invalid_toml_in_the_tracked_file_is_reported_and_every_default_used(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, 'fusion = "rrf\nvector_weight = \n'), {})
    assert settings.config == Config()
    (line,) = settings.invalid
    assert line.startswith("config.toml: not valid TOML") and line.endswith("every setting of it has its default")


def test_a_tracked_file_that_is_not_utf8_is_reported_and_ignored(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(b'fusion = "\xff\xfe"\n')
    settings = load_settings(path, {})
    assert settings.config == Config() and "config.toml" in settings.invalid[0]


def test_an_unknown_key_in_the_tracked_file_is_reported_and_the_rest_used(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, 'vector_wieght = 0.5\nfusion = "rrf"\n'), {})
    assert settings.config.fusion == "rrf"
    assert settings.invalid == [
        "config.toml: vector_wieght = 0.5: not a setting eventmem knows; ignored, it has no effect"
    ]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('max_memory_bytes = "big"', 'max_memory_bytes = "big": expected a whole number from 64 to 1,048,576'),
        ('durability = "sometimes"', 'durability = "sometimes": expected one of "fsync", "flush"'),
        ("vector_weight = nan", "vector_weight = nan: expected a number from 0 to 100; ignored, the default 0.9"),
        ("max_segment_bytes = 1", "expected a whole number from 1,048,576 to 1,073,741,824"),
        ("compact_interval_seconds = 0.000001", "expected 0 (off) or a number from 1 to 604,800"),
        ("snapshot_every_events = 0", "expected a whole number from 100 to 10,000,000"),
        ("section_max_bytes = 1e300", "expected a whole number from 1,024 to 16,777,216"),
        ('embedder = "onnx:minilm?threads=100000"', "embedder option threads='100000' must be at most 256"),
        ('embedder = "magic:model"', "unknown embedder 'magic:model'"),
    ],
)
def test_a_tracked_value_out_of_its_range_is_reported_with_the_range_and_its_default_used(
    tmp_path: Path, line: str, reason: str
) -> None:
    settings = load_settings(write(tmp_path, f'fusion = "rrf"\n{line}\n'), {})
    assert settings.config == msgspec.structs.replace(Config(), fusion="rrf")
    (invalid,) = settings.invalid
    assert reason in invalid and "ignored" in invalid and "\n" not in invalid


def test_the_old_name_of_the_built_in_embedder_is_still_valid(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, 'embedder = "hashing-384"\n'), {})
    assert settings.invalid == [] and settings.config.embedder == "hashing-384"


def test_the_users_own_value_out_of_its_range_is_refused_outright(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="max_segment_bytes"):
        load_config(tmp_path / "missing.toml", {"EVENTMEM_MAX_SEGMENT_BYTES": "1"})


def test_a_config_is_immutable() -> None:
    config = Config()
    with pytest.raises(AttributeError):
        config.fusion = "rrf"  # type: ignore[misc]


def test_a_model_embedder_gets_its_own_fusion_weights_unless_the_config_sets_others() -> None:
    from eventmem.journal.config import FUSION_WEIGHTS, MODEL_FUSION_WEIGHTS, fusion_weights

    assert fusion_weights(Config(), "hashing-v3-384") == (Config().vector_weight, Config().keyword_weight)
    assert (
        fusion_weights(Config(), "onnx-all-MiniLM-L6-v2-int8-384") == FUSION_WEIGHTS["onnx-all-MiniLM-L6-v2-int8-384"]
    )
    assert fusion_weights(Config(), "ollama-nomic-embed-text:latest-768") == MODEL_FUSION_WEIGHTS
    chosen = Config(vector_weight=0.6, keyword_weight=0.4)
    assert fusion_weights(chosen, "onnx-all-MiniLM-L6-v2-int8-384") == (0.6, 0.4)
    assert fusion_weights(chosen, "hashing-v3-384") == (0.6, 0.4)
