"""`dxts token issue`: the token a deployment's components call each other with, signed where
the private key is and accepted by a service configured as the Helm chart configures it."""

from __future__ import annotations

from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from typer.testing import CliRunner

from dxts.cli.main import app
from dxts.core.errors import Unauthenticated
from dxts.core.grpc import TokenVerifier
from dxts.core.settings import AuthSettings


def write_pair(directory: Path, key: PrivateKeyTypes) -> tuple[Path, Path]:
    private = directory / "private.pem"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    public = directory / "public.pem"
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private, public


def issue(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["token", "issue", *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(
    ("key", "algorithm"),
    [
        (ed25519.Ed25519PrivateKey.generate(), "EdDSA"),
        (rsa.generate_private_key(public_exponent=65537, key_size=2048), "RS256"),
        (ec.generate_private_key(ec.SECP256R1()), "ES256"),
    ],
    ids=["ed25519", "rsa", "ec"],
)
def test_a_service_token_verifies_with_the_public_key_the_chart_mounts(
    tmp_path: Path, key: PrivateKeyTypes, algorithm: str
) -> None:
    private, public = write_pair(tmp_path, key)
    code, out, err = issue(
        "--vo", "dxts", "--sub", "dxts-services", "--role", "service", "--key", str(private),
        "--issuer", "https://diracx.example.org", "--days", "30",
    )  # fmt: skip
    assert code == 0, err
    token = out.strip()
    assert "\n" not in token
    # DXTS_AUTH_PUBLIC_KEY_FILE, DXTS_AUTH_ISSUER, DXTS_AUTH_AUDIENCE: what every pod is given.
    settings = AuthSettings(
        public_key_file=str(public), issuer="https://diracx.example.org", audience="dxts"
    )
    identity = TokenVerifier.from_settings(settings).verify(token)
    assert (identity.vo, identity.sub, identity.roles) == ("dxts", "dxts-services", {"service"})
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims["exp"] - claims["iat"] == 30 * 24 * 3600
    assert jwt.get_unverified_header(token)["alg"] == algorithm


def test_roles_repeat_and_default_claims_match_the_chart_defaults(tmp_path: Path) -> None:
    private, public = write_pair(tmp_path, ed25519.Ed25519PrivateKey.generate())
    code, out, err = issue(
        "--vo", "lhcb", "--sub", "ops", "--role", "operator", "--role", "user",
        "--key", str(private),
    )  # fmt: skip
    assert code == 0, err
    # The chart's auth.issuer and auth.audience default to "dxts".
    verifier = TokenVerifier.from_settings(
        AuthSettings(public_key_file=str(public), issuer="dxts", audience="dxts")
    )
    assert verifier.verify(out.strip()).roles == {"operator", "user"}
    other = TokenVerifier.from_settings(
        AuthSettings(public_key_file=str(public), issuer="dxts", audience="elsewhere")
    )
    with pytest.raises(Unauthenticated):
        other.verify(out.strip())


def test_a_key_that_cannot_sign_is_refused_in_one_line(tmp_path: Path) -> None:
    _, public = write_pair(tmp_path, ed25519.Ed25519PrivateKey.generate())
    for key in (public, tmp_path / "missing.pem"):
        code, out, err = issue("--vo", "dxts", "--sub", "s", "--role", "service", "--key", str(key))
        assert code == 2
        assert out == ""
        (line,) = err.splitlines()
        assert line.startswith("error: --key: ") and key.name in line
