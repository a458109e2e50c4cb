"""Sign-in: sessions, one-time sign-in tickets and the cross-site request token.

A session holds the token the user signed in with (the services decide what it may see and
do; the claims read here, unverified, only name the user on the page). The browser holds only
a random session id in an HttpOnly, SameSite cookie. A ticket is a random one-time code that
stands for a token for a few minutes: `dxts up` and `dxts open` print a link with one, so a
browser signs in without the token ever appearing in a URL or a browser history.

Both live in this process's memory: a restart of dxts-web signs everyone out (run one
replica, or pin sessions to one, in a deployment).
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import jwt

COOKIE = "dxts_session"


def _claims(token: str) -> dict[str, Any]:
    try:
        return dict(jwt.decode(token, options={"verify_signature": False}))
    except jwt.PyJWTError:
        return {}


@dataclass
class Session:
    token: str
    expires: float
    id: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    @property
    def subject(self) -> str:
        """Who is signed in, as the page names them: a DiracX user's name
        (`preferred_username`), else the token's subject."""
        claims = _claims(self.token)
        return str(claims.get("preferred_username") or claims.get("sub", "?"))

    @property
    def vo(self) -> str:
        return str(_claims(self.token).get("vo", ""))

    def csrf_matches(self, given: str) -> bool:
        return secrets.compare_digest(self.csrf.encode(), given.encode())


class Sessions:
    def __init__(self, *, session_seconds: float, ticket_seconds: float) -> None:
        self.session_seconds = session_seconds
        self.ticket_seconds = ticket_seconds
        self._sessions: dict[str, Session] = {}
        self._tickets: dict[str, tuple[str, float]] = {}

    def issue_ticket(self, token: str, *, seconds: float | None = None) -> str:
        """A one-time code that signs in as `token` until it is used or expires (after
        `seconds`, by default the configured ticket lifetime)."""
        self._forget_expired()
        ticket = secrets.token_urlsafe(32)
        lifetime = self.ticket_seconds if seconds is None else seconds
        self._tickets[ticket] = (token, time.monotonic() + lifetime)
        return ticket

    def redeem(self, ticket: str) -> str | None:
        """The ticket's token, once: a second use (or a late one) finds nothing."""
        token, expires = self._tickets.pop(ticket, ("", 0.0))
        return token if token and time.monotonic() < expires else None

    def open(self, token: str) -> Session:
        self._forget_expired()
        session = Session(token, time.monotonic() + self.session_seconds)
        self._sessions[session.id] = session
        return session

    def find(self, session_id: str | None) -> Session | None:
        session = self._sessions.get(session_id or "")
        if session is None or session.expires <= time.monotonic():
            return None
        return session

    def close(self, session_id: str | None) -> None:
        self._sessions.pop(session_id or "", None)

    def _forget_expired(self) -> None:
        now = time.monotonic()
        for key in [k for k, s in self._sessions.items() if s.expires <= now]:
            del self._sessions[key]
        for key in [k for k, (_, e) in self._tickets.items() if e <= now]:
            del self._tickets[key]
