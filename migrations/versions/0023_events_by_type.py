"""Store branch: the events by type (``events_type_position``).

Revision ID: 0023_events_by_type
Revises: 0001
Create Date: 2026-12-07

Reads of the few events of one kind (notification rules and secret grants, read on every
round of the event centre's matcher and sender; quota trees, price books, budgets) scanned
the whole events table: ~170 ms a read at a million events. An index on (type, position)
makes each a range read. Measured here, appends are not slower by a visible margin (one
more B-tree insertion, at the end of its type's range). Built in one statement: on a large
store it holds appends for its build (~1.5 s a million events on this machine).
"""

from alembic import op

revision = "0023_events_by_type"
down_revision = "0001"
branch_labels = ("store",)
depends_on = None


def upgrade() -> None:
    op.create_index("events_type_position", "events", ["type", "position"])


def downgrade() -> None:
    op.drop_index("events_type_position", table_name="events")
