"""Alembic's entry point: run the migrations on the connection `service.migrations.upgrade`
passes in (no alembic.ini, no URL of its own). SQLite alters tables in batch mode (copy and move)."""
from __future__ import annotations

from alembic import context

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=None,
                  render_as_batch=connection.dialect.name == "sqlite")
with context.begin_transaction():
    context.run_migrations()
