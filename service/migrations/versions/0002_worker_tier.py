"""The worker tier: who asked for a job and where it runs (client, queue, placement, worker,
attempts), the workers' heartbeats, and stage text in compressed chunks cut at line boundaries
(each stage's old single blob is moved into chunks).

Revision ID: 0002
Revises: 0001
"""
import zlib

import sqlalchemy as sa
from alembic import op

from service import stage_text

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# The chunk size the old blobs are cut into (new stages use the chunk size the store is given).
CHUNK_BYTES = 256 * 1024


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("client", sa.String(64), nullable=False, server_default=""))
        batch.add_column(sa.Column("queue", sa.String(64), nullable=False, server_default="cpu"))
        batch.add_column(sa.Column("placement", sa.JSON, nullable=True))
        batch.add_column(sa.Column("worker", sa.String(200), nullable=True))
        batch.add_column(sa.Column("attempts", sa.Integer, nullable=False, server_default="0"))
        batch.add_column(sa.Column("started", sa.DateTime, nullable=True))
        batch.create_index("ix_jobs_status_queue_created", ["status", "queue", "created"])
        batch.create_index("ix_jobs_client_status", ["client", "status"])
    op.create_table(
        "workers",
        sa.Column("id", sa.String(64), primary_key=True),  # one per worker process
        sa.Column("name", sa.String(200), nullable=False, index=True),
        sa.Column("host", sa.String(200), nullable=False),
        sa.Column("queues", sa.JSON, nullable=False),
        sa.Column("capabilities", sa.JSON, nullable=False),
        sa.Column("concurrency", sa.Integer, nullable=False),
        sa.Column("running", sa.Integer, nullable=False, server_default="0"),
        sa.Column("started", sa.DateTime, nullable=False),
        sa.Column("last_seen", sa.DateTime, nullable=False, index=True),
    )
    stage_chunks = op.create_table(
        "stage_chunks",
        sa.Column("job_id", sa.String(32), primary_key=True),
        sa.Column("key", sa.String(300), primary_key=True),
        sa.Column("n", sa.Integer, primary_key=True),
        sa.Column("first_line", sa.Integer, nullable=False),
        sa.Column("line_count", sa.Integer, nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
        sa.ForeignKeyConstraint(["job_id", "key"], ["stages.job_id", "stages.key"]),
    )
    with op.batch_alter_table("stages") as batch:
        batch.add_column(sa.Column("lines", sa.Integer, nullable=False, server_default="0"))
    conn = op.get_bind()
    stages = sa.table("stages", sa.column("job_id"), sa.column("key"), sa.column("data", sa.LargeBinary),
                      sa.column("lines", sa.Integer))
    for job_id, key, data in conn.execute(sa.select(stages.c.job_id, stages.c.key, stages.c.data)).all():
        text = zlib.decompress(data).decode("utf-8")
        chunks = stage_text.split(text, CHUNK_BYTES)
        op.bulk_insert(stage_chunks, [{"job_id": job_id, "key": key, "n": c.n, "first_line": c.first_line,
                                       "line_count": c.line_count, "data": c.data} for c in chunks])
        conn.execute(sa.update(stages).where(stages.c.job_id == job_id, stages.c.key == key)
                     .values(lines=stage_text.line_count(text)))
    with op.batch_alter_table("stages") as batch:
        batch.drop_column("data")


def downgrade() -> None:
    with op.batch_alter_table("stages") as batch:
        batch.add_column(sa.Column("data", sa.LargeBinary, nullable=True))
    conn = op.get_bind()
    chunks = sa.table("stage_chunks", sa.column("job_id"), sa.column("key"), sa.column("n"),
                      sa.column("first_line"), sa.column("line_count"), sa.column("data", sa.LargeBinary))
    stages = sa.table("stages", sa.column("job_id"), sa.column("key"), sa.column("data", sa.LargeBinary))
    texts: dict = {}
    for row in conn.execute(sa.select(chunks).order_by(chunks.c.job_id, chunks.c.key, chunks.c.n)).all():
        texts.setdefault((row.job_id, row.key), []).append(zlib.decompress(row.data))
    for (job_id, key), parts in texts.items():
        conn.execute(sa.update(stages).where(stages.c.job_id == job_id, stages.c.key == key)
                     .values(data=zlib.compress(b"".join(parts), 6)))
    op.drop_table("stage_chunks")
    with op.batch_alter_table("stages") as batch:
        batch.drop_column("lines")
        batch.alter_column("data", existing_type=sa.LargeBinary, nullable=False)
    op.drop_table("workers")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_index("ix_jobs_client_status")
        batch.drop_index("ix_jobs_status_queue_created")
        for column in ("started", "attempts", "worker", "placement", "queue", "client"):
            batch.drop_column(column)
