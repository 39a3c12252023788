"""``dlc-ledger``: Typer commands, lazy command loading, the one renderer and option parsers."""
