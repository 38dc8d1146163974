"""Repositories: small async functions over an AsyncSession, one module per area."""
