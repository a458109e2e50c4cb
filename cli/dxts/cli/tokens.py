"""`dxts token issue`: a bearer token signed by the installation's private key.

A deployment's components call each other with a token carrying the `service` role (the Helm
chart mounts it from a Secret as DXTS_SERVICE_TOKEN_FILE). The cluster holds only the public
half of the key, so the token is minted here, where the private key is, and stored in the
Secret by the operator (docs/deploy.md).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from dxts.core.grpc.auth import DEFAULT_ISSUER, issue_token

token_app = typer.Typer(
    no_args_is_help=True, help="Bearer tokens signed by the installation's private key."
)


def _refuse(message: str) -> NoReturn:
    """One line on stderr, exit status 2 (a bad --key)."""
    typer.echo(f"error: --key: {message}", err=True)
    raise typer.Exit(2)


def _private_key(
    path: Path,
) -> ed25519.Ed25519PrivateKey | rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey:
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except OSError as error:
        _refuse(f"cannot read {path}: {error.strerror}")
    except (ValueError, TypeError) as error:
        # TypeError: an encrypted key (no password can be given here).
        _refuse(f"{path} is not an unencrypted PEM private key: {error}")
    if not isinstance(
        key, ed25519.Ed25519PrivateKey | rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
    ):
        _refuse(f"{path} holds a {type(key).__name__}: tokens need Ed25519, RSA or EC")
    return key


@token_app.command("issue")
def issue(
    vo: Annotated[str, typer.Option(help="The `vo` claim (dxts's own components: dxts).")],
    sub: Annotated[str, typer.Option(help="The `sub` claim: who the token speaks for.")],
    key: Annotated[
        Path,
        typer.Option(
            help="PEM private key (Ed25519, RSA or EC) whose public half the services verify "
            "with (the chart's auth Secret)."
        ),
    ],
    role: Annotated[
        list[str] | None,
        typer.Option(help="A role claim; repeat for several (components: service)."),
    ] = None,
    issuer: Annotated[
        str,
        typer.Option(envvar="DXTS_AUTH_ISSUER", help="The `iss` claim the services expect."),
    ] = DEFAULT_ISSUER,
    audience: Annotated[
        str,
        typer.Option(envvar="DXTS_AUTH_AUDIENCE", help="The `aud` claim the services expect."),
    ] = "dxts",
    days: Annotated[int, typer.Option(min=1, help="Days until the token expires.")] = 365,
) -> None:
    """Print a signed token (JWT) on stdout, e.g. the service token of a deployment:

    dxts token issue --vo dxts --sub dxts-services --role service --key private.pem > service.token
    """
    token = issue_token(
        vo,
        sub,
        role or (),
        key=_private_key(key),
        issuer=issuer,
        audience=audience,
        lifetime=timedelta(days=days),
    )
    typer.echo(token)
