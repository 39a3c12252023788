"""docs/openapi.json is the API as built: a route, parameter or schema changed without
regenerating the document fails here."""

from __future__ import annotations

from dlc_ledger.api.app import openapi_document
from tests.support.paths import ROOT

DOCUMENT = ROOT / "docs" / "openapi.json"


def test_the_committed_openapi_document_matches_the_app() -> None:
    assert DOCUMENT.read_text() == openapi_document(), (
        "docs/openapi.json is stale: python -m dlc_ledger.api.app > docs/openapi.json"
    )


def test_every_operation_needs_a_bearer_token_and_answers_problems() -> None:
    import json

    document = json.loads(openapi_document())
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            assert operation["security"] == [{"HTTPBearer": []}], (method, path)
            for code in ("400", "401", "403", "404", "422", "500", "503"):
                content = operation["responses"][code]["content"]
                assert "application/problem+json" in content, (method, path, code)
