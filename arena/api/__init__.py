"""Arena's HTTP API (FastAPI): ``create_app`` builds the app; routes live in ``routes/``."""

from arena.api.app import create_app

__all__ = ["create_app"]
