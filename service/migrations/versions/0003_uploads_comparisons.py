"""Uploaded compiler logs to import (by sha256, compressed) and stored comparisons of two jobs.

Revision ID: 0003
Revises: 0002
"""
import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "uploads",
        sa.Column("digest", sa.String(64), primary_key=True),
        sa.Column("name", sa.String(300), nullable=False),
        sa.Column("size", sa.Integer, nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
        sa.Column("created", sa.DateTime, server_default=sa.func.now(), nullable=False),
    )
    op.create_table(
        "comparisons",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("job_a", sa.String(32), sa.ForeignKey("jobs.id"), nullable=False),
        sa.Column("job_b", sa.String(32), sa.ForeignKey("jobs.id"), nullable=False),
        sa.Column("created", sa.DateTime, server_default=sa.func.now(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("comparisons")
    op.drop_table("uploads")
