"""Arena: the service layer (engine, scheduler, storage, API, CLI)."""

__version__ = "0.1.0"
