"""The local file catalogue: idempotent bulk registration, queries, watermark, removal."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dxts.core.catalogue import (
    CatalogueFile,
    CatalogueSettings,
    FileScope,
    LocalFileCatalogue,
    Registered,
    ScopedCatalogue,
    load_catalogue,
    open_catalogue,
    parse_where,
)
from dxts.core.errors import FailedPrecondition, InvalidArgument, PermissionDenied, Unavailable
from dxts.core.lfn import FileNamespace


def raw(run: int, n: int, *, kind: str = "RAW", **extra: object) -> CatalogueFile:
    return CatalogueFile(
        lfn=f"/lhcb/data/{kind}/{run}/{n:05d}.raw",
        size=1000 + n,
        checksum=f"adler32:{n:08x}",
        metadata={"run": run, "file_type": kind, "config": "Collision26", **extra},
        replicas=("CERN-RAW",),
    )


async def lfns_matching(catalogue: LocalFileCatalogue, where: dict[str, object]) -> list[str]:
    page = await catalogue.query(where, limit=10_000)
    assert not page.more
    return [file.lfn for file in page.files]


async def test_register_and_read_back(catalogue: LocalFileCatalogue) -> None:
    files = [raw(100, 1), raw(100, 2, quality="good")]
    files.append(raw(101, 1).model_copy(update={"replicas": ("CERN-RAW", "RAL-RAW")}))
    assert await catalogue.register(files) == Registered(files=3, replicas=4)
    found = await catalogue.files([f.lfn for f in files] + ["/not/registered"])
    assert set(found) == {f.lfn for f in files}
    assert found[files[1].lfn] == files[1]
    assert found[files[2].lfn].replicas == ("CERN-RAW", "RAL-RAW")
    assert await catalogue.replicas([files[0].lfn]) == {files[0].lfn: ("CERN-RAW",)}


async def test_registration_is_idempotent_and_adds_replicas(catalogue: LocalFileCatalogue) -> None:
    file = raw(102, 1)
    assert await catalogue.register([file]) == Registered(1, 1)
    assert await catalogue.register([file]) == Registered(0, 0)
    again = file.model_copy(update={"replicas": ("CERN-RAW", "CNAF-RAW")})
    assert await catalogue.register([again]) == Registered(0, 1)
    assert (await catalogue.replicas([file.lfn]))[file.lfn] == ("CERN-RAW", "CNAF-RAW")
    # The same LFN twice in one call pools its replicas.
    twice = [raw(102, 2), raw(102, 2).model_copy(update={"replicas": ("PIC-RAW",)})]
    assert await catalogue.register(twice) == Registered(1, 2)


async def test_other_content_under_a_registered_lfn_is_refused_whole(
    catalogue: LocalFileCatalogue,
) -> None:
    await catalogue.register([raw(103, 1)])
    changed = raw(103, 1).model_copy(update={"size": 1})
    with pytest.raises(FailedPrecondition, match=re.escape(raw(103, 1).lfn)):
        await catalogue.register([raw(103, 2), changed])
    assert await catalogue.files([raw(103, 2).lfn]) == {}  # nothing of the batch was written
    with pytest.raises(InvalidArgument, match=r"files\[1\]: .* repeats files\[0\]"):
        await catalogue.register([raw(103, 3), raw(103, 3).model_copy(update={"size": 5})])


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"lfn": "/a", "size": -1}, "files[0].size"),
        ({"lfn": "/" + "x" * 512, "size": 1}, "files[0].lfn"),
        ({"lfn": "/a", "size": 1, "metadata": {"k": "v" * 256}}, "files[0].metadata"),
        ({"lfn": "/a", "size": 1, "metadata": {"k": float("nan")}}, "files[0].metadata"),
        ({"lfn": "/a", "size": 1, "replicas": ["X" * 65]}, "files[0].replicas.0"),
        ({"lfn": "/a", "size": 1, "colour": "red"}, "files[0].colour"),
    ],
)
async def test_malformed_files_are_refused(
    catalogue: LocalFileCatalogue, bad: dict[str, object], field: str
) -> None:
    with pytest.raises(InvalidArgument) as refused:
        await catalogue.register([bad])
    assert [v.field for v in refused.value.violations] == [field]


async def test_query_conditions(catalogue: LocalFileCatalogue) -> None:
    await catalogue.register(
        [raw(run, n) for run in (200, 201, 202, 203) for n in (1, 2)]
        + [
            raw(204, 1, kind="DST", energy=6.8, flags=["a"], calibrated=True),
            raw(205, 1, kind="DST", energy=7, calibrated=False),
        ]
    )
    assert len(await lfns_matching(catalogue, {"run": 201})) == 2
    assert await lfns_matching(catalogue, {"run": {"min": 201, "max": 202}}) == [
        raw(run, n).lfn for run in (201, 202) for n in (1, 2)
    ]
    assert len(await lfns_matching(catalogue, {"run": {"min": 203}, "file_type": "RAW"})) == 2
    assert len(await lfns_matching(catalogue, {"run": [200, 203, 999]})) == 4
    assert len(await lfns_matching(catalogue, {"file_type": ["DST", "MDST"]})) == 2
    # Numbers compare as numbers across int and float; strings as strings, case-sensitively.
    assert await lfns_matching(catalogue, {"energy": {"min": 6, "max": 7}}) == [
        raw(204, 1, kind="DST").lfn,
        raw(205, 1, kind="DST").lfn,
    ]
    assert await lfns_matching(catalogue, {"energy": 6.8}) == [raw(204, 1, kind="DST").lfn]
    assert await lfns_matching(catalogue, {"calibrated": True}) == [raw(204, 1, kind="DST").lfn]
    assert await lfns_matching(catalogue, {"file_type": "raw"}) == []
    assert len(await lfns_matching(catalogue, {"file_type": {"min": "DST", "max": "DSU"}})) == 2
    # Lists are kept but not queryable; an unknown key matches nothing.
    assert await lfns_matching(catalogue, {"flags": "a"}) == []
    assert await lfns_matching(catalogue, {"nonexistent": 1}) == []
    page = await catalogue.query({"run": 204}, with_replicas=True)
    assert page.files[0].metadata["flags"] == ["a"]
    assert page.files[0].replicas == ("CERN-RAW",)


@pytest.mark.parametrize(
    ("where", "field"),
    [
        ({"run": {"min": 5, "max": 1}}, "where.run"),
        ({"run": {"min": 5, "max": "z"}}, "where.run"),
        ({"run": {"above": 5}}, "where.run.above"),
        ({"run": {}}, "where.run"),
        ({"run": []}, "where.run"),
        ({"run": [1, [2]]}, "where.run"),
        ({"run": None}, "where.run"),
        ({"run": float("inf")}, "where.run"),
        ({"k" * 65: 1}, "where." + "k" * 65),
    ],
)
def test_malformed_queries_are_refused(where: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        parse_where(where)
    assert field in [v.field for v in refused.value.violations]


async def test_watermark_pages_once_through_everything(catalogue: LocalFileCatalogue) -> None:
    where = {"config": "Paging"}
    batch = [raw(300 + n // 100, n, config="Paging") for n in range(1234)]
    assert (await catalogue.register(batch)).files == len(batch)  # > one INSERT chunk
    seen: list[str] = []
    watermark = None
    while True:
        page = await catalogue.query(where, after=watermark, limit=500)
        seen += [f.lfn for f in page.files]
        watermark = page.watermark
        if not page.more:
            break
    assert seen == [f.lfn for f in batch]  # registration order, each exactly once
    assert (await catalogue.query(where, after=watermark)).files == []
    later = [raw(399, n, config="Paging") for n in range(3)]
    await catalogue.register(later)
    page = await catalogue.query(where, after=watermark)
    assert [f.lfn for f in page.files] == [f.lfn for f in later]
    assert (await catalogue.query(where, after=page.watermark)).watermark == page.watermark


@pytest.mark.parametrize("token", ["", "w1:x:00", "w2:1:00", "w1:1:zz", "w1:1"])
async def test_a_foreign_watermark_is_refused(catalogue: LocalFileCatalogue, token: str) -> None:
    with pytest.raises(InvalidArgument, match="after"):
        await catalogue.query({}, after=token)


async def test_remove_replicas_and_files(catalogue: LocalFileCatalogue) -> None:
    files = [raw(400, n).model_copy(update={"replicas": ("BUFFER", "CERN-RAW")}) for n in (1, 2)]
    await catalogue.register(files)
    watermark = (await catalogue.query({"run": 400})).watermark
    removed = await catalogue.remove_replicas(
        {files[0].lfn: ["BUFFER", "BUFFER", "NOWHERE"], "/not/registered": ["BUFFER"]}
    )
    assert removed == 1
    assert await catalogue.remove_replicas({files[0].lfn: ["CERN-RAW"]}) == 1
    assert await catalogue.replicas([files[0].lfn]) == {files[0].lfn: ()}  # still registered
    assert await catalogue.remove_files([files[1].lfn, "/not/registered"]) == 1
    assert await catalogue.files([files[1].lfn]) == {}
    assert await lfns_matching(catalogue, {"run": 400}) == [files[0].lfn]
    # Registered again, a removed file is new again: after any earlier watermark.
    await catalogue.register([files[1]])
    page = await catalogue.query({"run": 400}, after=watermark)
    assert [f.lfn for f in page.files] == [files[1].lfn]


async def test_bad_arguments_are_refused(catalogue: LocalFileCatalogue) -> None:
    with pytest.raises(InvalidArgument, match="limit"):
        await catalogue.query({}, limit=0)
    with pytest.raises(InvalidArgument, match="lfns"):
        await catalogue.files("/one/string")
    with pytest.raises(InvalidArgument, match="replicas"):
        await catalogue.remove_replicas({"/a": "BUFFER"})


async def test_the_configured_implementation_is_loaded_by_entry_point(tmp_path: Path) -> None:
    settings = CatalogueSettings(url=f"sqlite+aiosqlite:///{tmp_path / 'catalogue.sqlite'}")
    catalogue = await open_catalogue(settings)
    try:
        assert isinstance(catalogue, LocalFileCatalogue)
        assert await catalogue.register([raw(1, 1)]) == Registered(1, 1)
    finally:
        await catalogue.close()
    with pytest.raises(Unavailable, match=r"'rucio' is installed .*installed: local"):
        load_catalogue(settings.model_copy(update={"implementation": "rucio"}))


async def test_a_restarted_catalogue_continues_the_sequence(
    catalogue: LocalFileCatalogue,
) -> None:
    for n in (1, 2, 3):  # three registrations: the sequence is well past its start
        await catalogue.register([raw(500, n)])
    watermark = (await catalogue.query({"run": 500})).watermark
    again = LocalFileCatalogue(catalogue.settings)
    await again.start()  # creates nothing, resets nothing
    try:
        await again.register([raw(500, 4)])
        page = await again.query({"run": 500}, after=watermark)
    finally:
        await again.close()
    assert [f.lfn for f in page.files] == [raw(500, 4).lfn]


async def test_a_vo_s_view_holds_its_files_and_the_shared_ones_case_sensitively(
    catalogue: LocalFileCatalogue,
) -> None:
    """A ScopedCatalogue (a VO's view) queries by LFN prefix in SQL, exactly on both databases
    (SQLite's LIKE ignores case: `/VOA/` is not VO `voa`'s), finds only visible LFNs, and
    refuses to register or remove anything outside the VO's namespace."""
    files = [
        CatalogueFile(lfn=lfn, size=1, metadata={"scoped": 1})
        for lfn in ("/voa/x", "/voa/shared/calib", "/VOA/x", "/vob/x", "/vob/y_z", "/vo%/x")
    ]
    await catalogue.register(files)
    namespace = FileNamespace(shared=["/voa/shared/"])
    reader = ScopedCatalogue(catalogue, FileScope("vob", namespace))
    page = await reader.query({"scoped": 1})
    assert [f.lfn for f in page.files] == ["/voa/shared/calib", "/vob/x", "/vob/y_z"]
    writer = ScopedCatalogue(catalogue, FileScope("vob", namespace, write=True))
    assert [f.lfn for f in (await writer.query({"scoped": 1})).files] == ["/vob/x", "/vob/y_z"]
    assert set(await reader.files(["/voa/x", "/voa/shared/calib", "/vob/x"])) == {
        "/voa/shared/calib",
        "/vob/x",
    }
    with pytest.raises(PermissionDenied, match="/voa/shared/calib is VO voa's file"):
        await reader.remove_files(["/vob/x", "/voa/shared/calib"])
    with pytest.raises(PermissionDenied, match="/VOA/x is VO VOA's file"):
        await reader.register([CatalogueFile(lfn="/VOA/x", size=1, metadata={"scoped": 1})])
    assert set(await catalogue.files(["/vob/x", "/voa/shared/calib"])) == {
        "/vob/x",
        "/voa/shared/calib",
    }
    percent = ScopedCatalogue(catalogue, FileScope("vo%", namespace, write=True))
    assert [f.lfn for f in (await percent.query({"scoped": 1})).files] == ["/vo%/x"]


@pytest.mark.parametrize(
    "lfn", ["/a/./b", "//a/b", "/a/b/", "/a/../b", "/a/b\nc", "/a\x00b", "a/b"]
)
async def test_an_lfn_not_in_normal_form_is_refused(
    catalogue: LocalFileCatalogue, lfn: str
) -> None:
    with pytest.raises(InvalidArgument, match=r"lfns\[0\]"):
        await catalogue.files([lfn])
    with pytest.raises(InvalidArgument, match=r"files\[0\]\.lfn"):
        await catalogue.register([{"lfn": lfn, "size": 1}])
