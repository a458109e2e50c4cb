"""Who a Slurm job runs as (docs/security.md, "Jobs in a box"): never root.

Root may submit for another user (sbatch `--uid`/`--gid`): an adaptor running as root submits
every job as its configured account (`job_user`), hands the account the batch's and each
parcel's directories (0700, files 0600: the job reads its process and input object, writes its
outputs and `result.json`; no other user reads them), and the output storage element it writes
to. What the job leaves is read back without following links (`no_links`): a job cannot make
the adaptor read a file of the machine for it.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from dxts.backends.runner import cwltool_main
from dxts.backends.runner.sandbox import Box, JobUser, SandboxError, job_user_named, runner_problem
from dxts.backends.slurm.settings import SlurmSettings

log = logging.getLogger(__name__)


def job_account(settings: SlurmSettings) -> JobUser | None:
    """The account jobs are submitted as; None: the adaptor's own (SandboxError: the
    configured one cannot be used)."""
    account = job_user_named(settings.job_user)
    if account is None and os.geteuid() == 0:
        log.warning(
            "the Slurm adaptor runs as root and DXTS_SLURM_JOB_USER is empty: jobs run as root "
            "(set an unprivileged account for anything but a development machine)"
        )
    if account is not None:
        # The nodes start the runner from the adaptor's software area (the same paths): one
        # closed to the account would fail every job with an import error.
        runner = cwltool_main.__name__
        problem = runner_problem(Box(user=account, bwrap=False), sys.executable, runner)
        if problem is not None:
            raise SandboxError(problem)
    return account


def sbatch_options(account: JobUser | None) -> list[str]:
    return [] if account is None else [f"--uid={account.uid}", f"--gid={account.gid}"]


def prepare_tree(settings: SlurmSettings, account: JobUser | None) -> None:
    """The adaptor's folders passable (0711) but not listable by the account, its state its
    own (0600), and the output storage element the account's to write to."""
    if account is None:
        return
    assert settings.storage_root is not None and settings.output_se is not None
    for folder in (settings.work_dir, settings.work_dir / "jobs", settings.work_dir / "batches"):
        folder.chmod(0o711)
    settings.storage_root.chmod(0o711)
    if settings.output_se not in settings.storage_endpoints:  # else uploaded to a server
        output = settings.storage_root / settings.output_se
        os.chown(output, account.uid, account.gid)
    for state in settings.work_dir.glob("state.sqlite*"):
        state.chmod(0o600)


def hand_over(directory: Path, account: JobUser | None) -> None:
    """Make `directory` and all in it the job's alone: 0700 folders, 0600 files, the account's."""
    paths = [directory, *directory.rglob("*")]
    for path in paths:
        if path.is_symlink():
            continue
        path.chmod(0o700 if path.is_dir() else 0o600)
        if account is not None:
            os.chown(path, account.uid, account.gid)


def read_no_link(path: Path) -> str:
    """The text of a file the job wrote, never through a link it made (OSError otherwise)."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(descriptor, "rb") as file:
        return file.read().decode(errors="replace")
