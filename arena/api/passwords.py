"""Passwords for signing in on the site: argon2id hashes (argon2-cffi, its default, RFC 9106 parameters).

Only the hash is stored (``users.password_hash``); a hash made with older parameters is
replaced by one with the current parameters at the next successful sign-in.
"""

from __future__ import annotations

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

MIN_CHARS = 10
MAX_CHARS = 256  # hashing is deliberately slow; a megabyte "password" must not be hashed

_hasher = PasswordHasher()
# Verified when the name is unknown, so an unknown name costs the same time as a wrong password.
_DECOY = _hasher.hash("not anyone's password")


def password_problem(password: str) -> str | None:
    """What is wrong with ``password`` as a new password (``None``: nothing)."""
    if len(password) < MIN_CHARS:
        return f"the password needs at least {MIN_CHARS} characters"
    if len(password) > MAX_CHARS:
        return f"the password may have at most {MAX_CHARS} characters"
    return None


def hash_password(password: str) -> str:
    """The argon2id hash to store for ``password``."""
    return _hasher.hash(password)


def verify_password(stored: str | None, password: str) -> bool:
    """Whether ``password`` matches the ``stored`` hash (``None``: no password; still takes a hash's time)."""
    if len(password) > MAX_CHARS:
        return False
    try:
        return _hasher.verify(stored or _DECOY, password) and stored is not None
    except (VerificationError, InvalidHashError):
        return False


def needs_rehash(stored: str) -> bool:
    """Whether ``stored`` was made with other parameters than today's (rehash it at sign-in)."""
    return _hasher.check_needs_rehash(stored)
