"""Declared outputs reach execution one way: the snapshot of the definition side's listing,
asked by id for a transformation it has not listed (one whose parcels complete after it has
left Active)."""

from __future__ import annotations

from collections.abc import Collection

from definition_double import InMemoryTransformations

from dxts.core.states import Kind, TransformationStatus
from dxts.execution.logic.transformations import ActiveSnapshot, ActiveTransformation, Output

ACTIVE = ActiveTransformation(
    id=b"a" * 16, type="T", kind=Kind.COMPUTE, packer="P", outputs=(Output(b"o" * 16, "out"),)
)
PAUSED = ActiveTransformation(
    id=b"p" * 16,
    type="T",
    kind=Kind.COMPUTE,
    packer="P",
    status=TransformationStatus.PAUSED,
    outputs=(Output(b"q" * 16, "files"),),
)


class Counted(InMemoryTransformations):
    """The definition side, counting what it is asked by id."""

    asked: list[set[bytes]]

    async def listed(self, transformation_ids: Collection[bytes]) -> list[ActiveTransformation]:
        self.asked.append(set(transformation_ids))
        return await super().listed(transformation_ids)


async def test_outputs_of_a_transformation_that_left_active_are_asked_by_id_once() -> None:
    source = Counted([ACTIVE, PAUSED])
    source.asked = []
    snapshot = ActiveSnapshot(source)
    await snapshot.refresh()

    wanted = {ACTIVE.id, PAUSED.id, b"u" * 16}  # the last one unknown to the definition side
    first = await snapshot.declared_outputs(wanted)
    again = await snapshot.declared_outputs({ACTIVE.id, PAUSED.id})

    assert first == again == {ACTIVE.id: {"out": b"o" * 16}, PAUSED.id: {"files": b"q" * 16}}
    assert source.asked == [{PAUSED.id, b"u" * 16}]  # the listed one is not asked; known kept
