"""Postgres migrations: `NNNN_name.sql`, applied in order by `store.postgres_schema`."""
