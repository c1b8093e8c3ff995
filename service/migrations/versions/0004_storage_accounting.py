"""Storage accounting and retention: each job's stored bytes (its stage chunks, compressed) and when
it was last viewed, and who uploaded each file, so that quotas are checked and old jobs collected
without reading stage data.

Revision ID: 0004
Revises: 0003
"""
import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("stored_bytes", sa.BigInteger, nullable=False, server_default="0"))
        batch.add_column(sa.Column("viewed", sa.DateTime, nullable=True))
    with op.batch_alter_table("uploads") as batch:
        batch.add_column(sa.Column("client", sa.String(64), nullable=False, server_default=""))
        batch.add_column(sa.Column("stored_bytes", sa.BigInteger, nullable=False, server_default="0"))
    # what existing rows hold
    op.execute("UPDATE jobs SET stored_bytes = COALESCE((SELECT SUM(LENGTH(data)) FROM stage_chunks "
               "WHERE stage_chunks.job_id = jobs.id), 0)")
    op.execute("UPDATE uploads SET stored_bytes = LENGTH(data)")
    op.create_index("ix_jobs_client", "jobs", ["client"])


def downgrade() -> None:
    op.drop_index("ix_jobs_client", "jobs")
    with op.batch_alter_table("uploads") as batch:
        batch.drop_column("stored_bytes")
        batch.drop_column("client")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("viewed")
        batch.drop_column("stored_bytes")
