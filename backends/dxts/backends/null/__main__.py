"""`dxts-backend-null`: the null adaptor as a process (settings: `DXTS_NULL_*`, see `settings`;
in push mode, `DXTS_SERVICE_TOKEN(_FILE)` or the development key pair in `DXTS_DATA_DIR`)."""

from __future__ import annotations

from dxts.backends.component import adaptor_component
from dxts.backends.edge.dispatcher_client import GrpcOutcomeReporter
from dxts.backends.null.logic.adaptor import NullAdaptor
from dxts.backends.null.settings import NullSettings
from dxts.core.component import Component, Process, serve
from dxts.core.kernel.authorisation import CallerKind, adaptor_subject


async def build(settings: NullSettings, process: Process) -> Component:
    reporter = None
    if settings.dispatcher_address:
        token = settings.own_token(adaptor_subject(settings.name), CallerKind.ADAPTOR)
        reporter = GrpcOutcomeReporter(settings.dispatcher_address, token=token)
    return adaptor_component(NullAdaptor(settings, reporter=reporter))


def main() -> None:
    serve("null adaptor", NullSettings, build)


if __name__ == "__main__":
    main()
