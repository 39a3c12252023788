"""The event store's own use cases, whatever context an event belongs to: dead letters
retried or resolved (:mod:`.dead_letters`), the store exported to files
(:mod:`.exports`) and restored from them (:mod:`.restores`), and that export's file
format, beside what writes and reads it (:mod:`.export_format`)."""

from dlc_ledger.services.store.dead_letters import (
    DeadLetterNotFound,
    StillInvalid,
    find_dead_letter,
    resolve,
    retry_dead_letter,
)
from dlc_ledger.services.store.export_format import (
    MANIFEST,
    Manifest,
    Part,
    RestoreRefused,
    chain_link,
    decode_line,
    encode_line,
)
from dlc_ledger.services.store.exports import DEFAULT_PER_FILE, ExportTargetNotEmpty, export_store
from dlc_ledger.services.store.restores import import_store, open_export

__all__ = [
    "DEFAULT_PER_FILE",
    "MANIFEST",
    "DeadLetterNotFound",
    "ExportTargetNotEmpty",
    "Manifest",
    "Part",
    "RestoreRefused",
    "StillInvalid",
    "chain_link",
    "decode_line",
    "encode_line",
    "export_store",
    "find_dead_letter",
    "import_store",
    "open_export",
    "resolve",
    "retry_dead_letter",
]
