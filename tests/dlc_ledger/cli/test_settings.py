"""Configuration: environment over the YAML file over defaults; Kafka security passes through."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlc_ledger.wiring.settings import Settings


def test_environment_and_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "dlc.yaml"
    config.write_text("topic: from-file\npartitions: 8\nkafka_security_protocol: SASL_SSL\n")
    monkeypatch.setenv("DLC_CONFIG", str(config))
    monkeypatch.setenv("DLC_PARTITIONS", "2")
    monkeypatch.setenv("KAFKA_BOOTSTRAP", "broker:9093")
    monkeypatch.setenv("DLC_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512")
    monkeypatch.delenv("DATABASE_URL", raising=False)
    settings = Settings()
    assert settings.topic == "from-file"
    assert settings.partitions == 2  # the environment wins over the file
    assert settings.kafka_bootstrap == "broker:9093"
    assert settings.database_url is None  # unset: the embedded PostgreSQL
    assert settings.kafka_client_options() == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
    }


def test_bad_configuration_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLC_CONFIG", str(tmp_path / "missing.yaml"))
    with pytest.raises(ValueError, match="is not a file"):
        Settings()
    monkeypatch.delenv("DLC_CONFIG")
    monkeypatch.setenv("DLC_PARTITIONS", "0")
    with pytest.raises(ValueError, match="partitions"):
        Settings()
