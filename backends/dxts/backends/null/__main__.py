"""`dxts-backend-null`: the null adaptor as a process (settings: `DXTS_NULL_*`, see `settings`)."""

from __future__ import annotations

from dxts.backends.component import dev_service_token, run_adaptor
from dxts.backends.edge.dispatcher_client import GrpcOutcomeReporter
from dxts.backends.null.adaptor import NullAdaptor
from dxts.backends.null.settings import NullSettings


def build() -> NullAdaptor:
    settings = NullSettings()
    token = settings.token() or dev_service_token(f"dxts-backend-{settings.name}")
    reporter = (
        GrpcOutcomeReporter(settings.dispatcher_address, token=token)
        if settings.dispatcher_address
        else None
    )
    return NullAdaptor(settings, reporter=reporter)


def main() -> None:
    run_adaptor("null", build)


if __name__ == "__main__":
    main()
