"""``dlc-ledger tokens create|list|revoke``: bearer tokens for the HTTP API.

``create`` prints the secret once (stdout, nothing else there, so a script can capture
it); only its sha256 is stored. ``list`` never shows secrets. A token expires after 90
days unless ``--expires-in`` says otherwise (``never`` only when asked for). Roles and
expiry: docs/api.md.
"""

from __future__ import annotations

from typing import Annotated

import typer

from dlc_ledger.cli.tables import FormatOption, RowFormat, emit_rows
from dlc_ledger.services.access import create_token, list_tokens, parse_lifetime, revoke
from dlc_ledger.wiring import context
from ledger.canonical import format_timestamp

__all__ = ["tokens_app"]

tokens_app = typer.Typer(
    help="API bearer tokens: create (shown once), list, revoke.", no_args_is_help=True
)


@tokens_app.command("create")
def create(
    role: Annotated[
        list[str],
        typer.Option(
            "--role",
            help="admin, finance, auditor, workspace:<id> or metrics (/metrics only); "
            "repeat for several.",
        ),
    ],
    name: Annotated[str | None, typer.Option("--name", help="A label for the token.")] = None,
    allow_unknown_workspace: Annotated[
        bool,
        typer.Option(
            "--allow-unknown-workspace",
            help="Accept workspace:<id> for a workspace no quota binds and no job ran in yet.",
        ),
    ] = False,
    expires_in: Annotated[
        str,
        typer.Option(
            "--expires-in",
            help="How long it is valid: 30m, 12h, 90d, 2w (at most 3650d), or never.",
        ),
    ] = "90d",
) -> None:
    """Create a token and print its secret (the only time it is shown)."""
    life = parse_lifetime(expires_in)  # before the database: a typo costs no connection
    store = context.open_store()
    created = create_token(
        store,
        role,
        name=name,
        created_by=context.local_principal(),
        known_only=not allow_unknown_workspace,
        expires_in=life,
    )
    expires = created.token.expires_at
    typer.echo(
        f"token {created.token.token_id} ({', '.join(created.token.roles)}), "
        f"{'never expires' if expires is None else 'expires ' + format_timestamp(expires)}; "
        "the secret is shown only now:",
        err=True,
    )
    typer.echo(created.secret)


@tokens_app.command("list")
def list_(fmt: FormatOption = RowFormat.table) -> None:
    """Every token with its roles, expiry and state; never a secret."""
    store = context.open_store(role="reader")
    rows = [
        {
            "token_id": t.token_id,
            "name": t.name,
            "roles": " ".join(t.roles),
            "created_at": format_timestamp(t.created_at),
            "created_by": t.created_by,
            "expires_at": format_timestamp(t.expires_at) if t.expires_at else "never",
            "revoked_at": format_timestamp(t.revoked_at) if t.revoked_at else "",
        }
        for t in list_tokens(store)
    ]
    emit_rows(rows, fmt)


@tokens_app.command("revoke")
def revoke_(token_id: Annotated[str, typer.Argument(help="The token's id (tok_…).")]) -> None:
    """Revoke a token: requests with it get 401 from then on."""
    store = context.open_store()
    typer.echo("revoked" if revoke(store, token_id) else "already revoked")
