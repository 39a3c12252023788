"""``python -m consumers`` runs the CLI (same as ``dlc-ledger``)."""

import sys

from consumers.cli import main

sys.exit(main())
