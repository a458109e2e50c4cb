"""An adaptor as a component: `adaptor_component` wraps any `logic.adaptor.Adaptor` for the shell
every dxts server runs in (`dxts.core.component.serve`), served through the shared edge
(`edge.servicer`) with health, reflection, auth, metrics and a graceful stop on SIGTERM, and the
same DXTS_LISTEN / DXTS_METRICS_PORT / DXTS_AUTH_* / DXTS_DATA_DIR settings as every component.
"""

from __future__ import annotations

from dxts.backends.edge.servicer import adaptor_service
from dxts.backends.logic.adaptor import Adaptor
from dxts.core.component import Component


def adaptor_component(adaptor: Adaptor) -> Component:
    """`adaptor` served: started with the component, stopped with it."""
    return Component(
        services=[adaptor_service(adaptor)], on_start=[adaptor.start], cleanups=[adaptor.stop]
    )
