"""`slurm`: parcels submitted per second into slurmctld by the Slurm adaptor.

One figure, `submit_parcels_per_s`: the adaptor's Submit of a batch of compute parcels with its
batching (one `sbatch --array` per batch of equal requests), against the same adaptor submitting
one Slurm job per parcel (`array_size=1`: one sbatch each) as the baseline, rounds alternating
in the same run. Both include everything Submit does per parcel (its record in the adaptor's
state, the parcel's files on the shared storage); only the round trips to slurmctld differ.

It needs a running cluster (`scripts/slurm start`; SLURM_CONF names it). The jobs go to the
cluster's `dxts-held` partition, which is DOWN: nothing runs, and each round's jobs are
cancelled before the next (untimed). The database the harness provides is not used.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from dxts.backends.slurm.edge.commands import Slurm
from dxts.backends.slurm.logic.adaptor import SlurmAdaptor
from dxts.backends.slurm.settings import SlurmSettings
from dxts.bench.harness import Bench, Operation
from dxts.cli.adaptor_conformance import tool_payload
from dxts.core.adaptor.mapping import payload_from_proto
from dxts.core.adaptor.model import Submission, SubmitDisposition
from dxts.core.errors import FailedPrecondition
from dxts.core.ids import id_to_str, new_ids

HELD_PARTITION = "dxts-held"
TOOL = {
    "class": "CommandLineTool",
    "cwlVersion": "v1.2",
    "baseCommand": ["true"],
    "inputs": {},
    "outputs": {},
}


@dataclass(frozen=True)
class Params:
    parcels: int  # per Submit (one round)
    rounds: int


SCALES = {
    "tiny": Params(parcels=5, rounds=1),
    "small": Params(parcels=100, rounds=3),
    "full": Params(parcels=1000, rounds=3),
}


class _Submitter:
    """One adaptor (batched, or one job per parcel) and the jobs of its last round."""

    def __init__(self, work_dir: Path, array_size: int, parcels: int) -> None:
        settings = SlurmSettings(work_dir=work_dir, partition=HELD_PARTITION, array_size=array_size)
        self.adaptor = SlurmAdaptor(settings, slurm=Slurm(settings))
        self.parcels = parcels
        self.payload = payload_from_proto(tool_payload(TOOL))
        self.identifiers: list[str] = []
        self.batch: list[Submission] = []

    async def clear(self) -> None:
        """Check and cancel the last round's jobs, prepare the next round's parcels (untimed)."""
        await self.check()
        jobs = await self.adaptor.store.jobs_by(identifiers=self.identifiers)
        await self.adaptor.slurm.cancel(sorted({j.slurm_job_id for j in jobs if j.slurm_job_id}))
        self.batch = [Submission(id_to_str(i), parameters_json="{}") for i in new_ids(self.parcels)]

    async def submit(self) -> int:
        answers = await self.adaptor.submit(self.payload, self.batch)
        accepted = SubmitDisposition.ACCEPTED
        self.identifiers = [a.identifier for a in answers if a.disposition == accepted]
        if len(self.identifiers) != self.parcels:
            refused = next(a.reason for a in answers if a.disposition != accepted)
            raise FailedPrecondition(f"the adaptor refused a parcel: {refused}")
        return self.parcels

    async def check(self) -> None:
        """Every parcel of the round is a Slurm job (sbatch did not refuse any; untimed)."""
        jobs = await self.adaptor.store.jobs_by(identifiers=self.identifiers)
        failed = [j.outcome.message for j in jobs if j.outcome is not None]
        if failed or not all(j.slurm_job_id for j in jobs):
            raise FailedPrecondition(f"a round's parcels did not all reach Slurm: {failed[:1]}")


@contextlib.asynccontextmanager
async def _submitters(params: Params) -> AsyncIterator[tuple[_Submitter, _Submitter]]:
    with tempfile.TemporaryDirectory(prefix="dxts-bench-slurm-") as folder:
        batched = _Submitter(Path(folder) / "batched", params.parcels, params.parcels)
        single = _Submitter(Path(folder) / "single", 1, params.parcels)
        for submitter in (batched, single):
            await submitter.adaptor.start()
        try:
            yield batched, single
        finally:
            for submitter in (batched, single):
                await submitter.clear()
                await submitter.adaptor.stop()


async def run(bench: Bench, params: Params) -> None:
    async with _submitters(params) as (batched, single):
        await bench.compare(
            "submit_parcels_per_s",
            unit="parcels/s",
            baseline=Operation(single.submit, setup=single.clear),
            subject=Operation(batched.submit, setup=batched.clear),
            rounds=params.rounds,
            params={
                "parcels_per_submit": params.parcels,
                "subject": "one sbatch --array per Submit",
                "baseline": "one sbatch per parcel",
                "partition": HELD_PARTITION,
            },
        )
