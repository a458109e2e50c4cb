"""TLS and mutual TLS: a server with a certificate, clients that verify it (and present
theirs), refusal of plain-text and certificate-less clients, and rotation without a restart."""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from google.protobuf.wrappers_pb2 import StringValue
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_probe import PROBE, Probe

from dxts.core.errors import Unavailable
from dxts.core.grpc import DevKeys, GrpcServer, channel
from dxts.core.grpc.process import serve_component
from dxts.core.grpc.tls import TlsSettings
from dxts.core.settings import ServerSettings

NOW = datetime.datetime.now(datetime.UTC)


@dataclass(frozen=True)
class Pem:
    cert: bytes
    key: bytes


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def make_ca(name: str) -> tuple[Pem, ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = _key()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW - datetime.timedelta(minutes=5))
        .not_valid_after(NOW + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return Pem(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)), key, cert


def issue(
    ca_key: ec.EllipticCurvePrivateKey, ca_cert: x509.Certificate, name: str, *, server: bool
) -> Pem:
    key = _key()
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW - datetime.timedelta(minutes=5))
        .not_valid_after(NOW + datetime.timedelta(days=1))
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    cert = builder.sign(ca_key, hashes.SHA256())
    return Pem(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


@dataclass(frozen=True)
class Pki:
    """Files of one CA, a server certificate and a client certificate it signed."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def write_pki(directory: Path, name: str) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca, ca_key, ca_cert = make_ca(f"{name} CA")
    server = issue(ca_key, ca_cert, "dxts-server", server=True)
    client = issue(ca_key, ca_cert, "dxts-client", server=False)
    pki = Pki(*(directory / f for f in ("ca.pem", "s.pem", "s.key", "c.pem", "c.key")))
    for path, data in zip(
        (pki.ca, pki.server_cert, pki.server_key, pki.client_cert, pki.client_key),
        (ca.cert, server.cert, server.key, client.cert, client.key),
        strict=True,
    ):
        path.write_bytes(data)
    return pki


def server_tls(pki: Pki, *, mutual: bool = False) -> TlsSettings:
    return TlsSettings(
        cert_file=pki.server_cert,
        key_file=pki.server_key,
        ca_file=pki.ca,
        require_client_cert=mutual,
    )


async def ask(address: str, token: str, tls: TlsSettings | None, **kwargs: object) -> str:
    """One call of the Probe's whoami through channel(): the caller it saw."""
    async with channel(address, token=token, tls=tls, default_timeout=5, **kwargs) as ch:  # type: ignore[arg-type]
        call = ch.unary_unary(
            f"/{PROBE}/WhoAmI",
            request_serializer=StringValue.SerializeToString,
            response_deserializer=StringValue.FromString,
        )
        reply = await call(StringValue())
        return str(reply.value)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return write_pki(tmp_path_factory.mktemp("pki"), "dxts test")


async def serving(dev_keys: DevKeys, tls: TlsSettings) -> AsyncIterator[GrpcServer]:
    """A running Probe server with `tls`."""
    running = GrpcServer(
        [Probe().service()],
        settings=ServerSettings(listen="127.0.0.1:0"),
        verifier=dev_keys.verifier(),
        tls=tls,
    )
    async with running:
        yield running


@pytest.fixture
async def tls_server(dev_keys: DevKeys, pki: Pki) -> AsyncIterator[GrpcServer]:
    async for running in serving(dev_keys, server_tls(pki)):
        yield running


@pytest.fixture
async def mtls_server(dev_keys: DevKeys, pki: Pki) -> AsyncIterator[GrpcServer]:
    async for running in serving(dev_keys, server_tls(pki, mutual=True)):
        yield running


async def test_a_client_that_trusts_the_ca_talks_tls(
    tls_server: GrpcServer, pki: Pki, token: str
) -> None:
    assert "alice" in await ask(tls_server.address, token, TlsSettings(ca_file=pki.ca))


async def test_a_plain_text_client_is_refused_by_a_tls_server(
    tls_server: GrpcServer, token: str
) -> None:
    with pytest.raises(Unavailable):
        await ask(tls_server.address, token, TlsSettings())


async def test_a_client_that_does_not_trust_the_server_refuses_it(
    tls_server: GrpcServer, tmp_path: Path, token: str
) -> None:
    other = write_pki(tmp_path / "other", "someone else")
    with pytest.raises(Unavailable):
        await ask(tls_server.address, token, TlsSettings(ca_file=other.ca))


async def test_mutual_tls_refuses_a_client_without_a_certificate(
    mtls_server: GrpcServer, pki: Pki, token: str
) -> None:
    with pytest.raises(Unavailable):
        await ask(mtls_server.address, token, TlsSettings(ca_file=pki.ca))
    with_certificate = TlsSettings(
        ca_file=pki.ca, cert_file=pki.client_cert, key_file=pki.client_key
    )
    assert "alice" in await ask(mtls_server.address, token, with_certificate)


async def test_certificates_replaced_on_disk_are_used_without_a_restart(
    dev_keys: DevKeys, tmp_path: Path, token: str
) -> None:
    live = write_pki(tmp_path / "live", "first")
    first_ca = tmp_path / "first-ca.pem"
    first_ca.write_bytes(live.ca.read_bytes())
    async for running in serving(dev_keys, server_tls(live)):
        assert "alice" in await ask(running.address, token, TlsSettings(ca_file=first_ca))
        # Rotation: a new CA and server certificate written over the same files.
        rotated = write_pki(tmp_path / "rotated", "second")
        for source, target in (
            (rotated.server_cert, live.server_cert),
            (rotated.server_key, live.server_key),
            (rotated.ca, live.ca),
        ):
            target.write_bytes(source.read_bytes())
        assert "alice" in await ask(running.address, token, TlsSettings(ca_file=rotated.ca))
        with pytest.raises(Unavailable):
            await ask(running.address, token, TlsSettings(ca_file=first_ca))


def test_half_configured_tls_is_refused_with_the_setting_named(pki: Pki, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="DXTS_TLS_CERT_FILE and DXTS_TLS_KEY_FILE"):
        TlsSettings(cert_file=pki.server_cert)
    with pytest.raises(ValueError, match="DXTS_TLS_REQUIRE_CLIENT_CERT"):
        TlsSettings(cert_file=pki.server_cert, key_file=pki.server_key, require_client_cert=True)
    with pytest.raises(ValueError, match="does not exist"):
        TlsSettings(ca_file=tmp_path / "missing.pem")


async def test_the_metrics_endpoint_listens_where_the_server_does(
    dev_keys: DevKeys, caplog: pytest.LogCaptureFixture
) -> None:
    settings = ServerSettings(listen="127.0.0.1:0", metrics_port=0)
    with caplog.at_level(logging.INFO, logger="metrics-test"):
        async with contextlib.AsyncExitStack() as stack:
            await serve_component(
                stack,
                [Probe().service()],
                settings=settings,
                verifier=dev_keys.verifier(),
                tls=TlsSettings(),
                log=logging.getLogger("metrics-test"),
            )
    assert "metrics on 127.0.0.1:" in caplog.text


async def test_probes_reach_health_in_plain_text_beside_a_tls_server(
    dev_keys: DevKeys, pki: Pki, token: str
) -> None:
    running = GrpcServer(
        [Probe().service()],
        settings=ServerSettings(listen="127.0.0.1:0", health_listen="127.0.0.1:0"),
        verifier=dev_keys.verifier(),
        tls=server_tls(pki, mutual=True),
    )
    async with running:
        plain = f"127.0.0.1:{running.health_port}"
        async with grpc.aio.insecure_channel(plain) as ch:
            reply = await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest())
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
            # Only health: the services themselves are not on the plain-text port.
            with pytest.raises(grpc.aio.AioRpcError) as error:
                await ch.unary_unary(f"/{PROBE}/WhoAmI")(b"")
            assert error.value.code() == grpc.StatusCode.UNIMPLEMENTED
