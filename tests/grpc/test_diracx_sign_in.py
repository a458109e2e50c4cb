"""A DiracX installation as a token issuer, against the real DiracX 0.7.0 server
(`scripts/diracx`): the tokens it issues call dxts as the DiracX user, mapped to dxts roles;
every token that should not verify is refused in one line; dxts's own component tokens still
work beside them; DiracX rotating its keys needs no dxts restart."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from diracx_fixture import DiracXServer, running_diracx
from google.protobuf.wrappers_pb2 import StringValue
from grpc_probe import PROBE_RULES, Probe, unary
from joserfc.jwk import OKPKey

from dxts.core import errors
from dxts.core.grpc import DevKeys, GrpcServer, channel, diracx_issuer
from dxts.core.grpc.diracx_issuer import DiracXIssuer, TrustedIssuers, authenticator
from dxts.core.identity import Identity
from dxts.core.settings import DiracXAuthSettings, ServerSettings
from dxts.web.sessions import Session


@pytest.fixture(scope="module")
def diracx_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("diracx")


@pytest.fixture(scope="module")
def diracx(diracx_dir: Path) -> Iterator[DiracXServer]:
    with running_diracx(diracx_dir) as running:
        yield running


def settings(server: DiracXServer, **overrides: Any) -> DiracXAuthSettings:
    values: dict[str, Any] = {"url": server.url, "vos": [server.vo], "keys_refresh_s": 1.0}
    return DiracXAuthSettings(**{**values, **overrides})


@pytest.fixture(scope="module")
def issuer(diracx: DiracXServer) -> DiracXIssuer:
    return DiracXIssuer(settings(diracx))


@pytest.fixture(scope="module")
async def server(
    diracx: DiracXServer, dev_keys: DevKeys, issuer: DiracXIssuer
) -> AsyncIterator[GrpcServer]:
    """The Probe service verifying dxts's own tokens and the DiracX installation's."""
    running = GrpcServer(
        [Probe().service()],
        settings=ServerSettings(listen="127.0.0.1:0"),
        verifier=TrustedIssuers(dev_keys.verifier(), issuer),
        extra_rules=PROBE_RULES,
    )
    async with running:
        yield running


async def who_am_i(server: GrpcServer, token: str) -> list[object]:
    async with channel(server.address, token=token) as ch:
        answer = await unary(ch, "WhoAmI")(StringValue())
    return json.loads(answer.value)  # type: ignore[no-any-return]


def claims(server: DiracXServer, **overrides: Any) -> dict[str, Any]:
    """An access token's claims as DiracX 0.7.0 writes them, for alice."""
    values: dict[str, Any] = {
        "jti": "0190f1c2-7a4b-7c3d-8e9f-0123456789ab",
        "exp": int(time.time()) + 600,
        "dirac_policies": {},
        "sub": "dxts:dxts-alice",
        "vo": server.vo,
        "iss": server.url,
        "dirac_properties": ["NormalUser"],
        "preferred_username": "alice",
        "dirac_group": "dxts_user",
    }
    return {**values, **overrides}


async def test_a_diracx_users_token_calls_dxts_as_that_user(
    server: GrpcServer, diracx: DiracXServer
) -> None:
    assert await who_am_i(server, diracx.access_token("alice")) == [
        "dxts",
        "dxts:dxts-alice",
        ["user"],
    ]
    # ProductionManagement makes the production manager an operator of the VO.
    assert await who_am_i(server, diracx.access_token("manager")) == [
        "dxts",
        "dxts:dxts-manager",
        ["operator", "user"],
    ]


async def test_the_identity_carries_the_diracx_name_and_group(
    issuer: DiracXIssuer, diracx: DiracXServer
) -> None:
    identity = await issuer.authenticate(diracx.access_token("manager"))
    assert identity == Identity(
        vo="dxts",
        sub="dxts:dxts-manager",
        roles=frozenset({"operator", "user"}),
        name="manager",
        group="production",
    )
    assert identity.display_name == "manager"


async def test_components_keep_their_own_tokens_beside_diracx(
    server: GrpcServer, dev_keys: DevKeys
) -> None:
    token = dev_keys.issue("dxts", "dxts-dispatcher", ["dispatcher"])
    assert await who_am_i(server, token) == ["dxts", "dxts-dispatcher", ["dispatcher"]]


@pytest.mark.parametrize(
    ("case", "refusal"),
    [
        ("expired", "expired"),
        ("other audience", "meant for 'someone-else'"),
        ("other issuer", "issuer 'http://127.0.0.1:1' is not trusted"),
        ("other key, same kid", "bad signature"),
        ("no group", "dirac_group"),
        ("refresh token", "names no issuer"),
        ("garbage", "not a JWT"),
    ],
)
async def test_a_token_that_should_not_verify_is_refused_in_one_line(
    server: GrpcServer, diracx: DiracXServer, case: str, refusal: str
) -> None:
    intruder = OKPKey.generate_key("Ed25519", private=True)
    without_group = claims(diracx)
    del without_group["dirac_group"]
    tokens = {
        "expired": lambda: diracx.mint(claims(diracx, exp=int(time.time()) - 3600)),
        "other audience": lambda: diracx.mint(claims(diracx, aud="someone-else")),
        "other issuer": lambda: diracx.mint(claims(diracx, iss="http://127.0.0.1:1")),
        "other key, same kid": lambda: diracx.mint(claims(diracx), key=intruder),
        "no group": lambda: diracx.mint(without_group),
        "refresh token": lambda: diracx.tokens("alice", "dxts_user")["refresh_token"],
        "garbage": lambda: "not-a-token",
    }
    with pytest.raises(errors.Unauthenticated) as refused:
        await who_am_i(server, tokens[case]())
    assert refusal in str(refused.value)
    assert "\n" not in str(refused.value)


async def test_a_token_minted_with_the_installations_key_verifies(
    server: GrpcServer, diracx: DiracXServer
) -> None:
    """The refusals above are the claims', not the minting's."""
    assert await who_am_i(server, diracx.mint(claims(diracx))) == [
        "dxts",
        "dxts:dxts-alice",
        ["user"],
    ]


async def test_a_vo_this_dxts_does_not_serve_is_refused(
    server: GrpcServer, diracx: DiracXServer
) -> None:
    with pytest.raises(errors.Unauthenticated, match="DiracX VO 'othervo' is not served"):
        await who_am_i(server, diracx.access_token("bob"))


async def test_a_group_mapping_to_no_role_is_refused(
    server: GrpcServer, diracx: DiracXServer
) -> None:
    """A pilot's token (GenericPilot) is no person's: it cannot call dxts."""
    with pytest.raises(errors.Unauthenticated, match=r"group 'pilot' .* gives no dxts role"):
        await who_am_i(server, diracx.access_token("pilot"))


async def test_the_role_table_maps_groups_and_properties(diracx: DiracXServer) -> None:
    table = DiracXIssuer(
        settings(diracx, group_roles={"dxts_user": ["operator"]}, property_roles={})
    )
    identity = await table.authenticate(diracx.access_token("alice"))
    assert identity.roles == {"operator"}


@pytest.mark.parametrize("role", ["dispatcher", "adaptor", "service"])
def test_a_diracx_token_can_never_act_as_a_component(diracx: DiracXServer, role: str) -> None:
    with pytest.raises(errors.InvalidArgument, match=f"gives \\['{role}'\\]"):
        DiracXIssuer(settings(diracx, property_roles={"NormalUser": [role]}))
    with pytest.raises(errors.InvalidArgument, match="a DiracX user may have only"):
        DiracXIssuer(settings(diracx, group_roles={"admin": ["user", role]}))


async def test_an_audience_when_configured_is_required(diracx: DiracXServer) -> None:
    strict = DiracXIssuer(settings(diracx, audience="dxts"))
    with pytest.raises(errors.Unauthenticated, match="aud"):
        await strict.authenticate(diracx.access_token("alice"))
    identity = await strict.authenticate(diracx.mint(claims(diracx, aud="dxts")))
    assert identity.sub == "dxts:dxts-alice"


def test_no_vos_is_a_configuration_error(diracx: DiracXServer) -> None:
    with pytest.raises(errors.InvalidArgument, match="DXTS_AUTH_DIRACX_VOS is empty"):
        DiracXIssuer(DiracXAuthSettings(url=diracx.url))


def test_without_a_diracx_url_the_own_verifier_alone_serves(dev_keys: DevKeys) -> None:
    own = dev_keys.verifier()
    assert authenticator(own, DiracXAuthSettings()) is own


async def test_an_unreachable_diracx_is_unavailable_not_unauthenticated(
    diracx: DiracXServer,
) -> None:
    nowhere = DiracXIssuer(settings(diracx, url="http://127.0.0.1:1"))
    with pytest.raises(errors.Unavailable, match="cannot fetch the DiracX signing keys"):
        await nowhere.authenticate(diracx.access_token("alice"))


def key_id(token: str) -> str:
    header = token.split(".")[0]
    return str(json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))["kid"])


async def test_diracx_rotating_its_keys_needs_no_dxts_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DiracX's own key rotation and restart (same URL): the issuer fetches the keys again
    when a token names one it does not hold (its keys are not stale yet), and the key rotated
    out still verifies the tokens it signed."""
    monkeypatch.setattr(diracx_issuer, "UNKNOWN_KEY_REFETCH_S", 0.0)
    with running_diracx(tmp_path / "diracx") as first:
        issuer = DiracXIssuer(settings(first, keys_refresh_s=3600.0))
        before = first.access_token("alice")
        assert (await issuer.authenticate(before)).name == "alice"
        port = int(first.url.rsplit(":", 1)[1])
    first.rotate_keys()
    with running_diracx(tmp_path / "diracx", port) as restarted:
        assert restarted.url == first.url
        after = restarted.access_token("manager")
        assert key_id(after) != key_id(before)
        assert (await issuer.authenticate(after)).name == "manager"
        assert (await issuer.authenticate(before)).name == "alice"


def test_the_web_view_names_the_diracx_user(diracx: DiracXServer, dev_keys: DevKeys) -> None:
    signed_in = Session(diracx.access_token("manager"), expires=time.monotonic() + 60)
    assert (signed_in.subject, signed_in.vo) == ("manager", "dxts")
    own = Session(dev_keys.issue("dxts", "olivia", ["operator"]), expires=time.monotonic() + 60)
    assert own.subject == "olivia"
