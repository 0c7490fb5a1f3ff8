"""Loads the database fixtures for this folder unless tests/conftest.py already did.

tests/conftest.py is meant to import :mod:`tests.fixtures_db` for the whole suite;
importing them a second time here would define the fixtures twice (and create a
second PostgreSQL database per worker), so this only fills in until it does.
"""

import sys

if "tests.fixtures_db" not in sys.modules:
    from tests.fixtures_db import *
