"""Revision scripts, applied in order by ``arena.storage.db.upgrade``."""
