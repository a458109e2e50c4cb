"""`dxts-backend-diracx`: the DiracX adaptor as a process (settings: `DXTS_DIRACX_*`, see
`settings`; its DiracX credentials are its own, e.g. from a Kubernetes Secret)."""

from __future__ import annotations

from dxts.backends.component import run_adaptor
from dxts.backends.diracx.adaptor import DiracXAdaptor
from dxts.backends.diracx.settings import DiracXSettings


def main() -> None:
    run_adaptor("diracx", lambda: DiracXAdaptor(DiracXSettings()))


if __name__ == "__main__":
    main()
