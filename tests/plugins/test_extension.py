"""An experiment's package dxts does not ship: found by entry point, validated, injected, run."""

from __future__ import annotations

import importlib.metadata
import textwrap
import uuid
from pathlib import Path
from typing import Any

import plugins_support as s
import pytest
from dxts_example_experiment.bookkeeping import in_sample

from dxts.core.catalogue import CatalogueFile, FileCatalogue, LocalFileCatalogue
from dxts.core.errors import InvalidArgument
from dxts.core.plugins import (
    ActionResult,
    BadInput,
    ComputeParcel,
    FileInput,
    InputRecord,
    NoMoreInputs,
    Parcel,
    PluginRegistryError,
    Providers,
    Registry,
    SetFeederState,
    SplitInto,
    ToProblematic,
    ToUnassigned,
)
from dxts.core.states import InputStatus, Kind, ParcelStatus

DISTRIBUTION = "dxts-example-experiment"
PROVIDER = f"{DISTRIBUTION} 0.1.0"

# The feeder arguments of the shared example documents (sprucing.cwl, analysis-production.cwl).
SPRUCING = {
    "conditions_dict": {"configName": "LHCb", "configVersion": "Collision26", "inFileType": "RAW"},
    "start_run": 285000,
    "end_run": 286500,
    "scouting_runs": [285000, 285001, 285020, 286104],
}
ANALYSIS = {
    "event_type": "94000000",
    "conditions_dict": {
        "configName": "LHCb",
        "configVersion": "Collision26",
        "inFileType": "B2OC.DST",
        "inProPass": "Real Data/Sprucing26c2a",
    },
    "conditions_description": "Beam6800GeV-VeloClosed-MagUp",
}


def extension_entry_points() -> list[importlib.metadata.EntryPoint]:
    return list(importlib.metadata.distribution(DISTRIBUTION).entry_points)


def extension(catalogue: FileCatalogue | None = None) -> Registry:
    providers = Providers()
    if catalogue is not None:
        providers.add(FileCatalogue, catalogue)
    return Registry.discover(entry_points=extension_entry_points(), providers=providers)


def test_the_package_is_found_through_its_entry_points_alone() -> None:
    shipped = {ep.name for ep in importlib.metadata.distribution("dxts").entry_points}
    registry = Registry.discover()  # everything installed, as a service starts
    for kind, name in [
        ("feeder", "LHCbBookkeeping"),
        ("packer", "ByDescriptorKey"),
        ("hook", "RetryGridFailures"),
        ("action", "RemovedFilesHaveNoReplica"),
        ("action", "PPGApproval"),
    ]:
        assert name not in shipped
        assert registry.get(kind, name).provider.startswith(PROVIDER)


def test_its_injections_are_checked_at_start_up() -> None:
    with pytest.raises(PluginRegistryError) as error:
        extension().check()
    found = "\n".join(error.value.problems)
    assert "feeder 'LHCbBookkeeping'" in found and "action 'RemovedFilesHaveNoReplica'" in found
    assert "parameter 'catalogue' is annotated FileCatalogue, which nothing provides" in found
    extension(LocalFileCatalogue()).check()  # settings classes need no provider


def test_a_second_distribution_registering_the_same_name_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = tmp_path / "dxts_rival-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: dxts-rival\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        textwrap.dedent(
            """
            [dxts.feeders]
            LHCbBookkeeping = rival_plugins:feeder
            [dxts.packers]
            Broken = rival_plugins_missing:packer
            """
        )
    )
    (tmp_path / "rival_plugins.py").write_text("def feeder():\n    return None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginRegistryError) as error:
        Registry.discover()
    (duplicate,) = [p for p in error.value.problems if "registered twice" in p]
    assert duplicate.startswith("feeder 'LHCbBookkeeping' is registered twice: by ")
    assert f"{PROVIDER} (dxts_example_experiment.feeders:bookkeeping_feeder)" in duplicate
    assert "dxts-rival 1.0 (rival_plugins:feeder)" in duplicate
    assert (
        "packer 'Broken' (dxts-rival 1.0 (rival_plugins_missing:packer)) cannot be loaded"
        in str(error.value)
    )


class TestSubmission:
    """What the definition side checks when a document names these plugins."""

    registry = extension()

    def validate(self, args: dict[str, Any], phase: str) -> None:
        self.registry.validate_args(
            "feeder",
            "LHCbBookkeeping",
            args,
            phase=phase,
            name_field="inputs.raw-data.dirac:Feeder.name",
            args_field="inputs.raw-data.dirac:Feeder.args",
        )

    @pytest.mark.parametrize("phase", ["scouting", "active"])
    def test_the_example_documents_arguments_are_valid(self, phase: str) -> None:
        self.validate(SPRUCING, phase)
        self.validate(ANALYSIS, phase)

    def test_a_sampling_fraction_is_refused_only_for_a_scout(self) -> None:
        sampled = {**ANALYSIS, "sampling_fraction": 0.1}
        self.validate(sampled, "active")
        with pytest.raises(InvalidArgument) as error:
            self.validate(sampled, "scouting")
        (violation,) = error.value.violations
        assert violation.field == "inputs.raw-data.dirac:Feeder.args.sampling_fraction"
        assert violation.description.startswith("while scouting: not while scouting")

    def test_scouting_runs_outside_the_range_are_refused_only_for_a_scout(self) -> None:
        stray = {**SPRUCING, "scouting_runs": [285000, 290000]}
        self.validate(stray, "active")
        with pytest.raises(InvalidArgument, match=r"runs \[290000\] are outside"):
            self.validate(stray, "scouting")

    def test_misspelt_and_contradictory_arguments_are_refused(self) -> None:
        with pytest.raises(InvalidArgument) as error:
            self.validate({**SPRUCING, "end_rnu": 3}, "active")
        assert [v.field for v in error.value.violations] == [
            "inputs.raw-data.dirac:Feeder.args.end_rnu"
        ]
        with pytest.raises(InvalidArgument) as error:
            self.validate({**SPRUCING, "start_run": 290000}, "active")
        (violation,) = error.value.violations
        assert violation.field == "inputs.raw-data.dirac:Feeder.args"
        assert "start_run 290000 is after end_run 286500" in violation.description

    def test_an_unknown_plugin_name_is_refused(self) -> None:
        with pytest.raises(InvalidArgument, match="no feeder named 'LHCbBookeeping'"):
            self.registry.validate_args("feeder", "LHCbBookeeping", {}, phase="active")


def dataset(version: str, runs: range, per_run: int = 3) -> list[CatalogueFile]:
    return [
        CatalogueFile(
            lfn=f"/lhcb/{version}/RAW/{run}/{n:04d}.raw",
            size=3_000_000_000 + n,
            metadata={
                "configName": "LHCb",
                "configVersion": version,
                "inFileType": "RAW",
                "run": run,
            },
            replicas=("CERN-RAW", "BUFFER"),
        )
        for run in runs
        for n in range(per_run)
    ]


async def feed(
    registry: Registry, args: dict[str, Any], state: dict[str, Any] | None, phase: str = "active"
) -> list[Any]:
    stream = registry.stream(
        "Feeder",
        "LHCbBookkeeping",
        args,
        phase=phase,
        transformation=s.transformation("LHCbBookkeeping"),
        feeder_state=state,
    )
    return [item async for item in stream]


def fed(items: list[Any]) -> list[str]:
    return [item.lfn for item in items if isinstance(item, FileInput)]


def last_state(items: list[Any]) -> dict[str, Any]:
    return next(i.state for i in reversed(items) if isinstance(i, SetFeederState))


async def test_the_bookkeeping_feeder_pages_with_its_watermark(
    catalogue: LocalFileCatalogue,
) -> None:
    files = dataset("Feed26", range(284999, 285004))
    await catalogue.register(files)
    await catalogue.register(dataset("Other26", range(285000, 285002)))
    registry = extension(catalogue)
    args = {"conditions_dict": {"configVersion": "Feed26"}, "start_run": 285000,
            "end_run": 285002, "page_size": 4}  # fmt: skip
    selected = [f.lfn for f in files if 285000 <= f.metadata["run"] <= 285002]

    first = await feed(registry, args, None)
    assert fed(first) == selected
    assert [type(i).__name__[0] for i in first] == list("FFFFSFFFFSFS")  # a bookmark per page
    assert first[0].descriptor == {"run": 285000}
    assert first[0].lfn_size == files[3].size

    again = await feed(registry, args, last_state(first))
    assert fed(again) == []
    late = dataset("Feed26", range(285001, 285002), per_run=5)[3:]
    await catalogue.register(late)
    assert fed(await feed(registry, args, last_state(again))) == [f.lfn for f in late]

    # A different selection (the scout's runs, a moved end_run) starts a full pass.
    scout = {**args, "scouting_runs": [285000]}
    scouted = await feed(registry, scout, last_state(again), phase="scouting")
    assert fed(scouted) == selected[:3]
    extended = await feed(registry, {**args, "end_run": 285003}, last_state(again))
    assert len(fed(extended)) == len(selected) + len(late) + 3


async def test_a_scout_without_runs_takes_a_deterministic_sample(
    catalogue: LocalFileCatalogue, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = dataset("Sample26", range(286000, 286010))
    await catalogue.register(files)
    monkeypatch.setenv("DXTS_EXAMPLE_SCOUTING_FRACTION", "0.5")
    registry = extension(catalogue)  # settings are read when first injected
    args = {"conditions_dict": {"configVersion": "Sample26"}}
    sample = fed(await feed(registry, args, None, phase="scouting"))
    assert sample == [f.lfn for f in files if in_sample(f.lfn, 0.5)]
    assert 0 < len(sample) < len(files)
    assert fed(await feed(registry, args, None, phase="scouting")) == sample
    assert len(fed(await feed(registry, args, None))) == len(files)


async def test_a_closed_dataset_exhausts_after_one_pass(catalogue: LocalFileCatalogue) -> None:
    await catalogue.register(dataset("Closed26", range(1, 3)))
    items = await feed(
        extension(catalogue),
        {"conditions_dict": {"configVersion": "Closed26"}, "exhaust_after_pass": True},
        None,
    )
    assert len(fed(items)) == 6
    assert items[-1] == NoMoreInputs()


async def test_the_packer_groups_by_descriptor_key() -> None:
    runs = [1, 1, 2, 1, 2, 3, None]
    inputs = [
        InputRecord(uuid.uuid4(), f"/f{n}", 10, {} if run is None else {"run": run})
        for n, run in enumerate(runs)
    ]

    async def pack(flush: bool, feeder_active: bool) -> list[Any]:
        stream = extension().stream(
            "Packer", "ByDescriptorKey", {"group_size": 2}, phase="active",
            transformation=s.transformation("LHCbBookkeeping"), inputs=inputs, flush=flush,
            feeder_active=feeder_active, input_overview={InputStatus.UNASSIGNED: len(inputs)},
        )  # fmt: skip
        return [item async for item in stream]

    ids = [record.id for record in inputs]
    full = [
        ComputeParcel(inputs=[ids[0], ids[1]], metadata={"run": 1}),
        ComputeParcel(inputs=[ids[2], ids[4]], metadata={"run": 2}),
    ]
    held = await pack(flush=False, feeder_active=True)
    assert held == [full[0], full[1], BadInput(ids[6], "its descriptor has no 'run' to group by")]
    remainder = [
        ComputeParcel(inputs=[ids[3]], metadata={"run": 1}),
        ComputeParcel(inputs=[ids[5]], metadata={"run": 3}),
    ]
    assert (await pack(flush=True, feeder_active=True))[3:] == remainder
    assert (await pack(flush=False, feeder_active=False))[3:] == remainder


def halves(low: int, high: int) -> SplitInto:
    middle = (low + high) // 2
    return SplitInto(
        [
            {"lfn": "/f", "lfn_size": 7, "descriptor": {"first_event": a, "last_event": b}}
            for a, b in [(low, middle), (middle + 1, high)]
        ]
    )


UNKNOWN = "not a known grid failure: "


@pytest.mark.parametrize(
    ("reason", "errors", "descriptor", "expected"),
    [
        ("Job stalled: Stalled for 6h", 1, None, ToUnassigned()),
        ("Pilot died", 5, None, ToProblematic("failed 5 times (limit 5); last: Pilot died")),
        ("Segmentation fault", 1, None, ToProblematic(UNKNOWN + "Segmentation fault")),
        ("CPU time limit exceeded", 1, {"events": 100}, halves(0, 99)),
        ("CPU time limit exceeded", 1, {"first_event": 10, "last_event": 13}, halves(10, 13)),
        (
            "CPU time limit exceeded",
            1,
            {"first_event": 4, "last_event": 4},
            ToProblematic(UNKNOWN + "CPU time limit exceeded"),
        ),
    ],
)
async def test_the_failed_input_policy(
    reason: str, errors: int, descriptor: dict[str, Any] | None, expected: Any
) -> None:
    decision = await extension().call(
        "HandleFailedInput", "RetryGridFailures", {}, phase="active",
        transformation=s.transformation("LHCbBookkeeping"),
        input=InputRecord(uuid.uuid4(), "/f", 7, descriptor, InputStatus.FAILED, errors),
        parcel=Parcel(uuid.uuid4(), Kind.COMPUTE, ParcelStatus.FAILED, reason=reason),
    )  # fmt: skip
    assert decision == expected


async def test_the_retry_limit_comes_from_args_or_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    async def decide(registry: Registry, args: dict[str, Any]) -> Any:
        return await registry.call(
            "HandleFailedInput", "RetryGridFailures", args, phase="active",
            transformation=s.transformation("LHCbBookkeeping"),
            input=InputRecord(uuid.uuid4(), "/f", 7, None, InputStatus.FAILED, error_count=2),
            parcel=Parcel(uuid.uuid4(), Kind.COMPUTE, ParcelStatus.FAILED, reason="Stalled"),
        )  # fmt: skip

    assert await decide(extension(), {}) == ToUnassigned()
    assert isinstance(await decide(extension(), {"max_errors": 2}), ToProblematic)
    monkeypatch.setenv("DXTS_EXAMPLE_MAX_ERRORS", "2")
    assert isinstance(await decide(extension(), {}), ToProblematic)


async def test_removed_files_have_no_replica_checks_the_catalogue(
    catalogue: LocalFileCatalogue,
) -> None:
    files = dataset("Removal26", range(287000, 287002))
    await catalogue.register(files)
    registry = extension(catalogue)
    fed_by_query = s.transformation("LHCbBookkeeping")
    fed_by_query = type(fed_by_query)(**{**vars(fed_by_query), "feeder_args": {
        "conditions_dict": {"configVersion": "Removal26"}}})  # fmt: skip

    async def check(transformation: Any, args: dict[str, Any]) -> ActionResult:
        return await registry.call(  # type: ignore[no-any-return]
            "Finalizing", "RemovedFilesHaveNoReplica", args, phase="active",
            transformation=transformation, input_overview={},
        )  # fmt: skip

    failed = await check(fed_by_query, {"storage": ["BUFFER"]})
    assert failed.result == "Failed"
    assert failed.message.startswith("6 of 6 files still have a replica at BUFFER: ")
    assert failed.message.endswith(" ...")
    await catalogue.remove_replicas({f.lfn: ["BUFFER"] for f in files})
    passed = await check(fed_by_query, {"storage": ["BUFFER"]})
    assert passed == ActionResult.passed("none of 6 files has a replica at BUFFER")
    assert (await check(fed_by_query, {})).result == "Failed"  # still at CERN-RAW
    edge_fed = s.transformation("Edge")
    unknown = await check(edge_fed, {})
    assert unknown.result == "Failed" and "give `where`" in unknown.message
    where = {"where": {"configVersion": "Removal26", "run": 287000}, "storage": ["BUFFER"]}
    assert (await check(edge_fed, where)).message == "none of 3 files has a replica at BUFFER"
    with pytest.raises(InvalidArgument, match=r"args\.where"):
        await check(edge_fed, {"where": {"run": {"min": 2, "max": 1}}})


async def test_the_ppg_sign_off_fails_until_forced() -> None:
    result = await extension().call(
        "Approving", "PPGApproval", None, phase="active",
        workgraph=None, transformations=[], input_overviews={},
    )  # fmt: skip
    assert result.result == "Failed"
