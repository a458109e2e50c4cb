"""`dxts-backend-null`: the null adaptor as a process (settings: `DXTS_NULL_*`, see `settings`)."""

from __future__ import annotations

from dxts.backends.null.adaptor import NullAdaptor
from dxts.backends.null.settings import NullSettings
from dxts.backends.server import run_adaptor, service_token


def build() -> NullAdaptor:
    settings = NullSettings()
    return NullAdaptor(settings, token=service_token(f"dxts-backend-{settings.name}"))


def main() -> None:
    run_adaptor("null", build)


if __name__ == "__main__":
    main()
