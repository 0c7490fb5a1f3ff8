"""Revision scripts, applied in order by ``arena.db.upgrade``."""
