"""Reading Slurm's accounting (`sacct --parsable2`) into task records: a task's exit status is
the batch step's when the allocation's line still says 0:0 for a failed task, its nodes the
allocation's NodeList; a task that ran
is reported once its batch step (its usage) is recorded, or after a grace period."""

from __future__ import annotations

from pathlib import Path

import pytest

from dxts.backends.slurm.edge.commands import Slurm, TaskRecord
from dxts.backends.slurm.logic import adaptor as slurm_adaptor
from dxts.backends.slurm.settings import SlurmSettings


class CannedSacct(Slurm):
    def __init__(self, out: str) -> None:
        super().__init__(SlurmSettings(work_dir=Path("/tmp/unused")))
        self.out = out

    async def run(self, tool: str, *args: str) -> str:
        assert tool == "sacct"
        return self.out


async def test_a_failed_tasks_exit_status_is_the_batch_steps_when_its_line_says_0_0() -> None:
    out = (
        "41_0|FAILED|0:0|00:01.2|3||node7\n"
        "41_0.batch|FAILED|1:0|00:01.2|3|20M|node7\n"
        "41_1|FAILED|2:0|00:01.0|2||node[1-2]\n"
        "41_1.batch|FAILED|2:0|00:01.0|2|10M|node1\n"
        "41_2|COMPLETED|0:0|00:01.0|2||node3\n"
        "41_2.batch|COMPLETED|0:0|00:01.0|2|10M|node3\n"
        "41_3|CANCELLED by 0|0:0|00:00:00|0||None assigned\n"
    )
    records = await CannedSacct(out).records(["41"])
    assert [(r.state, r.exit_code, r.started, r.nodes) for _, r in sorted(records.items())] == [
        ("FAILED", 1, True, "node7"),
        ("FAILED", 2, True, "node[1-2]"),  # the allocation's nodes, as sacct writes them
        ("COMPLETED", 0, True, "node3"),
        ("CANCELLED by 0", 0, False, ""),  # given no node: no site
    ]
    assert records[("41", 0)].max_rss_bytes == 20 * 1024 * 1024


def test_a_task_that_ran_waits_for_its_batch_step_for_a_grace_period(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [1000.0]
    settings = SlurmSettings(work_dir=tmp_path, job_user="")
    monkeypatch.setattr(slurm_adaptor.time, "monotonic", lambda: clock[0])
    adaptor = slurm_adaptor.SlurmAdaptor(settings, slurm=Slurm(settings))
    ended = TaskRecord(state="COMPLETED")  # sacct said it ended; its batch step is not there yet
    assert adaptor._step_still_to_come("a", ended)
    clock[0] += slurm_adaptor.ACCOUNTING_GRACE_S - 1
    assert adaptor._step_still_to_come("a", ended)
    ended.started = True  # the step arrived: report now
    assert not adaptor._step_still_to_come("a", ended)
    # Never recorded: reported without it once the grace is over.
    assert adaptor._step_still_to_come("b", TaskRecord(state="FAILED"))
    clock[0] += slurm_adaptor.ACCOUNTING_GRACE_S
    assert not adaptor._step_still_to_come("b", TaskRecord(state="FAILED"))
    # A task cancelled before it ran has no step to wait for.
    assert not adaptor._step_still_to_come("c", TaskRecord(state="CANCELLED by 0"))
