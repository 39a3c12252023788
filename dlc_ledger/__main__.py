"""``python -m dlc_ledger`` runs the CLI (same as ``dlc-ledger``)."""

import sys

from dlc_ledger.cli.app import main

sys.exit(main())
