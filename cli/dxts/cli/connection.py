"""Where the services are and who is calling, with no grpc imported (the start-up of every
command reads this).

Each value is taken from the first place that has it:

1. the command's global options (`dxts --definition HOST:PORT ... show WG`);
2. the environment: DXTS_DEFINITION_ADDRESS, DXTS_EXECUTION_ADDRESS, DXTS_ACCOUNTING_ADDRESS,
   DXTS_DISPATCHER_ADDRESS, DXTS_TOKEN;
3. for the token, the DiracX sign-in `dxts login` noted in the data directory
   (`dxts.cli.diracx_credentials`);
4. the connection file `dxts up` writes into its data directory (`connection.json`).

The data directory is `--data-dir`, else DXTS_DATA_DIR, else the one the running `dxts up`
recorded in ~/.dxts/current (so `dxts up --data-dir X` is found by the other commands), else
~/.dxts.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from dxts.core.errors import InvalidArgument

CONNECTION_FILE = "connection.json"
# Where `dxts login` notes the DiracX it signed in to (dxts.cli.diracx_credentials).
LOGIN_FILE = "diracx-login.json"
DATA_DIR_VARIABLE = "DXTS_DATA_DIR"
DEFAULT_DATA_DIR = Path("~/.dxts")
# The data directory of the `dxts up` running now, for the commands started without one.
CURRENT_FILE = DEFAULT_DATA_DIR / "current"
ENVIRONMENT = {
    "definition": "DXTS_DEFINITION_ADDRESS",
    "execution": "DXTS_EXECUTION_ADDRESS",
    "accounting": "DXTS_ACCOUNTING_ADDRESS",
    "dispatcher": "DXTS_DISPATCHER_ADDRESS",
    "token": "DXTS_TOKEN",
    "web": "DXTS_WEB_URL",
    "storage": "DXTS_STORAGE_ROOT",
    "storage_elements": "DXTS_STORAGE_ELEMENTS",
    "catalogue": "DXTS_CATALOGUE_URL",
    "storage_endpoints": "DXTS_STORAGE_ENDPOINTS",
}


def data_dir(option: Path | None = None) -> Path:
    """The data directory `dxts up` uses: the option, else DXTS_DATA_DIR, else ~/.dxts."""
    value = option or (
        Path(os.environ[DATA_DIR_VARIABLE]) if os.environ.get(DATA_DIR_VARIABLE) else None
    )
    return (value or DEFAULT_DATA_DIR).expanduser()


def running_data_dir(option: Path | None = None) -> Path:
    """The data directory the commands read: the option, else DXTS_DATA_DIR, else the one the
    running `dxts up` recorded (while its connection file exists), else ~/.dxts."""
    if option or os.environ.get(DATA_DIR_VARIABLE):
        return data_dir(option)
    try:
        recorded = Path(CURRENT_FILE.expanduser().read_text().strip())
    except OSError:
        return data_dir()
    if recorded.is_absolute() and (recorded / CONNECTION_FILE).is_file():
        return recorded
    return data_dir()


def record_current(directory: Path) -> None:
    """Note `directory` as the running `dxts up`'s, for the commands started without one."""
    current = CURRENT_FILE.expanduser()
    current.parent.mkdir(parents=True, exist_ok=True)
    current.write_text(f"{directory.resolve()}\n")


def forget_current(directory: Path) -> None:
    """Undo `record_current`, unless another `dxts up` has recorded its own since."""
    current = CURRENT_FILE.expanduser()
    try:
        if current.read_text().strip() == str(directory.resolve()):
            current.unlink()
    except OSError:
        pass


@dataclass
class Connection:
    """Where the services are and who is calling (any of them may be unknown)."""

    definition: str | None = None
    execution: str | None = None
    accounting: str | None = None
    # Asked only for a parcel's job logs (`dxts parcel ID --logs`).
    dispatcher: str | None = None
    token: str | None = None
    # The web view's URL (http://host:port), where `dxts up` serves it.
    web: str | None = None
    # Where the storage elements' directories are, their names (comma-separated) and the file
    # catalogue's URL: what `dxts file` and `dxts-cwl-runner` move files with (dxts.cli.files).
    storage: str | None = None
    storage_elements: str | None = None
    catalogue: str | None = None
    # The storage elements served over XRootD (`NAME=root://...,...`, dxts.core.storage).
    storage_endpoints: str | None = None
    # Signed in with `dxts login`: what gives the current DiracX access token, asked on every
    # call (it expires within the hour; a `dxts watch` outlives it). Never written to a file.
    token_source: Callable[[], str] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def resolve(cls, options: dict[str, str | None], directory: Path) -> Connection:
        found = cls()
        saved = _read_connection_file(directory / CONNECTION_FILE)
        for name, variable in ENVIRONMENT.items():
            value = options.get(name) or os.environ.get(variable) or saved.get(name)
            if value:
                setattr(found, name, value)
        given = options.get("token") or os.environ.get(ENVIRONMENT["token"])
        if not given and (directory / LOGIN_FILE).is_file():
            # Signed in with DiracX (`dxts login`): its access token, refreshed if need be,
            # before the development token `dxts up` wrote.
            from dxts.cli.diracx_credentials import Login

            login = Login.read(directory)
            if login is not None:
                found.token = login.access_token()
                found.token_source = login.access_token
        return found

    def write(self, path: Path) -> None:
        """Save it (mode 0600: the token is a credential) for the commands to find."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "token_source"}
        scratch = path.with_suffix(".tmp")
        scratch.unlink(missing_ok=True)
        # Created 0600, never readable by others even for an instant.
        descriptor = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(json.dumps(values, indent=1) + "\n")
        scratch.replace(path)

    def claims(self) -> dict[str, Any]:
        """The token's claims, unverified (the server verifies): for the caller's VO."""
        if not self.token:
            return {}
        import jwt  # only the verbs that need the caller's VO pay for it

        try:
            return dict(jwt.decode(self.token, options={"verify_signature": False}))
        except jwt.PyJWTError:
            return {}


def _read_connection_file(path: Path) -> dict[str, str]:
    try:
        values = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as error:
        raise InvalidArgument(f"cannot read {path}: {error}", field="connection") from None
    return (
        {k: v for k, v in values.items() if isinstance(v, str)} if isinstance(values, dict) else {}
    )


@dataclass
class Options:
    """The global options of one command line, resolved into a Connection on first use (so
    that a command needing no service, like `validate`, never reads the connection file)."""

    values: dict[str, str | None]
    data_dir: Path | None = None
    resolved: Connection | None = None

    def connection(self) -> Connection:
        if self.resolved is None:
            self.resolved = Connection.resolve(self.values, running_data_dir(self.data_dir))
        return self.resolved

    def where(self) -> str:
        """Where the connection was looked for, for the "no address" error."""
        return str(running_data_dir(self.data_dir) / CONNECTION_FILE)
