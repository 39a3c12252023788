"""OIDC bearer JWTs: tokens signed by a test identity provider (an RSA key made here, its
JWKS in a file or served over real HTTP) reach the same routes as API tokens with the same
roles and scoping; anything expired, foreign or forged is a 401 problem, a token without a
usable role a 403."""

from __future__ import annotations

import base64
import hmac
import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from fastapi.testclient import TestClient

from dlc_ledger.api.app import app_from_environment, create_app
from dlc_ledger.services.access import KeysUnavailable, OidcConfig, OidcVerifier, looks_like_jwt
from dlc_ledger.wiring import context
from dlc_ledger.wiring.settings import Settings
from ledger.store.postgres import PostgresEventStore
from tests.support.api import bearer, seed_jobs

ISSUER = "https://idp.example.test/realms/dlc"
AUDIENCE = "dlc-ledger"
PROBLEM = "application/problem+json"

_IDP_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
_OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
_EC_KEY = ec.generate_private_key(ec.SECP256R1())


def _jwk(key: Any, kid: str, alg: str) -> dict[str, Any]:
    algorithm = jwt.algorithms.RSAAlgorithm if alg == "RS256" else jwt.algorithms.ECAlgorithm
    jwk: dict[str, Any] = algorithm.to_jwk(key.public_key(), as_dict=True)
    return {**jwk, "kid": kid, "use": "sig", "alg": alg}


JWKS = {"keys": [_jwk(_IDP_KEY, "idp-1", "RS256"), _jwk(_EC_KEY, "idp-ec", "ES256")]}


def make_jwt(
    key: Any = _IDP_KEY, *, kid: str | None = "idp-1", alg: str = "RS256", **claims: Any
) -> str:
    now = int(time.time())
    payload = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "u-123",
        "preferred_username": "alice@example.test",
        "iat": now,
        "exp": now + 300,
        "roles": ["finance"],
        **claims,
    }
    payload = {k: v for k, v in payload.items() if v is not None}
    headers = {"kid": kid} if kid else None
    return jwt.encode(payload, key, algorithm=alg, headers=headers)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unsigned(header: dict[str, Any], payload: dict[str, Any], secret: bytes | None) -> str:
    """A token put together by hand: ``alg: none`` (no signature) or an HMAC keyed with
    ``secret`` (the algorithm-confusion attack with the provider's public key)."""
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(payload).encode())}"
    signature = b"" if secret is None else hmac.digest(secret, signing_input.encode(), "sha256")
    return f"{signing_input}.{_b64(signature)}"


def _claims() -> dict[str, Any]:
    now = int(time.time())
    return {"iss": ISSUER, "aud": AUDIENCE, "sub": "mallory", "iat": now, "exp": now + 300,
            "roles": ["admin"]}  # fmt: skip


@pytest.fixture
def jwks_file(tmp_path: Path) -> Path:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(JWKS))
    return path


def _app_client(store: PostgresEventStore, jwks: str, **config: Any) -> TestClient:
    verifier = OidcVerifier(OidcConfig(issuer=ISSUER, audience=AUDIENCE, jwks=jwks, **config))
    return TestClient(create_app(store, verifier), raise_server_exceptions=False)


@pytest.fixture
def oidc_client(store: PostgresEventStore, jwks_file: Path) -> Iterator[TestClient]:
    seed_jobs(store)
    with _app_client(store, str(jwks_file), name_claim="preferred_username") as client:
        yield client


def _refused(response: Any, status: int, words: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    assert words in response.json()["detail"], response.json()
    if status == 401:
        assert response.headers["www-authenticate"] == 'Bearer error="invalid_token"'


def test_a_finance_jwt_reads_cost_as_its_subject(oidc_client: TestClient) -> None:
    headers = bearer(make_jwt())
    cost = oidc_client.get("/v1/cost", params={"source": "rated"}, headers=headers)
    assert cost.status_code == 200, cost.text
    assert [r["workspace"] for r in cost.json()["items"]] == ["ws-a", "ws-b", "ws-c"]
    me = oidc_client.get("/v1/whoami", headers=headers).json()
    assert me == {
        "token_id": "oidc:u-123",
        "name": "alice@example.test",
        "roles": ["finance"],
        "workspaces": None,
    }


def test_a_workspace_jwt_is_scoped_like_a_workspace_token(oidc_client: TestClient) -> None:
    headers = bearer(make_jwt(roles=["workspace:ws-a"]))
    jobs = oidc_client.get("/v1/jobs", headers=headers).json()["items"]
    assert sorted(j["job_uid"] for j in jobs) == ["a-1", "a-2"]
    assert oidc_client.get("/v1/jobs/b-1", headers=headers).status_code == 404
    cost = oidc_client.get("/v1/cost", params={"source": "rated"}, headers=headers).json()
    assert [r["workspace"] for r in cost["items"]] == ["ws-a"]


def test_an_es256_jwt_and_a_space_separated_nested_roles_claim(
    store: PostgresEventStore, jwks_file: Path
) -> None:
    with _app_client(store, str(jwks_file), roles_claim="realm_access.roles") as client:
        token = make_jwt(
            _EC_KEY, kid="idp-ec", alg="ES256", roles=None,
            realm_access={"roles": "auditor workspace:ws-a"},
        )  # fmt: skip
        me = client.get("/v1/whoami", headers=bearer(token))
        assert me.status_code == 200, me.text
        assert me.json()["roles"] == ["auditor", "workspace:ws-a"]
        assert me.json()["name"] == "u-123"  # the default name claim is sub


def test_expired_not_yet_valid_and_incomplete_jwts_are_401(oidc_client: TestClient) -> None:
    past = int(time.time()) - 3600
    expired = oidc_client.get("/v1/cost", headers=bearer(make_jwt(iat=past - 60, exp=past)))
    _refused(expired, 401, "JWT expired at ")
    # inside the leeway (30 s) an expired token still passes: clocks drift
    nearly = make_jwt(exp=int(time.time()) - 5)
    assert oidc_client.get("/v1/whoami", headers=bearer(nearly)).status_code == 200
    early = make_jwt(nbf=int(time.time()) + 600)
    _refused(oidc_client.get("/v1/whoami", headers=bearer(early)), 401, "not valid yet")
    no_exp = make_jwt(exp=None)
    _refused(oidc_client.get("/v1/whoami", headers=bearer(no_exp)), 401, "no 'exp' claim")


def test_another_audience_or_issuer_is_401(oidc_client: TestClient) -> None:
    _refused(
        oidc_client.get("/v1/cost", headers=bearer(make_jwt(aud="grafana"))),
        401,
        "audience 'grafana' does not include 'dlc-ledger'",
    )
    _refused(
        oidc_client.get("/v1/cost", headers=bearer(make_jwt(iss="https://evil.test"))),
        401,
        "issuer 'https://evil.test' is not",
    )


def test_a_jwt_signed_by_another_key_is_401(oidc_client: TestClient) -> None:
    forged = make_jwt(_OTHER_KEY, roles=["admin"])  # claims the provider's kid
    _refused(oidc_client.get("/v1/whoami", headers=bearer(forged)), 401, "signature")
    unknown_kid = make_jwt(_OTHER_KEY, kid="elsewhere")
    _refused(oidc_client.get("/v1/whoami", headers=bearer(unknown_kid)), 401, "no key")
    # with no kid, the one RS256 key in the set is used, and the signature still decides
    no_kid = make_jwt(_OTHER_KEY, kid=None)
    _refused(oidc_client.get("/v1/whoami", headers=bearer(no_kid)), 401, "signature")
    assert oidc_client.get("/v1/whoami", headers=bearer(make_jwt(kid=None))).status_code == 200
    # a token signed with the EC key but naming the RSA key's kid
    mixed = make_jwt(_EC_KEY, kid="idp-1", alg="ES256")
    _refused(oidc_client.get("/v1/whoami", headers=bearer(mixed)), 401, "is for RS256")


def test_alg_none_and_hmac_with_the_public_key_are_401(oidc_client: TestClient) -> None:
    none = _unsigned({"alg": "none", "typ": "JWT"}, _claims(), None)
    assert looks_like_jwt(none) is False  # an empty signature part: not even a JWT
    none_signed = none + "AA"  # a non-empty "signature" to reach the verifier
    _refused(oidc_client.get("/v1/whoami", headers=bearer(none_signed)), 401, "'none'")
    public_pem = _IDP_KEY.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    confused = _unsigned({"alg": "HS256", "kid": "idp-1", "typ": "JWT"}, _claims(), public_pem)
    _refused(oidc_client.get("/v1/whoami", headers=bearer(confused)), 401, "'HS256'")
    garbage = oidc_client.get("/v1/whoami", headers=bearer("abc.def.ghi"))
    _refused(garbage, 401, "malformed JWT")


def test_no_role_or_an_unknown_role_is_403(oidc_client: TestClient) -> None:
    _refused(
        oidc_client.get("/v1/whoami", headers=bearer(make_jwt(roles=None))),
        403,
        "no 'roles' claim",
    )
    _refused(
        oidc_client.get("/v1/whoami", headers=bearer(make_jwt(roles=["finance", "root"]))),
        403,
        "unknown role 'root'",
    )
    _refused(oidc_client.get("/v1/whoami", headers=bearer(make_jwt(roles=[]))), 403, "at least one")
    _refused(
        oidc_client.get("/v1/whoami", headers=bearer(make_jwt(roles={"a": 1}))),
        403,
        "not a list of role strings",
    )


def test_api_tokens_still_work_and_jwts_without_oidc_are_401(
    client: TestClient, oidc_client: TestClient, tokens: dict[str, str]
) -> None:
    assert oidc_client.get("/v1/whoami", headers=bearer(tokens["admin"])).status_code == 200
    _refused(
        client.get("/v1/whoami", headers=bearer(make_jwt())), 401, "not accepted by this server"
    )


def test_the_access_log_names_the_oidc_subject(
    oidc_client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="dlc_ledger.api.access"):
        oidc_client.get("/v1/jobs", headers=bearer(make_jwt()))
    (line,) = [r.getMessage() for r in caplog.records if r.name == "dlc_ledger.api.access"]
    assert line.startswith("alice@example.test(oidc:u-123) GET /v1/jobs 200 ")


class _JwksHandler(BaseHTTPRequestHandler):
    fetches = 0

    def do_GET(self) -> None:
        type(self).fetches += 1
        body = json.dumps(JWKS).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


@pytest.fixture
def jwks_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _JwksHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/certs"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_the_jwks_over_http_is_fetched_once_and_cached(
    store: PostgresEventStore, jwks_url: str
) -> None:
    seed_jobs(store)
    _JwksHandler.fetches = 0
    with _app_client(store, jwks_url) as client:
        for roles in (["finance"], ["workspace:ws-b"]):
            jobs = client.get("/v1/jobs", headers=bearer(make_jwt(roles=roles)))
            assert jobs.status_code == 200, jobs.text
        assert [j["job_uid"] for j in jobs.json()["items"]] == ["b-1"]
        forged = make_jwt(_OTHER_KEY)
        _refused(client.get("/v1/whoami", headers=bearer(forged)), 401, "signature")
    assert _JwksHandler.fetches == 1


def test_an_unreachable_jwks_url_is_a_503(store: PostgresEventStore) -> None:
    with _app_client(store, "http://127.0.0.1:1/certs") as client:
        response = client.get("/v1/whoami", headers=bearer(make_jwt()))
    assert response.status_code == 503, response.text
    assert "unreachable" in response.json()["detail"]


def test_the_jwks_file_is_reread_when_it_changes(
    store: PostgresEventStore, jwks_file: Path
) -> None:
    with _app_client(store, str(jwks_file)) as client:
        rotated = make_jwt(_OTHER_KEY, kid="idp-2")
        assert client.get("/v1/whoami", headers=bearer(rotated)).status_code == 401
        keys = {"keys": [*JWKS["keys"], _jwk(_OTHER_KEY, "idp-2", "RS256")]}
        jwks_file.write_text(json.dumps(keys))
        stat = jwks_file.stat()  # a later mtime, even on a coarse clock
        os.utime(jwks_file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
        assert client.get("/v1/whoami", headers=bearer(rotated)).status_code == 200


def test_a_missing_jwks_file_fails_at_startup(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="JWKS file"):
        OidcVerifier(OidcConfig(ISSUER, AUDIENCE, str(tmp_path / "absent.json")))


def test_settings_take_all_of_issuer_audience_and_jwks_or_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("DLC_OIDC_ISSUER", "DLC_OIDC_AUDIENCE", "DLC_OIDC_JWKS", "DLC_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    assert Settings().oidc() is None
    monkeypatch.setenv("DLC_OIDC_ISSUER", ISSUER)
    with pytest.raises(ValueError, match="DLC_OIDC_AUDIENCE, DLC_OIDC_JWKS"):
        Settings()
    monkeypatch.setenv("DLC_OIDC_AUDIENCE", AUDIENCE)
    monkeypatch.setenv("DLC_OIDC_JWKS", "https://idp.example.test/certs")
    monkeypatch.setenv("DLC_OIDC_ROLES_CLAIM", "groups")
    assert Settings().oidc() == OidcConfig(
        ISSUER, AUDIENCE, "https://idp.example.test/certs", roles_claim="groups"
    )


def test_api_serve_wiring_reads_the_oidc_settings(
    store: PostgresEventStore,
    database_url: str,
    jwks_file: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``app_from_environment`` (what ``api serve`` runs) with ``DLC_OIDC_*`` set."""
    seed_jobs(store)
    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setenv("DLC_OIDC_ISSUER", ISSUER)
    monkeypatch.setenv("DLC_OIDC_AUDIENCE", AUDIENCE)
    monkeypatch.setenv("DLC_OIDC_JWKS", str(jwks_file))
    monkeypatch.setenv("DLC_OIDC_NAME_CLAIM", "preferred_username")
    context.settings.cache_clear()
    try:
        app = app_from_environment()
        with TestClient(app, raise_server_exceptions=False) as client:
            me = client.get("/v1/whoami", headers=bearer(make_jwt(roles=["auditor"])))
            assert me.status_code == 200, me.text
            assert me.json()["name"] == "alice@example.test"
        app.state.store.close()
        monkeypatch.setenv("DLC_OIDC_JWKS", str(jwks_file.with_name("gone.json")))
        context.settings.cache_clear()
        with pytest.raises(KeysUnavailable, match=r"gone\.json"):
            app_from_environment()
    finally:
        context.settings.cache_clear()
