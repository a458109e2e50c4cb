"""The Slurm adaptor's gRPC edge: `BackendAdaptorService` over `SlurmBackend`, nothing more."""

from __future__ import annotations

from typing import Any

from dxts.backends.server import AdaptorServicer, accepted, refused
from dxts.backends.slurm.backend import SlurmBackend
from dxts.backends.slurm.settings import SlurmSettings
from dxts.core.catalogue import FileCatalogue
from dxts.v1 import backend_pb2, common_pb2

VERSION = "slurm-1"


class SlurmAdaptor(AdaptorServicer):
    def __init__(
        self,
        settings: SlurmSettings,
        catalogue: FileCatalogue | None = None,
        *,
        owns_catalogue: bool = False,
    ) -> None:
        """`owns_catalogue`: the adaptor opens and closes the catalogue with itself (as a
        process of its own; `dxts up` shares one it opens itself)."""
        self.settings = settings
        self.catalogue = catalogue
        self.owns_catalogue = owns_catalogue
        self.backend = SlurmBackend(settings, catalogue)

    async def start(self) -> None:
        if self.owns_catalogue and self.catalogue is not None:
            await self.catalogue.start()
        await self.backend.start()

    async def stop(self) -> None:
        await self.backend.stop()
        if self.owns_catalogue and self.catalogue is not None:
            await self.catalogue.close()

    async def Describe(
        self, request: backend_pb2.DescribeRequest, context: Any
    ) -> backend_pb2.DescribeResponse:
        return backend_pb2.DescribeResponse(
            name=self.settings.name,
            kind=common_pb2.KIND_COMPUTE,
            report_mode=backend_pb2.REPORT_MODE_PULL,
            capacity=self.settings.capacity,
            version=VERSION,
            counters=await self.backend.counters(),
        )

    async def Submit(
        self, request: backend_pb2.SubmitRequest, context: Any
    ) -> backend_pb2.SubmitResponse:
        answers = await self.backend.submit(request.payload, request.parcels)
        return backend_pb2.SubmitResponse(
            results=[
                accepted(a.parcel_id, a.identifier)
                if a.identifier is not None
                else refused(a.parcel_id, a.reason or "refused")
                for a in answers
            ]
        )

    async def Poll(
        self, request: backend_pb2.PollRequest, context: Any
    ) -> backend_pb2.PollResponse:
        outcomes, unknown = await self.backend.poll(list(request.identifiers))
        return backend_pb2.PollResponse(outcomes=outcomes, unknown_identifiers=unknown)

    async def Cancel(
        self, request: backend_pb2.CancelRequest, context: Any
    ) -> backend_pb2.CancelResponse:
        unknown, keys = await self.backend.cancel(
            list(request.identifiers), list(request.parcel_ids)
        )
        return backend_pb2.CancelResponse(
            unknown_identifiers=unknown,
            keys=[backend_pb2.CancelledKey(parcel_id=p, identifier=i) for p, i in keys],
        )
