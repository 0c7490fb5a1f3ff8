"""Alembic environment and revision scripts (a package so that installs ship them)."""
