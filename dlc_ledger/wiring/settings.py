"""Service configuration: environment variables, optionally a YAML config file.

Precedence: environment (``DATABASE_URL``, ``KAFKA_BOOTSTRAP``, ``DLC_*``) over the
file named by ``DLC_CONFIG`` over the defaults here. Unset ``DATABASE_URL`` and
``KAFKA_BOOTSTRAP`` mean "use the embedded PostgreSQL / Tansu broker".
"""

from __future__ import annotations

import os
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import platformdirs
from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from ledger.errors import Invalid
from ledger.prices import DEFAULT_MAX_RATE

if TYPE_CHECKING:  # the OIDC module (and PyJWT) is the API's: imported when asked for
    from dlc_ledger.services.access import OidcConfig

__all__ = ["Settings", "load_settings"]


def _default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("dlc-ledger"))


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DLC_", extra="forbid")

    database_url: str | None = Field(
        default=None, validation_alias=AliasChoices("DATABASE_URL", "DLC_DATABASE_URL")
    )
    # the logins that read (the API, reports) and write (the services), when one process
    # runs parts of both (`up`, `api serve`'s writes); unset: DATABASE_URL's login. The
    # embedded database derives its own (docs/store.md, "Roles")
    database_url_reader: str | None = Field(
        default=None,
        validation_alias=AliasChoices("DATABASE_URL_READER", "DLC_DATABASE_URL_READER"),
    )
    database_url_writer: str | None = Field(
        default=None,
        validation_alias=AliasChoices("DATABASE_URL_WRITER", "DLC_DATABASE_URL_WRITER"),
    )
    kafka_bootstrap: str | None = Field(
        default=None, validation_alias=AliasChoices("KAFKA_BOOTSTRAP", "DLC_KAFKA_BOOTSTRAP")
    )
    data_dir: Path = Field(default_factory=_default_data_dir)
    topic: str = "dlc.cluster-events"
    partitions: int = Field(default=4, ge=1)
    cluster: str = "local"
    # the replay run commands use (dlc_ledger.wiring.runs); None: the recorded default
    run: str | None = None
    epoch: str = "2026-11-01T00:00:00Z"
    metrics_port: int = Field(default=0, ge=0, le=65535)
    # sanity bound on published rates, per unit-hour (prices publish/spot refuse more
    # unless --force)
    max_rate: Decimal = Field(default=DEFAULT_MAX_RATE, gt=0)
    kafka_security_protocol: str | None = None
    kafka_sasl_mechanism: str | None = None
    kafka_sasl_username: str | None = None
    kafka_sasl_password: str | None = None
    kafka_ssl_cafile: str | None = None
    # OIDC bearer JWTs on the API (docs/api.md "OIDC"): all of issuer, audience and JWKS,
    # or none (then only `dlct_` tokens are accepted)
    oidc_issuer: str | None = None
    oidc_audience: str | None = None
    oidc_jwks: str | None = None  # a file path or an http(s) URL
    oidc_roles_claim: str = Field(default="roles", min_length=1)
    oidc_name_claim: str = Field(default="sub", min_length=1)
    oidc_leeway_seconds: float = Field(default=30.0, ge=0, le=300)
    # the API's bounds on a request (docs/api.md "Limits"); 0 turns one off
    api_statement_timeout: float = Field(default=10.0, ge=0, le=86_400)  # seconds a statement
    api_rate: float = Field(default=50.0, ge=0)  # requests per second per token, sustained
    api_burst: int = Field(default=100, ge=1)  # requests per token at once
    # where clients reach the API, the base of its Link headers (docs/api.md "Headers and
    # negotiation"); unset: links relative to the server, never taken from Host
    public_url: str | None = None
    api_docs: bool = False  # Swagger UI at /docs, from the wheel; off: /openapi.json only
    # webhook targets inside the operator's network that rules may reach (hosts and CIDR
    # networks, comma-separated; docs/notifications.md "Where a webhook may go")
    webhook_allow: str | None = None

    @field_validator("public_url")
    @classmethod
    def _an_origin(cls, value: str | None) -> str | None:
        if not value:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.username:
            raise Invalid(f"DLC_PUBLIC_URL={value!r}: give an http(s) URL with a host")
        if parts.query or parts.fragment:
            raise Invalid(f"DLC_PUBLIC_URL={value!r}: no query or fragment")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _role_urls_beside_database_url(self) -> Settings:
        given = [
            name
            for name, value in (
                ("DATABASE_URL_READER", self.database_url_reader),
                ("DATABASE_URL_WRITER", self.database_url_writer),
            )
            if value
        ]
        if given and not self.database_url:
            raise Invalid(
                f"{' and '.join(given)} without DATABASE_URL: the embedded database derives "
                "its own logins; set DATABASE_URL as well (docs/store.md, Roles)"
            )
        return self

    @model_validator(mode="after")
    def _oidc_all_or_nothing(self) -> Settings:
        given = {
            "DLC_OIDC_ISSUER": self.oidc_issuer,
            "DLC_OIDC_AUDIENCE": self.oidc_audience,
            "DLC_OIDC_JWKS": self.oidc_jwks,
        }
        missing = [name for name, value in given.items() if not value]
        if 0 < len(missing) < len(given):
            raise Invalid(f"OIDC is half configured: set {', '.join(missing)} as well")
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        config_file = os.environ.get("DLC_CONFIG")
        if config_file:
            if not Path(config_file).is_file():
                raise Invalid(f"DLC_CONFIG={config_file!r} is not a file")
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=config_file))
        return tuple(sources)

    def kafka_client_options(self) -> dict[str, Any]:
        """SASL/TLS settings passed through to kafka-python unchanged."""
        options = {
            "security_protocol": self.kafka_security_protocol,
            "sasl_mechanism": self.kafka_sasl_mechanism,
            "sasl_plain_username": self.kafka_sasl_username,
            "sasl_plain_password": self.kafka_sasl_password,
            "ssl_cafile": self.kafka_ssl_cafile,
        }
        return {k: v for k, v in options.items() if v is not None}

    def oidc(self) -> OidcConfig | None:
        """The OIDC settings, or None when OIDC is not configured."""
        if not (self.oidc_issuer and self.oidc_audience and self.oidc_jwks):
            return None
        from dlc_ledger.services.access import OidcConfig

        return OidcConfig(
            issuer=self.oidc_issuer,
            audience=self.oidc_audience,
            jwks=self.oidc_jwks,
            roles_claim=self.oidc_roles_claim,
            name_claim=self.oidc_name_claim,
            leeway_seconds=self.oidc_leeway_seconds,
        )


def load_settings() -> Settings:
    return Settings()
