"""PostgreSQL-only SQL (pgvector, tsvector); the repos call it when the session is on PostgreSQL."""
