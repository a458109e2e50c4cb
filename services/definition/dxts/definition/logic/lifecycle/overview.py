"""The exact input counts a plugin asks for (`InputOverviewReader`), read from accounting's
counters — the same `Counts` the lifecycle reads. A built-in action that calls a feeder
(ReconcileFeederInputs on a Seeds feeder, which sizes its seeds from the counts) needs it in
the standalone definition process too, not only where execution's reader is shared (`dxts up`).
"""

from __future__ import annotations

from uuid import UUID

from dxts.core.plugins.context import InputOverview
from dxts.core.plugins.protocols.lifecycle import Counts
from dxts.core.plugins.protocols.readers import InputOverviewReader
from dxts.core.states import InputStatus


class CountsOverview(InputOverviewReader):
    def __init__(self, counts: Counts) -> None:
        self.counts = counts

    async def input_overview(self, transformation_id: UUID) -> InputOverview:
        overview = dict.fromkeys(InputStatus, 0)
        overview.update((await self.counts.inputs([transformation_id])).get(transformation_id, {}))
        return overview
