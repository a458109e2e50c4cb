"""A DiracX installation as a token issuer: its users call dxts with the tokens DiracX gives them.

DiracX publishes its signing keys (`jwks_uri` of `/.well-known/openid-configuration`) and issues
access tokens carrying `sub` (`<vo>:<id>`), `vo`, `dirac_group`, `dirac_properties`,
`preferred_username`, `iss` (the installation's URL), `jti` and `exp`, signed with an Ed25519
(JWS algorithm `Ed25519`, RFC 9864) or RSA key, and no `aud`. `DiracXIssuer` verifies those with
the keys it discovered, fetching them again when they are older than `keys_refresh_s` or when a
token names a key it does not hold (DiracX rotated its keys: no restart needed), and maps the
claims to an `Identity` through the installation's role table (`DiracXAuthSettings`).

Only people's roles come out of that table (user, operator, admin): a DiracX token can never act
as a component, whose tokens stay dxts's own (`auth.TokenVerifier`). `TrustedIssuers` routes each
token to the issuer it names, so both kinds are accepted by the same server.

Verification is joserfc's (the JOSE library DiracX itself signs and verifies with): PyJWT, which
verifies dxts's own tokens, has no `Ed25519` JWS algorithm.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from typing import Any

import httpx
from joserfc import jws, jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from dxts.core.errors import InvalidArgument, Unauthenticated, Unavailable
from dxts.core.grpc.auth import LEEWAY_S, Authenticator, TokenVerifier
from dxts.core.identity import Identity
from dxts.core.settings import DiracXAuthSettings

log = logging.getLogger(__name__)

# The algorithms DiracX signs with (its `token_allowed_algorithms`), under both names of EdDSA
# over Ed25519. Never an HMAC one: the keys are public.
DIRACX_ALGORITHMS = ("Ed25519", "EdDSA", "RS256")
# The roles a DiracX token may carry: a person's, never a component's.
PEOPLE_ROLES = frozenset({"user", "operator", "admin"})
# A token naming a key this issuer does not hold fetches the keys again at most this often, so
# forged key ids cannot make dxts hammer DiracX.
UNKNOWN_KEY_REFETCH_S = 10.0
FETCH_TIMEOUT_S = 10.0
_REQUIRED_CLAIMS = ("sub", "vo", "iss", "exp", "dirac_group", "dirac_properties")


def _role_table(table: Mapping[str, list[str]], setting: str) -> dict[str, frozenset[str]]:
    roles = {key: frozenset(values) for key, values in table.items()}
    for key, given in roles.items():
        if not given <= PEOPLE_ROLES:
            raise InvalidArgument(
                f"DXTS_AUTH_DIRACX_{setting.upper()}: {key!r} gives "
                f"{sorted(given - PEOPLE_ROLES)}; a DiracX user may have only "
                f"{sorted(PEOPLE_ROLES)}",
                field=setting,
            )
    return roles


class DiracXIssuer:
    """Verifies a DiracX installation's access tokens and maps them to dxts identities."""

    def __init__(self, settings: DiracXAuthSettings, *, leeway_s: float = LEEWAY_S) -> None:
        if not settings.url:
            raise InvalidArgument("DXTS_AUTH_DIRACX_URL is not set", field="url")
        if not settings.vos:
            raise InvalidArgument(
                "DXTS_AUTH_DIRACX_VOS is empty: name the VOs whose DiracX users may call dxts "
                '(a JSON list, e.g. ["lhcb"])',
                field="vos",
            )
        self.url = settings.url.rstrip("/")
        self.vos = frozenset(settings.vos)
        self.audience = settings.audience
        self.keys_refresh_s = settings.keys_refresh_s
        self.leeway_s = leeway_s
        self.property_roles = _role_table(settings.property_roles, "property_roles")
        self.group_roles = _role_table(settings.group_roles, "group_roles")
        self.issuer: str | None = None  # the `issuer` of DiracX's OpenID configuration
        self._keys: KeySet | None = None
        self._fetched_at = float("-inf")
        self._lock = asyncio.Lock()

    async def authenticate(self, token: str) -> Identity:
        """The identity a DiracX access token proves; Unauthenticated (one line) otherwise."""
        kid = _header(token).get("kid")
        claimed = unverified_issuer(token)
        await self._keys_holding(None)
        if claimed is None:
            raise Unauthenticated(
                "invalid bearer token: it names no issuer (a refresh token is no access token)"
            )
        if claimed != self.issuer:
            raise Unauthenticated(
                f"invalid bearer token: issuer {claimed!r} is not trusted here (DiracX is "
                f"{self.issuer!r})"
            )
        keys = await self._keys_holding(kid if isinstance(kid, str) else None)
        try:
            claims = jwt.decode(token, keys, algorithms=list(DIRACX_ALGORITHMS)).claims
        except (JoseError, ValueError) as error:
            raise Unauthenticated(f"invalid DiracX token: {_words(error)}") from None
        self._check_claims(claims)
        return self._identity(claims)

    def _check_claims(self, claims: dict[str, Any]) -> None:
        options: dict[str, Any] = {name: {"essential": True} for name in _REQUIRED_CLAIMS}
        options["iss"] = {"essential": True, "value": self.issuer}
        if self.audience:
            options["aud"] = {"essential": True, "value": self.audience}
        registry = jwt.JWTClaimsRegistry(leeway=int(self.leeway_s), **options)
        try:
            registry.validate(claims)
        except JoseError as error:
            raise Unauthenticated(f"invalid DiracX token: {_words(error)}") from None
        if not self.audience and "aud" in claims:
            raise Unauthenticated(
                f"invalid DiracX token: it is meant for {claims['aud']!r}, not this dxts "
                "(DXTS_AUTH_DIRACX_AUDIENCE is not set)"
            )

    def _identity(self, claims: dict[str, Any]) -> Identity:
        vo, sub, group = claims["vo"], claims["sub"], claims["dirac_group"]
        properties = claims["dirac_properties"]
        if not all(isinstance(value, str) and value for value in (vo, sub, group)) or not (
            isinstance(properties, list) and all(isinstance(p, str) for p in properties)
        ):
            raise Unauthenticated("invalid DiracX token: malformed vo, sub, group or properties")
        if vo not in self.vos:
            raise Unauthenticated(
                f"DiracX VO {vo!r} is not served by this dxts (it serves {sorted(self.vos)})"
            )
        roles = set(self.group_roles.get(group, ()))
        for name in properties:
            roles |= self.property_roles.get(name, frozenset())
        if not roles:
            raise Unauthenticated(
                f"the DiracX group {group!r} (properties {', '.join(sorted(properties))}) "
                "gives no dxts role"
            )
        name = claims.get("preferred_username")
        return Identity(
            vo=vo,
            sub=sub,
            roles=frozenset(roles),
            name=name if isinstance(name, str) else "",
            group=group,
        )

    async def _keys_holding(self, kid: str | None) -> KeySet:
        """The published keys, fetched again when stale or when none has `kid`."""
        async with self._lock:
            age = time.monotonic() - self._fetched_at
            stale = self._keys is None or age > self.keys_refresh_s
            missing = kid is not None and not _has_kid(self._keys, kid)
            may_refetch = age > min(UNKNOWN_KEY_REFETCH_S, self.keys_refresh_s)
            if stale or (missing and may_refetch):
                await self._fetch()
            assert self._keys is not None
            return self._keys

    async def _fetch(self) -> None:
        try:
            async with httpx.AsyncClient(timeout=FETCH_TIMEOUT_S) as http:
                configuration = await _get_json(
                    http, f"{self.url}/.well-known/openid-configuration"
                )
                issuer, jwks_uri = configuration.get("issuer"), configuration.get("jwks_uri")
                if not isinstance(issuer, str) or not isinstance(jwks_uri, str):
                    raise ValueError("its OpenID configuration has no issuer or jwks_uri")
                keys = KeySet.import_key_set(await _get_json(http, jwks_uri))  # type: ignore[arg-type]
        except (httpx.HTTPError, ValueError, JoseError) as error:
            if self._keys is None:
                raise Unavailable(
                    f"cannot fetch the DiracX signing keys from {self.url}: {_words(error)}"
                ) from None
            log.warning(
                "keeping the DiracX keys fetched before: fetching from %s failed: %s",
                self.url,
                _words(error),
            )
            self._fetched_at = time.monotonic()
            return
        if self.issuer is not None and issuer != self.issuer:
            log.warning(
                "DiracX at %s now names its issuer %s (was %s)", self.url, issuer, self.issuer
            )
        self.issuer, self._keys, self._fetched_at = issuer, keys, time.monotonic()
        log.info("DiracX %s: %d signing key(s) from %s", issuer, len(keys.keys), jwks_uri)


async def _get_json(http: httpx.AsyncClient, url: str) -> dict[str, Any]:
    reply = await http.get(url)
    if reply.status_code != 200:
        raise ValueError(f"GET {url} answered {reply.status_code}: {reply.text[:200]}")
    data = reply.json()
    if not isinstance(data, dict):
        raise ValueError(f"GET {url} did not answer a JSON object")
    return data


def _has_kid(keys: KeySet | None, kid: str) -> bool:
    return keys is not None and any(key.kid == kid for key in keys.keys)


def _header(token: str) -> dict[str, Any]:
    try:
        return dict(jws.extract_compact(token.encode()).protected)
    except (JoseError, ValueError):
        raise Unauthenticated("invalid bearer token: not a JWT") from None


def unverified_issuer(token: str) -> str | None:
    """The `iss` a token claims, read before anything is verified, to choose its verifier."""
    try:
        payload = json.loads(jws.extract_compact(token.encode()).payload)
    except (JoseError, ValueError):
        raise Unauthenticated("invalid bearer token: not a JWT") from None
    issuer = payload.get("iss") if isinstance(payload, dict) else None
    return issuer if isinstance(issuer, str) else None


def _words(error: Exception) -> str:
    """The failing library's own words, in one line."""
    if isinstance(error, JoseError):
        return error.description or error.error.replace("_", " ")
    return " ".join(str(error).split()) or type(error).__name__


class TrustedIssuers:
    """dxts's own issuer (components, `dxts token issue`) and a DiracX installation (people),
    each token verified by the issuer it names."""

    def __init__(self, own: TokenVerifier, diracx: DiracXIssuer) -> None:
        self.own = own
        self.diracx = diracx

    async def authenticate(self, token: str) -> Identity:
        if unverified_issuer(token) == self.own.issuer:
            return self.own.verify(token)
        return await self.diracx.authenticate(token)


def authenticator(own: TokenVerifier, diracx: DiracXAuthSettings | None = None) -> Authenticator:
    """What the server verifies tokens with: dxts's own verifier, and DiracX's users too when
    `DXTS_AUTH_DIRACX_URL` is set."""
    settings = DiracXAuthSettings() if diracx is None else diracx
    if not settings.url:
        return own
    return TrustedIssuers(own, DiracXIssuer(settings))
