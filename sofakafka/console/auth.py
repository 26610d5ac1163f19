"""The console's own login: every page but the login form and ``/health`` needs a signed-in user.

Users come from a file (``--users-file``), one ``name:hash`` a line, the hash made by
``sofakafka console hash-password`` (scrypt, salted; ``#`` starts a comment). Without a file the console makes
one user, ``admin``, with a random password that it prints once at start-up (as Jupyter prints its token):
the cluster is never shown to a stranger by default. ``--no-login`` turns the login off on purpose, for a
console bound to loopback on a single-user machine.

Sessions are random tokens held in memory (a restart signs everyone out) in an HttpOnly, SameSite=Strict
cookie; every form carries the session's CSRF token too. A failed login waits a moment before answering.

This login is the console's, not the cluster's: the console talks to the cluster as one client, with the
SASL user of ``--command-config`` once the brokers do SASL, and shows what that user's ACLs allow.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

SESSION_COOKIE = "sofakafka_console"
SESSION_TTL_S = 12 * 3600
_SCRYPT = {"n": 2 ** 14, "r": 8, "p": 1}


class UsersFileError(Exception):
    """A users file that cannot be read or has a bad line (the message names the line)."""


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    """``scrypt$n$r$p$salt$hash`` (base64), verified by :func:`verify_password`."""
    salt = salt if salt is not None else secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, dklen=32, **_SCRYPT)
    b64 = base64.b64encode
    return f"scrypt${_SCRYPT['n']}${_SCRYPT['r']}${_SCRYPT['p']}${b64(salt).decode()}${b64(digest).decode()}"


def verify_password(password: str, stored: str) -> bool:
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != "scrypt":
            return False
        expected = base64.b64decode(digest)
        got = hashlib.scrypt(password.encode(), salt=base64.b64decode(salt), n=int(n), r=int(r), p=int(p),
                             dklen=len(expected))
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(got, expected)


def load_users(path: Path) -> dict[str, str]:
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise UsersFileError(f"cannot read users file {path}: {exc.strerror or exc}") from None
    users: dict[str, str] = {}
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, stored = line.partition(":")
        if not sep or not name or not stored.startswith("scrypt$") or stored.count("$") != 5:
            raise UsersFileError(f"{path}:{number}: expected name:scrypt$... (make the hash with "
                                 "`sofakafka console hash-password`)")
        users[name] = stored
    if not users:
        raise UsersFileError(f"{path} names no user")
    return users


@dataclass
class Session:
    user: str
    csrf: str
    expires: float


class Authenticator:
    """Users, sessions and CSRF tokens (thread-safe; the app calls it from its event loop)."""

    def __init__(self, users: dict[str, str] | None) -> None:
        self.enabled = users is not None
        self._users = users or {}
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    def check(self, user: str, password: str) -> bool:
        stored = self._users.get(user)
        if stored is None:
            # Same work for an unknown name as for a wrong password: the timing does not tell names apart.
            verify_password(password, hash_password("x", salt=b"0" * 16))
            return False
        return verify_password(password, stored)

    def open_session(self, user: str) -> str:
        token = secrets.token_urlsafe(32)
        with self._lock:
            self._expire()
            self._sessions[token] = Session(user, secrets.token_urlsafe(24), time.monotonic() + SESSION_TTL_S)
        return token

    def session(self, token: str | None) -> Session | None:
        if not token:
            return None
        with self._lock:
            s = self._sessions.get(token)
            if s is None or s.expires < time.monotonic():
                self._sessions.pop(token, None)
                return None
            return s

    def close_session(self, token: str | None) -> None:
        if token:
            with self._lock:
                self._sessions.pop(token, None)

    def _expire(self) -> None:
        now = time.monotonic()
        for token in [t for t, s in self._sessions.items() if s.expires < now]:
            del self._sessions[token]


def generated_admin() -> tuple[dict[str, str], str]:
    """One ``admin`` user with a random password (returned so that start-up can print it)."""
    password = secrets.token_urlsafe(12)
    return {"admin": hash_password(password)}, password
