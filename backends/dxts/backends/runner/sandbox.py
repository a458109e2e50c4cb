"""Jobs in a box: what a job run on the adaptor's own machine can see and do (docs/security.md,
"Jobs in a box").

A job is a user's code. The adaptor that starts it holds the installation's secrets (in `dxts up`
the data directory: the database, the token signing key, the operator's connection file, the TLS
key; in its environment, settings with passwords), so the job must see none of them:

* **its own user**: an adaptor running as root starts the job as the job user (`dxts-job` by
  default, created by `scripts/job-sandbox`; never root): the job cannot read the adaptor's
  files through the kernel's own checks, nor its processes' `/proc/<pid>/environ`;
* **its own view** (bubblewrap): a fresh mount namespace holding only the system's programs and
  libraries (read-only), the runner's Python (read-only), the job's process, input object and
  staged input replicas (read-only) and its own `out/` and `tmp/` (the only places it can
  write); a fresh pid namespace (no other process is visible, none of its own survives it), no
  network unless the installation allows it;
* **a clean environment**: built from an allow-list (PATH, HOME and TMPDIR in its scratch
  directory, the locale), never the adaptor's (tokens, URLs with passwords, DXTS_* settings);
* **a wall-time limit**: the parcel's (`wall_time_s`, else its CWL `ToolTimeLimit`, else the
  adaptor's default), capped by the installation; a job over it is killed and fails with
  "wall time exceeded".

What the job hands back is checked before the adaptor, with its privileges, touches it: an
output the output object names outside the job's `out/` (other than one of its own staged
inputs passed through), or a symbolic link in `out/` leading out of it, fails the parcel.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from dxts import backends
from dxts.backends.runner import measure
from dxts.backends.runner.failures import TOOL_STDERR, JobFailed
from dxts.core.adaptor.model import Failure, FailureClass

# The usage wrapper (`measure`) as a file of its own, which runs without the package; and the
# package the default runner (`cwltool_main`) and the wrapper are in, which the sandbox shows.
MEASURE_FILE = str(Path(measure.__file__).resolve())
RUNNER_PACKAGE = Path(backends.__file__).resolve().parent
# What a job's environment may hold of the adaptor's (when set); everything else is left out.
PASSED_ENVIRONMENT = ("LANG", "LC_ALL", "LC_CTYPE", "TZ")
# The runner's Python first (tools name `python`), then the system's programs.
JOB_PATH = f"{Path(sys.prefix) / 'bin'}:/usr/local/bin:/usr/bin:/bin"
# The system a job runs on, read-only: directories (or the merged-/usr symlinks) and the few
# files of /etc that programs need (not /etc itself: a secret may be mounted under it).
SYSTEM_DIRECTORIES = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_FILES = (
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/localtime",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/mime.types",
)
WALL_TIME_EXCEEDED = "wall time exceeded"
KILL_GRACE_S = 5.0  # SIGTERM to SIGKILL for a job over its wall time


class SandboxError(Exception):
    """The adaptor cannot confine jobs as its settings say (it refuses to start)."""


@dataclass(frozen=True)
class JobUser:
    name: str
    uid: int
    gid: int


@dataclass(frozen=True)
class Box:
    """How this adaptor confines its jobs (`confinement`); one job's limit is `wall_time_s`."""

    user: JobUser | None  # None: the adaptor's own user (it is not root, so it cannot switch)
    bwrap: bool
    network: bool = False
    read_only: tuple[Path, ...] = ()


@dataclass
class Entered:
    """One job's way into its box: the sandbox's command line (`box`, empty: none) and the
    switch to the job user (`user`), its environment and directory, and the staged input
    replicas it may read (and pass through as outputs)."""

    environment: dict[str, str]
    cwd: Path
    staged: set[Path] = field(default_factory=set)
    box: list[str] = field(default_factory=list)
    user: list[str] = field(default_factory=list)

    def command(self, measure: list[str], usage: Path, runner: list[str]) -> list[str]:
        """The runner's command line: measured (`measure` writing `usage`), boxed, as the job
        user. In a sandbox the wrapper runs inside it (bubblewrap does not hand on what its
        children used), from its own file (the wrapper needs nothing but the standard library)."""
        if self.box:
            inside = [sys.executable, "-I", MEASURE_FILE]
            return [*self.box, *inside, str(usage), "--", *self.user, *runner]
        return [*measure, str(usage), "--", *self.user, *runner]


def confinement(
    sandbox: str,
    job_user: str,
    network: bool,
    read_only: Iterable[Path],
    runner: Sequence[str] = (),
) -> Box:
    """The box the settings ask for, checked to work here (SandboxError: why it cannot),
    including that the job user can start a Python `runner` (`python -m module …`) in it."""
    user = job_user_named(job_user)
    if sandbox == "none":
        if os.geteuid() == 0 and user is None:
            raise SandboxError("jobs must not run as root: set a job user (DXTS_LOCAL_JOB_USER)")
        return Box(user=user, bwrap=False)
    if shutil.which("bwrap") is None:
        raise SandboxError(
            "bubblewrap (bwrap) is not installed: jobs cannot be confined "
            "(scripts/job-sandbox installs it; DXTS_LOCAL_SANDBOX=none runs them unconfined)"
        )
    box = Box(user=user, bwrap=True, network=network, read_only=tuple(read_only))
    probe = subprocess.run(
        ["bwrap", *_namespaces(box), "--ro-bind", "/", "/", "true"],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        raise SandboxError(f"bubblewrap cannot make a sandbox here: {probe.stderr.strip()}")
    if len(runner) >= 3 and runner[1] == "-m":
        problem = runner_problem(box, runner[0], runner[2])
        if problem is not None:
            raise SandboxError(problem)
    return box


def runner_problem(box: Box, python: str, module: str) -> str | None:
    """Why the job user cannot start the runner (`python -m module`) in its box, in one line
    (None: it can). The job user reads the runner's Python and package with its own rights: an
    installation it cannot read (a checkout or virtualenv made under umask 077) would fail every
    job with an import error, so the adaptor refuses to start instead."""
    if box.user is None:
        return None  # the jobs run as the adaptor's own user, who runs this Python already
    check = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    command = [
        shutil.which("setpriv") or "setpriv",
        f"--reuid={box.user.uid}",
        f"--regid={box.user.gid}",
        "--clear-groups",
        "--",
        python,
        "-I",
        "-c",
        check,
    ]
    if box.bwrap:
        switching = ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        command = ["bwrap", *_namespaces(box), "--ro-bind", "/", "/", *switching, "--", *command]
    probe = subprocess.run(command, capture_output=True, text=True, check=False)
    if probe.returncode == 0:
        return None
    lines = probe.stderr.strip().splitlines()
    said = lines[-1] if lines else f"{module} is not found"
    return (
        f"the job user {box.user.name!r} cannot start the runner ({python} -m {module}): {said}; "
        f"it must be able to read {Path(python).parent.parent} and {RUNNER_PACKAGE} "
        "(scripts/job-sandbox opens a development checkout to it)"
    )


def job_user_named(name: str) -> JobUser | None:
    """The user jobs run as: `name` when this process is root (only root can switch users),
    None (the adaptor's own) otherwise."""
    if os.geteuid() != 0 or not name:
        return None
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise SandboxError(
            f"the job user {name!r} does not exist: create it (scripts/job-sandbox does) "
            "or name another in DXTS_LOCAL_JOB_USER"
        ) from None
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        raise SandboxError(f"the job user {name!r} is root: name an unprivileged user")
    return JobUser(name, entry.pw_uid, entry.pw_gid)


def _namespaces(box: Box) -> list[str]:
    options = ["--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    if not box.network:
        options.append("--unshare-net")
    if os.geteuid() != 0:  # unprivileged bubblewrap needs a user namespace of its own
        options.append("--unshare-user")
    return options


def environment(scratch: Path) -> dict[str, str]:
    """A job's whole environment: the allow-list, nothing else of the adaptor's."""
    passed = {name: os.environ[name] for name in PASSED_ENVIRONMENT if name in os.environ}
    return {"PATH": JOB_PATH, "HOME": str(scratch), "TMPDIR": str(scratch), **passed}


def staged_replicas(original: Any, staged: Any) -> set[Path]:
    """The local replicas staging put in place of the input object's `lfn:` Files (the only
    files outside the job's own directory it is shown): `original` and `staged` are the input
    object before and after staging, of the same shape."""
    found: set[Path] = set()
    if isinstance(original, dict) and isinstance(staged, dict):
        location = original.get("location") or original.get("path") or ""
        if original.get("class") == "File" and str(location).startswith("lfn:"):
            path = local_path(staged)
            if path is not None:
                found.add(path)
        for key, value in original.items():
            found |= staged_replicas(value, staged.get(key))
    elif isinstance(original, list) and isinstance(staged, list):
        for before, after in zip(original, staged, strict=False):
            found |= staged_replicas(before, after)
    return found


def local_path(item: dict[str, Any]) -> Path | None:
    """Where a File or Directory is on this machine (its `path`, or its `file://` location)."""
    if isinstance(item.get("path"), str):
        return Path(item["path"])
    location = item.get("location")
    if isinstance(location, str) and location.startswith("file://"):
        return Path(unquote(urlparse(location).path))
    return None


@dataclass(frozen=True)
class Boxed:
    """How one parcel runs confined: the adaptor's box and the parcel's wall time."""

    box: Box
    wall_time_s: int


def enter(boxed: Boxed | None, job_dir: Path, parameters_json: str, staged: Any) -> Entered:
    """The job's way in (`staged`: its input object, staged; `parameters_json`: as submitted):
    into its box, or, unconfined, in its directory with the adaptor's environment."""
    if boxed is None:
        return Entered(dict(os.environ), job_dir)
    original = json.loads(parameters_json) if parameters_json else {}
    return _enter(boxed.box, job_dir, with_secondary_files(staged_replicas(original, staged)))


def with_secondary_files(replicas: set[Path]) -> set[Path]:
    """The replicas and the files beside each that a tool's `secondaryFiles` may name: CWL finds
    them by pattern next to the primary file (`.bai` added to `A.bam`, or `^.bai` in place of
    its extension), not in the input object, so staging leaves them out. Only siblings named
    after the primary file are shown, nothing else of its directory."""
    found = set(replicas)
    for replica in replicas:
        prefixes = {replica.name + "."} | ({replica.stem + "."} if replica.suffix else set())
        with contextlib.suppress(OSError):
            found.update(
                sibling
                for sibling in replica.parent.iterdir()
                if sibling.name.startswith(tuple(prefixes)) and sibling.is_file()
            )
    return found


def _enter(box: Box, job_dir: Path, staged: set[Path]) -> Entered:
    """Make the job's directory the job's: `out/` and `tmp/` its own (0700), what it reads its
    own to read, the rest the adaptor's (the directory 0711: the job can neither list it nor
    write in it); and the command line that starts the runner in the box."""
    out, scratch = job_dir / "out", job_dir / "tmp"
    os.chmod(job_dir, 0o711)
    for writable in (out, scratch):
        writable.chmod(0o700)
    # The runner appends the tools' stderr to a file of the adaptor's folder: made for it.
    (job_dir / TOOL_STDERR).touch(mode=0o600)
    if box.user is not None:
        readable = [job_dir / "process", job_dir / "job.json", job_dir / "resolved-hints.json"]
        for path in [out, scratch, job_dir / TOOL_STDERR, *readable]:
            if path.exists():
                _give(path, box.user)
    visible = {replica: _readable_copy(replica, job_dir, n, box.user) for n, replica in
               enumerate(sorted(p for p in staged if p.is_file()))}  # fmt: skip
    entered = Entered(environment(scratch), scratch, set(visible))
    if box.bwrap:
        entered.box = _bwrap(box, job_dir, visible, scratch)
    if box.user is not None:
        entered.user = [
            shutil.which("setpriv") or "setpriv",
            f"--reuid={box.user.uid}",
            f"--regid={box.user.gid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--",
        ]
    return entered


def _give(path: Path, user: JobUser) -> None:
    """Make `path` (and all under it) the job user's."""
    os.chown(path, user.uid, user.gid, follow_symlinks=False)
    if path.is_dir() and not path.is_symlink():
        for parent, directories, files in os.walk(path):
            for name in [*directories, *files]:
                os.chown(Path(parent) / name, user.uid, user.gid, follow_symlinks=False)


def _readable_copy(replica: Path, job_dir: Path, n: int, user: JobUser | None) -> Path:
    """The file the job is shown at `replica`'s path: the replica itself when the job user may
    read it, else a copy in the job's directory that it may."""
    if user is None or _readable_by(replica.stat(), user):
        return replica
    copy = job_dir / "inputs" / str(n) / replica.name
    copy.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(replica, copy)
    _give(copy.parent, user)
    return copy


def _readable_by(status: os.stat_result, user: JobUser) -> bool:
    if status.st_uid == user.uid:
        return bool(status.st_mode & stat.S_IRUSR)
    if status.st_gid == user.gid:
        return bool(status.st_mode & stat.S_IRGRP)
    return bool(status.st_mode & stat.S_IROTH)


def _bwrap(box: Box, job_dir: Path, replicas: dict[Path, Path], cwd: Path) -> list[str]:
    """bubblewrap's command line: the namespaces, the system read-only, the runner's Python,
    the wrapper and the installation's extra paths read-only, then the job's own directory and
    its staged inputs."""
    command = [
        "bwrap",
        *_namespaces(box),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--perms",
        "1777",
        "--tmpfs",
        "/tmp",
    ]
    for directory in SYSTEM_DIRECTORIES:
        if os.path.islink(directory):
            command += ["--symlink", os.readlink(directory), directory]
        elif os.path.isdir(directory):
            command += ["--ro-bind", directory, directory]
    command += ["--perms", "0755", "--dir", "/etc"]  # else bubblewrap's, closed to the job
    for file in SYSTEM_FILES:
        command += ["--ro-bind-try", file, file]
    python = {Path(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    read_only = sorted(python | set(box.read_only) | {RUNNER_PACKAGE})
    binds: list[tuple[str, Path, Path]] = [
        *(("--ro-bind", path, path) for path in read_only),
        ("--bind", job_dir, job_dir),
        *(("--ro-bind", source, shown) for shown, source in sorted(replicas.items())),
    ]
    made: set[Path] = {Path("/")}
    for _, _, target in binds:
        # Mount points' parents: bubblewrap would make them 0700 (root's), closed to the job;
        # 0711, the job passes through them to its files but cannot list them.
        for parent in reversed(target.parents):
            if parent not in made and not _under_system(parent):
                command += ["--perms", "0711", "--dir", str(parent)]
                made.add(parent)
    for option, source, target in binds:
        command += [option, str(source), str(target)]
    if box.user is not None:  # root's bubblewrap keeps only what switching to the user needs
        command += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    return [*command, "--chdir", str(cwd), "--"]


def _under_system(path: Path) -> bool:
    return any(path.is_relative_to(directory) for directory in SYSTEM_DIRECTORIES)


async def wait_within(process: asyncio.subprocess.Process, limit_s: float | None) -> int | None:
    """The process's exit status, or None when it ran over `limit_s` (it is then killed: its
    whole process group, SIGTERM then SIGKILL)."""
    try:
        return await asyncio.wait_for(asyncio.shield(process.wait()), timeout=limit_s)
    except TimeoutError:
        pass
    for signum, grace in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(process.pid, signum)
        except ProcessLookupError:
            break
        try:
            await asyncio.wait_for(asyncio.shield(process.wait()), timeout=grace)
            break
        except TimeoutError:
            continue
    await process.wait()
    return None


def over_wall_time(boxed: Boxed | None) -> JobFailed:
    """The failure of a run killed over its wall time (only a boxed run has one)."""
    limit = boxed.wall_time_s if boxed is not None else 0
    message = f"{WALL_TIME_EXCEEDED}: the job ran over its limit of {limit:g} s and was killed"
    return JobFailed(message, failure=Failure(FailureClass.TIME_EXCEEDED, message))


def outputs_problem(output_object: Any, out: Path, entered: Entered) -> str | None:
    """Why the job's output object cannot be collected by the adaptor (None: it can): every
    File and Directory it names must be in `out/` (or be one of its own staged inputs), and no
    symbolic link in `out/` may lead out of it."""
    root = out.resolve()
    for parent, directories, files in os.walk(out):
        for name in [*directories, *files]:
            path = Path(parent) / name
            if path.is_symlink() and not path.resolve().is_relative_to(root):
                return f"the output {path.relative_to(out)} is a link out of the job's directory"
    for item in _files_and_directories(output_object):
        named = local_path(item)
        if named is None:
            continue
        if not named.resolve().is_relative_to(root) and named not in entered.staged:
            return f"the output {named} is outside the job's directory"
    return None


def _files_and_directories(value: Any) -> Iterable[dict[str, Any]]:
    if isinstance(value, list):
        for item in value:
            yield from _files_and_directories(item)
    elif isinstance(value, dict):
        if value.get("class") in ("File", "Directory"):
            yield value
        for item in value.values():
            yield from _files_and_directories(item)


def reclaim(paths: Iterable[Path]) -> None:
    """Make the stored outputs the adaptor's (the job user wrote them)."""
    uid, gid = os.geteuid(), os.getegid()
    for path in paths:
        if path.exists():
            os.chown(path, uid, gid, follow_symlinks=False)
            for parent, directories, files in os.walk(path):
                for name in [*directories, *files]:
                    os.chown(Path(parent) / name, uid, gid, follow_symlinks=False)
