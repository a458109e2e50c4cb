"""Bearer tokens: verified by the interceptor, the identity reaches the handler, and every
token that should not verify does not."""

from __future__ import annotations

import base64
import hashlib
import hmac
import inspect
import json
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519
from google.protobuf.wrappers_pb2 import StringValue
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_probe import Probe, unary

from dxts.core import errors
from dxts.core.grpc import DevKeys, GrpcServer, Service, TokenVerifier, channel, issue_token
from dxts.core.grpc.auth import DEFAULT_ISSUER, DEV_KEY_FILE
from dxts.core.identity import Identity, acting_as, current_identity
from dxts.core.settings import AuthSettings, ServerSettings
from dxts.v1 import dispatcher_pb2, dispatcher_pb2_grpc

SECRET = "a-shared-secret-of-at-least-32-bytes"


async def who_am_i(server: GrpcServer, token: str | None) -> list[object]:
    async with channel(server.address, token=token) as ch:
        answer = await unary(ch, "WhoAmI")(StringValue())
    return json.loads(answer.value)  # type: ignore[no-any-return]


async def test_the_identity_reaches_the_handler(server: GrpcServer, dev_keys: DevKeys) -> None:
    token = dev_keys.issue("lhcb", "alice", ["user", "operator"])
    assert await who_am_i(server, token) == ["lhcb", "alice", ["operator", "user"]]
    other = dev_keys.issue("belle2", "bob")
    assert await who_am_i(server, other) == ["belle2", "bob", []]


async def test_no_token_is_unauthenticated(server: GrpcServer) -> None:
    with pytest.raises(errors.Unauthenticated, match="missing bearer token"):
        await who_am_i(server, None)


async def test_a_malformed_authorization_is_unauthenticated(server: GrpcServer) -> None:
    async with grpc.aio.insecure_channel(server.address) as ch:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await unary(ch, "WhoAmI")(
                StringValue(), metadata=[("authorization", "Basic YWxpY2U6c2VjcmV0")], timeout=10
            )
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED


def hs256_by_hand(claims: dict[str, object], secret: bytes) -> str:
    """PyJWT refuses to HMAC with a PEM key; an attacker would not."""

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).decode().rstrip("=")

    header = json.dumps({"alg": "HS256", "typ": "JWT"}).encode()
    signing_input = f"{b64(header)}.{b64(json.dumps(claims).encode())}"
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64(signature)}"


def forged_tokens(dev_keys: DevKeys, tmp_path: Path) -> dict[str, str]:
    intruder = DevKeys.load_or_create(tmp_path / "intruder")
    return {
        "garbage": "not.a.jwt",
        "other key": intruder.issue("lhcb", "alice", ["operator"]),
        "expired": dev_keys.issue(
            "lhcb", "alice", now=datetime.now(UTC) - timedelta(hours=2), lifetime=timedelta(hours=1)
        ),
        "wrong audience": dev_keys.issue("lhcb", "alice", audience="someone-else"),
        "wrong issuer": dev_keys.issue("lhcb", "alice", issuer="https://evil.example"),
        "no vo": jwt.encode(
            {"sub": "alice", "iss": "dxts", "aud": "dxts", "exp": 4102444800},
            dev_keys.private_key,
            algorithm="EdDSA",
        ),
        "roles not a list": jwt.encode(
            {
                "sub": "a",
                "vo": "lhcb",
                "roles": "admin",
                "iss": "dxts",
                "aud": "dxts",
                "exp": 4102444800,
            },
            dev_keys.private_key,
            algorithm="EdDSA",
        ),
        "unsigned": jwt.encode(
            {"sub": "a", "vo": "lhcb", "iss": "dxts", "aud": "dxts", "exp": 4102444800},
            None,
            algorithm="none",
        ),
        # Algorithm confusion: HMAC "signed" with the server's public key as the secret.
        "public key as hmac secret": hs256_by_hand(
            {"sub": "a", "vo": "lhcb", "iss": "dxts", "aud": "dxts", "exp": 4102444800},
            dev_keys.public_pem().encode(),
        ),
    }


@pytest.mark.parametrize(
    "kind",
    [
        "garbage",
        "other key",
        "expired",
        "wrong audience",
        "wrong issuer",
        "no vo",
        "roles not a list",
        "unsigned",
        "public key as hmac secret",
    ],
)
async def test_tokens_that_do_not_verify_are_unauthenticated(
    server: GrpcServer, dev_keys: DevKeys, tmp_path: Path, kind: str
) -> None:
    token = forged_tokens(dev_keys, tmp_path)[kind]
    async with grpc.aio.insecure_channel(server.address) as ch:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await unary(ch, "WhoAmI")(
                StringValue(), metadata=[("authorization", f"Bearer {token}")], timeout=10
            )
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert (caught.value.details() or "").startswith(("invalid bearer token", "missing"))


async def test_health_and_reflection_need_no_token(server: GrpcServer) -> None:
    async with grpc.aio.insecure_channel(server.address) as ch:
        reply = await health_pb2_grpc.HealthStub(ch).Check(
            health_pb2.HealthCheckRequest(service=""), timeout=10
        )
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_dev_keys_are_created_once_private_and_reused(tmp_path: Path) -> None:
    first = DevKeys.load_or_create(tmp_path)
    second = DevKeys.load_or_create(tmp_path)
    assert first.path == tmp_path / DEV_KEY_FILE
    assert stat.S_IMODE(first.path.stat().st_mode) == 0o600
    assert first.public_pem() == second.public_pem()
    assert second.verifier().verify(first.issue("lhcb", "alice")).sub == "alice"
    assert [p.name for p in tmp_path.iterdir()] == [DEV_KEY_FILE]  # no scratch files left


def test_shared_secret_settings_verify_hs256() -> None:
    verifier = TokenVerifier.from_settings(
        AuthSettings(shared_secret=SECRET, issuer="https://iam.example", audience="dxts")
    )
    token = issue_token("lhcb", "carol", ["admin"], key=SECRET, issuer="https://iam.example")
    assert verifier.verify(token) == Identity("lhcb", "carol", frozenset({"admin"}))
    assert verifier.algorithms == ["HS256"]
    with pytest.raises(errors.Unauthenticated):
        verifier.verify(
            issue_token(
                "lhcb",
                "carol",
                key="a-guess-that-is-long-enough-for-hs256!",
                issuer="https://iam.example",
            )
        )


def test_public_key_settings_verify_and_refuse_hmac(tmp_path: Path) -> None:
    keys = DevKeys.load_or_create(tmp_path)
    verifier = TokenVerifier.from_settings(AuthSettings(public_key=keys.public_pem()))
    assert "HS256" not in verifier.algorithms
    assert verifier.verify(keys.issue("lhcb", "dave")).vo == "lhcb"
    pem_file = tmp_path / "issuer.pem"
    pem_file.write_text(keys.public_pem())
    from_file = TokenVerifier.from_settings(AuthSettings(public_key_file=str(pem_file)))
    assert from_file.verify(keys.issue("lhcb", "dave")).sub == "dave"


def test_a_pem_private_key_signs_tokens() -> None:
    private = ed25519.Ed25519PrivateKey.generate()
    verifier = TokenVerifier(
        private.public_key(), algorithms=["EdDSA"], issuer="dxts", audience="dxts"
    )
    from cryptography.hazmat.primitives import serialization

    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    assert verifier.verify(issue_token("lhcb", "erin", key=pem)).sub == "erin"


def test_settings_must_name_one_key(tmp_path: Path) -> None:
    with pytest.raises(errors.InvalidArgument, match="only one of"):
        TokenVerifier.from_settings(AuthSettings(shared_secret="x", public_key="y"))
    with pytest.raises(errors.InvalidArgument, match="no token verification key"):
        TokenVerifier.from_settings(AuthSettings())
    with pytest.raises(errors.InvalidArgument, match="not a PEM public key"):
        TokenVerifier.from_settings(AuthSettings(public_key="-----BEGIN nonsense"))
    dev = TokenVerifier.from_settings(AuthSettings(), dev_key_dir=tmp_path)
    assert dev.verify(DevKeys.load_or_create(tmp_path).issue("lhcb", "frank")).sub == "frank"


def test_current_identity_outside_a_request() -> None:
    with pytest.raises(errors.Unauthenticated):
        current_identity()
    with acting_as(Identity("lhcb", "sweeper", frozenset({"system"}))) as identity:
        assert current_identity() is identity
        assert identity.has_role("system")
    with pytest.raises(errors.Unauthenticated):
        current_identity()


def test_one_default_issuer_for_services_tokens_and_development_keys() -> None:
    from dxts.cli.tokens import issue

    issued = inspect.signature(issue).parameters["issuer"].default
    assert AuthSettings().issuer == DEFAULT_ISSUER == issued


class Dispatcher(dispatcher_pb2_grpc.DispatcherServiceServicer):
    """Records the callers that reached the handler."""

    def __init__(self) -> None:
        self.reached: list[str] = []

    async def DispatcherStatus(
        self, request: dispatcher_pb2.DispatcherStatusRequest, context: object
    ) -> dispatcher_pb2.DispatcherStatusResponse:
        self.reached.append(current_identity().sub)
        return dispatcher_pb2.DispatcherStatusResponse()


async def test_the_authorisation_table_is_checked_before_any_handler(dev_keys: DevKeys) -> None:
    dispatcher = Dispatcher()
    server = GrpcServer(
        [
            Service.of(
                dispatcher_pb2.DESCRIPTOR.services_by_name["DispatcherService"],
                dispatcher_pb2_grpc.add_DispatcherServiceServicer_to_server,
                dispatcher,
            ),
            Probe().service(),  # outside the contracts, and given no rows here
        ],
        settings=ServerSettings(listen="127.0.0.1:0"),
        verifier=dev_keys.verifier(),
    )
    async with server:
        status = dispatcher_pb2.DispatcherStatusRequest()
        operator = dev_keys.issue("lhcb", "olivia", ["operator"])
        async with channel(server.address, token=operator) as ch:
            await dispatcher_pb2_grpc.DispatcherServiceStub(ch).DispatcherStatus(status)
            with pytest.raises(errors.PermissionDenied, match="no row in the authorisation table"):
                await unary(ch, "WhoAmI")(StringValue())
        async with grpc.aio.insecure_channel(server.address) as ch:
            user = dev_keys.issue("lhcb", "ursula")
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await dispatcher_pb2_grpc.DispatcherServiceStub(ch).DispatcherStatus(
                    status, metadata=[("authorization", f"Bearer {user}")], timeout=10
                )
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert caught.value.details() == (
        "DispatcherStatus may be called by operator, admin, service; ursula is user"
    )
    assert dispatcher.reached == ["olivia"]


async def test_a_token_function_is_asked_on_every_call(
    server: GrpcServer, dev_keys: DevKeys
) -> None:
    """A channel outliving its token (a DiracX access token, `dxts watch`) carries the current
    one on each call."""
    tokens = iter([dev_keys.issue("lhcb", "alice"), dev_keys.issue("lhcb", "bob")])
    async with channel(server.address, token=lambda: next(tokens)) as ch:
        first = await unary(ch, "WhoAmI")(StringValue())
        second = await unary(ch, "WhoAmI")(StringValue())
    assert [json.loads(a.value)[1] for a in (first, second)] == ["alice", "bob"]
