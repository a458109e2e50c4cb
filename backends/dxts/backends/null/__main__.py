"""`dxts-backend-null`: the null adaptor as a process (settings: `DXTS_NULL_*`, see `settings`)."""

from __future__ import annotations

from dxts.backends.null.adaptor import NullAdaptor
from dxts.backends.null.settings import NullSettings
from dxts.backends.server import dev_service_token, run_adaptor


def build() -> NullAdaptor:
    settings = NullSettings()
    token = settings.token() or dev_service_token(f"dxts-backend-{settings.name}")
    return NullAdaptor(settings, token=token)


def main() -> None:
    run_adaptor("null", build)


if __name__ == "__main__":
    main()
