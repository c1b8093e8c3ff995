"""Version scans: one source over the installed toolchains of its language, the stage compared and
the jobs in version order (service/scans.py).

Revision ID: 0005
Revises: 0004
"""
import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "scans",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("language", sa.String(32), nullable=False),
        sa.Column("stage", sa.JSON, nullable=False),
        sa.Column("jobs", sa.JSON, nullable=False),
        sa.Column("left_out", sa.JSON, nullable=False),
        sa.Column("created", sa.DateTime, server_default=sa.func.now(), nullable=False),
        sa.Column("client", sa.String(64), nullable=False, server_default=""),
    )


def downgrade() -> None:
    op.drop_table("scans")
