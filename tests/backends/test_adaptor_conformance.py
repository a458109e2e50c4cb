"""The one adaptor conformance suite (`pytest -m adaptor_conformance`): every property of
`dxts.cli.adaptor_conformance` — the checks `dxts adaptor check ADDRESS` runs — against every
adaptor in `ADAPTORS`, each served over gRPC as the dispatcher reaches it, with a dispatcher
stand-in to push outcomes to and a restart on the same port for the restart check.

Adding an adaptor to the suite is one entry in `ADAPTORS`: an async context manager that is
given a `Place` (a work directory kept across restarts, the stand-in's address) and yields an
`Entry`: a function building the adaptor, called again at each restart, and for an adaptor
whose check parcels must move data, what they run instead of `sleep` (the `local-xrootd`
entries: each parcel stages a file in from one XRootD server and its copy out to another, and
every succeeded parcel's output is checked at the server, once with the file catalogue on
SQLite and once on MariaDB), and for a data adaptor its check parcels' requests (the
`local-data-xrootd` entries: replications between the XRootD servers, the long ones from a
throttled server of their own, `xrootd_data_conformance`). Every property must PASS: what an
adaptor cannot do it declares in Describe, and the check holds it to the declared behaviour.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from adaptor_serving import Build, Served
from diracx_fixture import pilot_running_every_job, running_diracx
from dxts_relay_adaptor import RelayAdaptor
from slurm_cluster import slurm_conf
from xrootd_conformance import OUTPUT_SE, STAGE, staging
from xrootd_data_conformance import THROTTLE, data_checks
from xrootd_servers import PrivateServers, endpoints, private_servers

from dxts.backends.diracx.edge.client import DiracXClient
from dxts.backends.diracx.logic.adaptor import DiracXAdaptor
from dxts.backends.edge.dispatcher_client import GrpcOutcomeReporter
from dxts.backends.local.logic.adaptor import LocalAdaptor
from dxts.backends.local.settings import LocalSettings
from dxts.backends.null.logic.adaptor import NullAdaptor
from dxts.backends.null.settings import NullSettings
from dxts.backends.slurm.edge.commands import Slurm
from dxts.backends.slurm.logic.adaptor import SlurmAdaptor
from dxts.backends.slurm.settings import SlurmSettings
from dxts.cli.adaptor_conformance import PROPERTIES, SLEEP, Conformance, Target
from dxts.cli.conformance_data import DataParcels
from dxts.cli.dispatcher_standin import serving_standin
from dxts.core.grpc import DevKeys, channel
from dxts.core.states import Kind
from dxts.v1 import backend_pb2_grpc, common_pb2

pytestmark = pytest.mark.adaptor_conformance

CAPACITY = 2  # every adaptor is given one, so that the capacity check sees refusals
TIMEOUT_S = 180.0


@dataclass(frozen=True)
class Place:
    work: Path  # the adaptor's own directory, kept across its restarts
    dispatcher: str  # where the dispatcher stand-in listens, for an adaptor in push mode
    fixture: Callable[[str], Awaitable[Any]]  # another fixture's value (e.g. a database URL)


@dataclass(frozen=True)
class Entry:
    """What an entry gives the checks: how to build its adaptor, and (`Target`) the check
    parcels' tool, their inputs and the check of their outcomes."""

    build: Build
    tool: dict[str, Any] = field(default_factory=lambda: SLEEP)
    inputs: dict[str, Any] = field(default_factory=dict)
    verify: Callable[[common_pb2.Outcome], Awaitable[str | None]] | None = None
    data: DataParcels | None = None  # a data adaptor's check parcels


@contextlib.asynccontextmanager
async def null(place: Place) -> AsyncIterator[Entry]:
    yield Entry(lambda: NullAdaptor(NullSettings(delay_s=0.5, capacity=CAPACITY)))


@contextlib.asynccontextmanager
async def null_push(place: Place) -> AsyncIterator[Entry]:
    settings = NullSettings(
        delay_s=0.5,
        capacity=CAPACITY,
        report_mode="push",
        dispatcher_address=place.dispatcher,
        push_interval_s=0.2,
    )
    yield Entry(
        lambda: NullAdaptor(settings, reporter=GrpcOutcomeReporter(place.dispatcher, token=None))
    )


@contextlib.asynccontextmanager
async def local(place: Place) -> AsyncIterator[Entry]:
    settings = LocalSettings(work_dir=place.work, kill_grace_s=1, capacity=CAPACITY)
    yield Entry(lambda: LocalAdaptor(settings))


def local_xrootd(database: str) -> Callable[[Place], contextlib.AbstractAsyncContextManager[Entry]]:
    """The local adaptor with the real XRootD servers as its grid SEs (`scripts/xrootd`), its
    file catalogue on `database` (the fixture giving its URL): each check parcel stages its
    input in from XRD-B and its output out to XRD-A (`xrootd_conformance`)."""

    @contextlib.asynccontextmanager
    async def entry(place: Place) -> AsyncIterator[Entry]:
        settings = LocalSettings(
            work_dir=place.work,
            kill_grace_s=1,
            capacity=CAPACITY,
            storage_endpoints=endpoints(),
            output_se=OUTPUT_SE,
        )
        url = await place.fixture(database)
        async with staging(url, place.work.parent / "input") as staged:
            yield Entry(
                lambda: LocalAdaptor(settings, staged.catalogue),
                tool=STAGE,
                inputs=staged.inputs,
                verify=staged.verify,
            )
        assert staged.verified, "no check parcel's output was verified at the server"

    return entry


@pytest.fixture(scope="module")
def slow_xrootd() -> Iterator[PrivateServers]:
    """XRootD servers of the suite's own, each serving `THROTTLE` bytes a second: a large copy
    from one cannot end for minutes (the shared servers are never slowed down)."""
    with private_servers(throttle=THROTTLE) as servers:
        yield servers


def local_data_xrootd(
    database: str,
) -> Callable[[Place], contextlib.AbstractAsyncContextManager[Entry]]:
    """The local data adaptor (`local-data`) with the XRootD servers as its SEs, its file
    catalogue on `database` (the fixture giving its URL): its check parcels are replications
    between them (`xrootd_data_conformance`)."""

    @contextlib.asynccontextmanager
    async def entry(place: Place) -> AsyncIterator[Entry]:
        url = await place.fixture(database)
        slow = await place.fixture("slow_xrootd")
        async with data_checks(url, slow) as checks:
            settings = LocalSettings(
                name="local-data",
                kind=Kind.DATA,
                work_dir=place.work,
                capacity=CAPACITY,
                storage_endpoints=checks.settings_endpoints,
            )
            yield Entry(
                lambda: LocalAdaptor(settings, checks.catalogue),
                verify=checks.verify,
                data=checks.parcels,
            )

    return entry


@contextlib.asynccontextmanager
async def relay(place: Place) -> AsyncIterator[Entry]:
    """The adaptor package under tests/relay_adaptor, which dxts knows only by entry point."""
    settings = LocalSettings(name="relay", work_dir=place.work, kill_grace_s=1, capacity=CAPACITY)
    yield Entry(lambda: RelayAdaptor(LocalAdaptor(settings)))


@contextlib.asynccontextmanager
async def slurm(place: Place) -> AsyncIterator[Entry]:
    slurm_conf()
    # Jobs as the adaptor's own user: the contract is the same for any account, and the test
    # folders and this machine's Python are root's (test_slurm_adaptor runs jobs as dxts-job).
    settings = SlurmSettings(work_dir=place.work, capacity=CAPACITY, job_user="")
    yield Entry(lambda: SlurmAdaptor(settings, slurm=Slurm(settings)))


@contextlib.asynccontextmanager
async def diracx(place: Place) -> AsyncIterator[Entry]:
    """A real DiracX server (`scripts/diracx`), with a test pilot running every job it gets."""
    with running_diracx(place.work / "server") as server:
        async with pilot_running_every_job(server, place.work / "pilot"):
            settings = server.adaptor_settings(place.work / "adaptor", capacity=CAPACITY)
            yield Entry(lambda: DiracXAdaptor(settings, DiracXClient.for_settings(settings)))


# Every adaptor the suite checks (tests/conftest.py runs slurm and diracx in their servers'
# xdist groups).
ADAPTORS: dict[str, Callable[[Place], contextlib.AbstractAsyncContextManager[Entry]]] = {
    "null": null,
    "null-push": null_push,
    "local": local,
    "local-xrootd": local_xrootd("sqlite_test_url"),
    "local-xrootd-mariadb": local_xrootd("mysql_test_url"),
    "local-data-xrootd": local_data_xrootd("sqlite_test_url"),
    "local-data-xrootd-mariadb": local_data_xrootd("mysql_test_url"),
    "relay": relay,
    "slurm": slurm,
    "diracx": diracx,
}


@pytest.fixture(scope="module", params=list(ADAPTORS))
async def adaptor(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Conformance]:
    """The checks, against the adaptor `ADAPTORS[param]` served over gRPC."""
    root = tmp_path_factory.mktemp(request.param)
    keys = DevKeys.load_or_create(root / "keys")
    token = keys.issue("dxts", "dxts-dispatcher", ["dispatcher"])
    async with contextlib.AsyncExitStack() as stack:
        dispatcher = await stack.enter_async_context(serving_standin("127.0.0.1:0"))
        # Another fixture's value asked in a thread: a synchronous fixture may run its own
        # event loop (the MariaDB database's is made with asyncio.run), which this one's forbids.
        place = Place(
            root / "adaptor",
            dispatcher.address,
            lambda name: asyncio.to_thread(request.getfixturevalue, name),
        )
        entry = await stack.enter_async_context(ADAPTORS[request.param](place))
        served = Served(entry.build, keys.verifier())
        await served.start()
        stack.push_async_callback(served.stop)
        opened = await stack.enter_async_context(
            channel(served.address, token=token, default_timeout=60)
        )
        stub = backend_pb2_grpc.BackendAdaptorServiceStub(opened)
        target = Target(
            stub, served.restart, dispatcher, entry.tool, entry.inputs, entry.verify, entry.data
        )
        yield Conformance(target, TIMEOUT_S)


@pytest.mark.parametrize("name", PROPERTIES)
async def test_the_adaptor_keeps_the_contract(adaptor: Conformance, name: str) -> None:
    verdict = await adaptor.verdict(name)
    assert verdict.status == "PASS", verdict.line()
