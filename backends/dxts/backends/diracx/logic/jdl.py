"""A parcel as a DiracX job description (JDL): its job name carries the ParcelID (what the
adaptor searches for before submitting again), its input sandboxes carry what the payload
needs, and its resolved requirements become CPUTime, memory, cores and sites under the
installation's policy (`DiracXPolicy`)."""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from dxts.backends.diracx.payload import OUTPUT_SANDBOX
from dxts.backends.diracx.settings import DiracXPolicy

JOB_NAME_PREFIX = "dxts-"


def job_name(parcel_id: str) -> str:
    return f"{JOB_NAME_PREFIX}{parcel_id}"


def parcel_of(name: str | None) -> str | None:
    """The ParcelID a job name carries (None: not a dxts job)."""
    if not name or not name.startswith(JOB_NAME_PREFIX):
        return None
    return name.removeprefix(JOB_NAME_PREFIX)


class RequirementsProblem(ValueError):
    """The parcel's requirements cannot be met under the policy (the parcel is refused)."""


UNSAFE = frozenset('"\\,;')


def _quoted(value: str) -> str:
    """A ClassAd string literal. DIRAC's JDL parser (DiracX 0.7.0) loops forever on an escaped
    quote and splits a list's strings at commas and semicolons, so a value holding one of
    those is refused rather than sent."""
    if UNSAFE & set(value):
        raise RequirementsProblem(f"a JDL value cannot hold {sorted(UNSAFE)}: {value!r}")
    return f'"{value}"'


def _list(values: Sequence[str]) -> str:
    return "{" + ", ".join(_quoted(v) for v in values) + "}"


def _number(requirements: Mapping[str, Any], key: str) -> float | None:
    value = requirements.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise RequirementsProblem(f"requirement {key!r} is not a non-negative number: {value!r}")
    return float(value)


def _names(requirements: Mapping[str, Any], key: str) -> list[str]:
    value = requirements.get(key) or []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise RequirementsProblem(f"requirement {key!r} is not a list of names: {value!r}")
    return list(value)


def matching(requirements: Mapping[str, Any], policy: DiracXPolicy) -> dict[str, str]:
    """The JDL attributes (name → ClassAd literal) that place the job where it can run."""
    attributes: dict[str, str] = {}
    cpu_hours = _number(requirements, "cpu_hours")
    cpu_time = (
        math.ceil(cpu_hours * 3600 * policy.cpu_power)
        if cpu_hours is not None
        else policy.default_cpu_time
    )
    attributes["CPUTime"] = str(max(1, min(cpu_time, policy.max_cpu_time)))
    cores = _number(requirements, "cores")
    count = int(cores) if cores is not None else policy.default_cores
    if count > policy.max_cores:
        raise RequirementsProblem(f"{count} cores asked for, at most {policy.max_cores} allowed")
    attributes["NumberOfProcessors"] = str(max(1, count))
    memory_gb = _number(requirements, "memory_gb")
    memory_mb = math.ceil(memory_gb * 1024) if memory_gb is not None else policy.default_memory_mb
    if memory_mb is not None:
        if policy.max_memory_mb is not None and memory_mb > policy.max_memory_mb:
            raise RequirementsProblem(
                f"{memory_mb} MB of memory asked for, at most {policy.max_memory_mb} allowed"
            )
        attributes["MaxRAM"] = str(memory_mb)
    sites = _names(requirements, "sites") or list(policy.sites)
    if policy.allowed_sites:
        refused = [s for s in sites if s not in policy.allowed_sites]
        if refused:
            raise RequirementsProblem(f"sites not allowed here: {', '.join(refused)}")
    if sites:
        attributes["Site"] = _list(sites)
    banned = sorted({*policy.banned_sites, *_names(requirements, "banned_sites")})
    if banned:
        attributes["BannedSites"] = _list(banned)
    platform = requirements.get("platform") or policy.platform
    if platform:
        attributes["Platform"] = _quoted(str(platform))
    return attributes


def job_description(
    parcel_id: str,
    requirements: Mapping[str, Any],
    sandboxes: Sequence[str],
    *,
    command: Sequence[str],
    environment: Mapping[str, str],
    policy: DiracXPolicy,
) -> str:
    """The JDL of one parcel's job."""
    attributes = {
        "JobName": _quoted(job_name(parcel_id)),
        "JobGroup": _quoted(policy.job_group),
        "Executable": _quoted(command[0]),
        "Arguments": _quoted(shlex.join(command[1:])),
        "InputSandbox": _list(sandboxes),
        "OutputSandbox": _list([*OUTPUT_SANDBOX, "std.out", "std.err"]),
        "StdOutput": _quoted("std.out"),
        "StdError": _quoted("std.err"),
        "Priority": str(policy.priority),
        **matching(requirements, policy),
    }
    if environment:
        attributes["ExecutionEnvironment"] = _list(
            [f"{name}={value}" for name, value in sorted(environment.items())]
        )
    body = "\n".join(f"    {name} = {value};" for name, value in attributes.items())
    return f"[\n{body}\n]"
