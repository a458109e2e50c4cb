"""TLS and mutual TLS for every gRPC server and client, from certificate files.

Each process reads `DXTS_TLS_*` (`TlsSettings`):

* a server with `cert_file` and `key_file` listens with TLS; with `require_client_cert` as
  well it refuses any client that does not present a certificate signed by `ca_file` (mutual
  TLS);
* a client with `ca_file` connects with TLS, verifying the server against that CA, and presents
  `cert_file`/`key_file` as its own certificate when they are set (for servers that require one);
  `server_name` overrides the name checked in the server's certificate (an address by IP).

Certificates are rotated by replacing the files: a server re-reads them when they change, for
the next handshake, without a restart (cert-manager renews Secrets this way); a client builds
its credentials from the files each time it opens a channel.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

log = logging.getLogger(__name__)


class TlsSettings(BaseSettings):
    """Certificate files for this process's servers and clients (all PEM)."""

    model_config = SettingsConfigDict(env_prefix="DXTS_TLS_", extra="ignore")

    cert_file: Path | None = Field(None, description="this process's certificate chain")
    key_file: Path | None = Field(None, description="the private key of cert_file")
    ca_file: Path | None = Field(
        None, description="CA bundle that peers' certificates must chain to"
    )
    require_client_cert: bool = Field(
        False, description="servers: mutual TLS, refusing clients without a certificate"
    )
    server_name: str | None = Field(
        None, description="clients: the name to expect in servers' certificates"
    )

    @model_validator(mode="after")
    def _complete(self) -> TlsSettings:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("DXTS_TLS_CERT_FILE and DXTS_TLS_KEY_FILE go together")
        if self.require_client_cert and (self.ca_file is None or self.cert_file is None):
            raise ValueError(
                "DXTS_TLS_REQUIRE_CLIENT_CERT needs DXTS_TLS_CA_FILE (to verify clients) and "
                "a server certificate (DXTS_TLS_CERT_FILE, DXTS_TLS_KEY_FILE)"
            )
        for path in (self.cert_file, self.key_file, self.ca_file):
            if path is not None and not path.is_file():
                raise ValueError(f"TLS file {path} does not exist")
        return self

    @property
    def serves_tls(self) -> bool:
        return self.cert_file is not None

    @property
    def connects_tls(self) -> bool:
        return self.ca_file is not None


def _read(path: Path | None) -> bytes | None:
    return None if path is None else path.read_bytes()


@dataclass
class _Snapshot:
    stamp: tuple[float, ...]
    config: Any


class ServerCredentials:
    """A server's TLS credentials that follow its certificate files as they are replaced."""

    def __init__(self, settings: TlsSettings) -> None:
        if not settings.serves_tls:
            raise ValueError("server TLS needs DXTS_TLS_CERT_FILE and DXTS_TLS_KEY_FILE")
        self.settings = settings
        self._lock = threading.Lock()
        self._current = self._load()
        self.credentials = grpc.dynamic_ssl_server_credentials(
            self._current.config,
            self._fetch,
            require_client_authentication=settings.require_client_cert,
        )

    def _files(self) -> list[Path]:
        return [
            p for p in (self.settings.cert_file, self.settings.key_file, self.settings.ca_file) if p
        ]

    def _stamp(self) -> tuple[float, ...]:
        return tuple(path.stat().st_mtime_ns for path in self._files())

    def _load(self) -> _Snapshot:
        stamp = self._stamp()
        key, chain = self.settings.key_file, self.settings.cert_file
        if key is None or chain is None:
            raise ValueError("server TLS needs DXTS_TLS_CERT_FILE and DXTS_TLS_KEY_FILE")
        config = grpc.ssl_server_certificate_configuration(
            [(key.read_bytes(), chain.read_bytes())], root_certificates=_read(self.settings.ca_file)
        )
        return _Snapshot(stamp, config)

    def _fetch(self) -> Any:
        """Called by gRPC before each handshake: a new configuration when a file changed,
        else None (keep the current one). A half-written file keeps the old one until the
        next handshake finds it complete."""
        with self._lock:
            try:
                if self._stamp() == self._current.stamp:
                    return None
                self._current = self._load()
            except (OSError, ValueError) as error:
                log.warning("TLS files changed but cannot be loaded yet: %s", error)
                return None
            log.info("TLS certificate files changed: using the new ones")
            return self._current.config


def client_credentials(settings: TlsSettings) -> grpc.ChannelCredentials:
    """Channel credentials from the files as they are now."""
    return grpc.ssl_channel_credentials(
        root_certificates=_read(settings.ca_file),
        private_key=_read(settings.key_file),
        certificate_chain=_read(settings.cert_file),
    )


def client_options(settings: TlsSettings) -> list[tuple[str, Any]]:
    """Channel options TLS needs (the expected server name, when overridden)."""
    if settings.server_name:
        return [("grpc.ssl_target_name_override", settings.server_name)]
    return []
