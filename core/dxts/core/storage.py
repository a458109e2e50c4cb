"""The installation's grid storage elements: SE name -> the server endpoint that serves it.

One setting, `DXTS_STORAGE_ENDPOINTS`, read by every component that moves or locates bytes (the
local and Slurm adaptors, their jobs, `dxts file`), so the catalogue's SE names mean the same
place everywhere. Its value is either `NAME=URL[,NAME=URL...]` or a JSON object
`{"NAME": "URL", ...}` (what the chart writes from `storageEndpoints`). A URL is
`root://host[:port]//prefix` (or `xroot://`): the replica of LFN `/vo/x` at that SE is
`root://host:port//prefix/vo/x`; or `davs://host[:port]/prefix` (WebDAV over TLS, spoken as
`https://`; also `https://`, and `http://` for a server without TLS): the replica is
`https://host:port/prefix/vo/x`. A name written `NAME:ro` is a read-only SE: read from, never
written to or removed from (the name is `NAME`). An SE not named here is a local directory SE of
the adaptor (`<storage_root>/<SE>/<LFN>`), unchanged; a name in both is the endpoint.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from dxts.core.lfn import check_lfn

XROOTD_SCHEMES = ("root", "xroot")
HTTP_SCHEMES = ("davs", "https", "http")
READ_ONLY = ":ro"  # after an SE's name: nothing is written to or removed from it
SE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class StorageError(Exception):
    """A storage operation failed; the message is the server's or the client's own words."""


class StorageEndpoint(BaseModel):
    """One SE behind a server: its name, the server (`root://host:port`, `https://host:port`),
    the folder under the server's export its replicas live in, and whether dxts may write there
    (a read-only SE is another site's, or an archive: its replicas are read, never made or
    removed)."""

    model_config = ConfigDict(frozen=True)

    name: str
    server: str
    prefix: str
    read_only: bool = False

    @classmethod
    def parse(cls, name: str, url: str) -> StorageEndpoint:
        """ValueError, in one line naming the SE, for anything but `root://host[:port]//path` or
        `davs|https|http://host[:port]/path`; `name` is `NAME` or `NAME:ro` (read-only)."""
        read_only = name.endswith(READ_ONLY)
        name = name.removesuffix(READ_ONLY)
        if not SE_NAME.match(name):
            raise ValueError(f"{name!r} is not a storage element name (letters, digits, _ . -)")
        parts = urlsplit(url)
        if parts.scheme not in (*XROOTD_SCHEMES, *HTTP_SCHEMES) or not parts.hostname:
            raise ValueError(
                f"{name}: {url!r} is not a storage endpoint "
                "(root://host:port//path or davs://host:port/path)"
            )
        if parts.query or parts.fragment or parts.username or parts.password:
            raise ValueError(f"{name}: {url!r}: no user, query or fragment in an endpoint")
        if parts.scheme in XROOTD_SCHEMES and not parts.path.startswith("//"):
            raise ValueError(
                f"{name}: {url!r}: the path needs a double slash (root://host:port//path), "
                "a single one is relative to the server's login directory"
            )
        prefix = "/" + parts.path.strip("/") if parts.path.strip("/") else ""
        if ".." in prefix.split("/"):
            raise ValueError(f"{name}: {url!r}: '..' in the path")
        # WebDAV over TLS is HTTPS: the URL every client library takes.
        scheme = "https" if parts.scheme == "davs" else parts.scheme
        server = f"{scheme}://{parts.netloc}"
        return cls(name=name, server=server, prefix=prefix, read_only=read_only)

    @property
    def key(self) -> str:
        """The name as configured: `NAME`, or `NAME:ro` for a read-only SE."""
        return self.name + (READ_ONLY if self.read_only else "")

    @property
    def over_http(self) -> bool:
        """Spoken to over HTTP(S)/WebDAV rather than the XRootD protocol."""
        return self.server.startswith(("https://", "http://"))

    def path(self, lfn: str) -> str:
        """The replica's path on the server (InvalidArgument for an LFN not in normal form)."""
        return self.prefix + check_lfn(lfn)

    @property
    def base(self) -> str:
        """The endpoint as it is configured: `root://host:port//prefix`, `https://host/prefix`."""
        if self.over_http:
            return f"{self.server}{self.prefix or '/'}"
        return f"{self.server}//{self.prefix.lstrip('/')}"

    def url(self, lfn: str) -> str:
        """The replica's full URL, as `xrdcp` (or an HTTP client) takes it."""
        if self.over_http:
            return f"{self.server}{self.path(lfn)}"
        return f"{self.server}/{self.path(lfn)}"


def parse_endpoints(value: Any) -> dict[str, StorageEndpoint]:
    """`NAME=URL,...`, a JSON object, or a mapping -> SE name -> endpoint; ValueError else."""
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return {}
        if text.startswith("{"):
            try:
                value = json.loads(text)
            except json.JSONDecodeError as error:
                raise ValueError(f"not a JSON object: {error}") from None
        else:
            pairs = [pair.strip() for pair in text.split(",") if pair.strip()]
            if any("=" not in pair for pair in pairs):
                raise ValueError(f"{text!r}: expected NAME=URL[,NAME=URL...]")
            value = dict(pair.split("=", 1) for pair in pairs)
    if not isinstance(value, dict):
        raise ValueError("expected NAME=URL[,NAME=URL...] or a JSON object")
    endpoints = {}
    for name, url in value.items():
        if isinstance(url, StorageEndpoint):
            endpoints[name] = url
            continue
        if not isinstance(url, str):
            raise ValueError(f"{name}: the endpoint is a URL string")
        endpoint = StorageEndpoint.parse(name, url.strip())
        endpoints[endpoint.name] = endpoint
    return endpoints


class StorageSettings(BaseSettings):
    """`DXTS_STORAGE_ENDPOINTS`: the SEs served over XRootD (empty: every SE is a local
    directory, the embedded default)."""

    model_config = SettingsConfigDict(env_prefix="DXTS_STORAGE_", extra="ignore")

    endpoints: Annotated[dict[str, StorageEndpoint], NoDecode] = Field(
        default_factory=dict,
        description="SE name -> root://host:port//prefix or davs://host:port/prefix "
        "(NAME=URL,... or a JSON object; NAME:ro for a read-only SE)",
    )

    @field_validator("endpoints", mode="before")
    @classmethod
    def _parse(cls, value: Any) -> dict[str, StorageEndpoint]:
        return parse_endpoints(value)

    def endpoint(self, storage_element: str) -> StorageEndpoint | None:
        """The SE's endpoint; None for a local directory SE."""
        return self.endpoints.get(storage_element)
