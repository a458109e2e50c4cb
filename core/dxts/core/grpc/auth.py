"""Bearer-token authentication: who is calling, as an Identity every servicer can read.

Clients send `authorization: Bearer <jwt>`. The token's claims are `sub` (the OIDC subject),
`vo`, `roles` (a list of strings), `iss`, `aud` and `exp`; the server interceptor verifies
them with a `TokenVerifier` and serves the request `acting_as` the caller's `Identity`
(`dxts.core.identity`), which `current_identity()` reads.

Keys: production verifies with the issuer's public key (EdDSA, RS256, ES256) or a shared secret
(HS256), from `AuthSettings`. With neither configured, the embedded default uses a
*development* Ed25519 key pair generated at first use into the installation's data directory
(`DEV_KEY_FILE`): whoever can read that file can mint any identity, so it is for a single
machine only, and every use of it logs a warning saying so.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes, PublicKeyTypes

from dxts.core.errors import InvalidArgument, Unauthenticated
from dxts.core.identity import Identity
from dxts.core.settings import AuthSettings

log = logging.getLogger(__name__)

DEV_KEY_FILE = "dev-only-jwt-ed25519.pem"
# One issuer by default everywhere: the services, `dxts token issue` and the development keys.
DEFAULT_ISSUER = "dxts"
DEFAULT_AUDIENCE = "dxts"
HMAC_ALGORITHMS = frozenset({"HS256", "HS384", "HS512"})
# Tolerated clock skew between the token issuer and this server.
LEEWAY_S = 30.0
_CACHE_SIZE = 1024


def bearer_token(metadata: Iterable[tuple[str, str | bytes]] | None) -> str:
    """The token of the `authorization: Bearer ...` entry; Unauthenticated when absent."""
    for key, value in metadata or ():
        if key.lower() != "authorization":
            continue
        text = value.decode() if isinstance(value, bytes) else value
        scheme, _, token = text.strip().partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
        raise Unauthenticated("the authorization metadata is not 'Bearer <token>'")
    raise Unauthenticated("missing bearer token (authorization metadata)")


class Authenticator(Protocol):
    """What the server verifies bearer tokens with: one issuer (`TokenVerifier`) or several
    (`diracx_issuer.TrustedIssuers`); may fetch keys, hence a coroutine."""

    async def authenticate(self, token: str) -> Identity: ...


class TokenVerifier:
    """Verifies bearer tokens against one key, issuer and audience."""

    def __init__(
        self,
        key: str | bytes | PublicKeyTypes,
        *,
        algorithms: Iterable[str],
        issuer: str,
        audience: str,
        leeway_s: float = LEEWAY_S,
    ) -> None:
        self._key = key
        offered = list(algorithms)
        symmetric = isinstance(key, str | bytes)
        # Only the algorithms of this key's kind: a public key must never be usable as an
        # HMAC secret (the classic algorithm-confusion attack), nor a secret as a public key.
        self.algorithms = sorted(a for a in offered if (a in HMAC_ALGORITHMS) == symmetric)
        if not self.algorithms:
            raise InvalidArgument(
                f"no usable algorithm among {sorted(offered)} for this key", field="algorithms"
            )
        self.issuer = issuer
        self.audience = audience
        self.leeway_s = leeway_s
        self._cache: dict[str, tuple[Identity, float]] = {}

    @classmethod
    def from_settings(
        cls, settings: AuthSettings, *, dev_key_dir: Path | None = None
    ) -> TokenVerifier:
        """The verifier the settings describe; with no key configured, the development key
        pair in `dev_key_dir` (created at first use)."""
        configured = [
            name
            for name in ("public_key", "public_key_file", "shared_secret")
            if getattr(settings, name)
        ]
        if len(configured) > 1:
            raise InvalidArgument(
                f"set only one of DXTS_AUTH_PUBLIC_KEY, _PUBLIC_KEY_FILE, _SHARED_SECRET "
                f"(got {', '.join(configured)})",
                field="auth",
            )

        def verifier(key: str | PublicKeyTypes) -> TokenVerifier:
            return cls(
                key,
                algorithms=settings.algorithms,
                issuer=settings.issuer,
                audience=settings.audience,
            )

        if settings.shared_secret:
            return verifier(settings.shared_secret)
        if settings.public_key or settings.public_key_file:
            pem = settings.public_key or Path(str(settings.public_key_file)).read_text()
            try:
                return verifier(serialization.load_pem_public_key(pem.encode()))
            except ValueError as error:
                raise InvalidArgument(
                    f"not a PEM public key: {error}", field="public_key"
                ) from None
        if dev_key_dir is None:
            raise InvalidArgument(
                "no token verification key: set DXTS_AUTH_PUBLIC_KEY(_FILE) or "
                "DXTS_AUTH_SHARED_SECRET (the development key pair needs a data directory)",
                field="auth",
            )
        return DevKeys.load_or_create(dev_key_dir).verifier(
            issuer=settings.issuer, audience=settings.audience
        )

    async def authenticate(self, token: str) -> Identity:
        return self.verify(token)

    def verify(self, token: str) -> Identity:
        """The identity a token proves; Unauthenticated for anything that does not verify."""
        cached = self._cache.get(token)
        if cached is not None and cached[1] > time.time():
            return cached[0]
        try:
            claims = jwt.decode(
                token,
                self._key,  # type: ignore[arg-type]
                algorithms=self.algorithms,
                issuer=self.issuer,
                audience=self.audience,
                leeway=self.leeway_s,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.PyJWTError as error:
            raise Unauthenticated(f"invalid bearer token: {error}") from None
        identity = _identity_from_claims(claims)
        if len(self._cache) >= _CACHE_SIZE:
            self._cache.clear()
        self._cache[token] = (identity, float(claims["exp"]) + self.leeway_s)
        return identity


def _identity_from_claims(claims: dict[str, Any]) -> Identity:
    sub, vo, roles = claims.get("sub"), claims.get("vo"), claims.get("roles", [])
    if not isinstance(vo, str) or not vo:
        raise Unauthenticated("invalid bearer token: no 'vo' claim")
    if not isinstance(sub, str) or not sub:
        raise Unauthenticated("invalid bearer token: no 'sub' claim")
    if not isinstance(roles, list) or not all(isinstance(role, str) for role in roles):
        raise Unauthenticated("invalid bearer token: 'roles' is not a list of strings")
    return Identity(vo=vo, sub=sub, roles=frozenset(roles))


def issue_token(
    vo: str,
    sub: str,
    roles: Iterable[str] = (),
    *,
    key: str | bytes | PrivateKeyTypes,
    issuer: str = DEFAULT_ISSUER,
    audience: str = DEFAULT_AUDIENCE,
    lifetime: timedelta = timedelta(hours=1),
    now: datetime | None = None,
) -> str:
    """A signed token for `vo`/`sub` with `roles` (tests, the CLI, `dxts up`).

    `key` is a shared secret (HS256) or a private key (Ed25519 → EdDSA, RSA → RS256,
    EC → ES256), as an object or PEM text.
    """
    if isinstance(key, str) and key.lstrip().startswith("-----BEGIN"):
        key = serialization.load_pem_private_key(key.encode(), password=None)
    issued = now or datetime.now(UTC)
    claims = {
        "sub": sub,
        "vo": vo,
        "roles": sorted(set(roles)),
        "iss": issuer,
        "aud": audience,
        "iat": int(issued.timestamp()),
        "exp": int((issued + lifetime).timestamp()),
    }
    return jwt.encode(claims, key, algorithm=_algorithm_for(key))  # type: ignore[arg-type]


def _algorithm_for(key: object) -> str:
    if isinstance(key, str | bytes):
        return "HS256"
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return "EdDSA"
    if isinstance(key, rsa.RSAPrivateKey):
        return "RS256"
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return "ES256"
    raise InvalidArgument(f"cannot sign tokens with a {type(key).__name__}", field="key")


@dataclass(frozen=True)
class DevKeys:
    """The development Ed25519 key pair of the embedded default. DEVELOPMENT ONLY."""

    path: Path
    private_key: ed25519.Ed25519PrivateKey

    @classmethod
    def load_or_create(cls, directory: Path) -> DevKeys:
        """The key pair in `directory`, generated (mode 0600) if it is not there yet."""
        path = Path(directory) / DEV_KEY_FILE
        if not path.exists():
            _create_private_key_file(path)
        private = serialization.load_pem_private_key(path.read_bytes(), password=None)
        if not isinstance(private, ed25519.Ed25519PrivateKey):
            raise InvalidArgument(f"{path} does not hold an Ed25519 private key", field="auth")
        log.warning(
            "using the DEVELOPMENT token key pair %s: anyone who can read it can act as any "
            "user; configure DXTS_AUTH_PUBLIC_KEY for anything but a single machine",
            path,
        )
        return cls(path, private)

    @property
    def public_key(self) -> ed25519.Ed25519PublicKey:
        return self.private_key.public_key()

    def public_pem(self) -> str:
        return self.public_key.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ).decode()

    def verifier(
        self, *, issuer: str = DEFAULT_ISSUER, audience: str = DEFAULT_AUDIENCE
    ) -> TokenVerifier:
        return TokenVerifier(
            self.public_key, algorithms=["EdDSA"], issuer=issuer, audience=audience
        )

    def issue(
        self,
        vo: str,
        sub: str,
        roles: Iterable[str] = (),
        *,
        issuer: str = DEFAULT_ISSUER,
        audience: str = DEFAULT_AUDIENCE,
        lifetime: timedelta = timedelta(hours=1),
        now: datetime | None = None,
    ) -> str:
        return issue_token(
            vo,
            sub,
            roles,
            key=self.private_key,
            issuer=issuer,
            audience=audience,
            lifetime=lifetime,
            now=now,
        )


def _create_private_key_file(path: Path) -> None:
    """Write a new key atomically: two processes starting together end up with one key."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pem = ed25519.Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    fd, scratch = tempfile.mkstemp(dir=path.parent, prefix=".dev-key-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(pem)
        os.chmod(scratch, 0o600)
        with contextlib.suppress(FileExistsError):
            os.link(scratch, path)  # fails if another process won the race: keep theirs
    finally:
        os.unlink(scratch)
    log.warning("generated a DEVELOPMENT token key pair at %s", path)
