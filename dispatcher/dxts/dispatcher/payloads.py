"""Materialising what a backend runs: the process tree and the resolved-hints sidecar.

A compute parcel runs the process its ComputeParcels row names, with every process that one
references, resolved from dxts's own content store and never fetched from a host a document
names. Processes belong to the definition side, so the tree is asked of the definition service
(`DefinitionSource`, over `DefinitionService.GetProcessTree`); so is the scope (VO and workgraph
type) a transformation's defaults are resolved against. The sidecar is the configuration
defaults in force for that scope (`dxts.core.config.resolve_hints` with the installation's
configuration), stored content-addressed and recorded on the parcel; every parcel sharing
(ProcessID, ResolvedHintsID) shares one materialised `ComputePayload`, built once and cached.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol

import grpc

from dxts.core.config import DefinitionConfig, resolve_hints
from dxts.core.errors import InvalidArgument, Unavailable
from dxts.core.grpc.convert import json_text
from dxts.core.ids import content_hash, hash_from_str, hash_to_str, id_to_str
from dxts.v1 import backend_pb2, definition_pb2, definition_pb2_grpc

CACHE_SIZE = 1024


class DefinitionSource(Protocol):
    """What the dispatcher asks of the definition side."""

    async def process_tree(self, process_id: bytes) -> list[tuple[bytes, str]]:
        """The root and every process it references, children before parents, each once, as
        (ProcessID, canonical JSON of the document); NotFound for an unknown root."""
        ...

    async def transformation_scope(self, transformation_id: bytes) -> tuple[str, str]:
        """(VO, workgraph type) of a transformation: what its defaults are resolved against."""
        ...


class GrpcDefinitionSource:
    """A DefinitionSource over the definition service (a `dxts.core.grpc.channel` carrying the
    dispatcher's token)."""

    def __init__(self, channel: grpc.aio.Channel, *, timeout_s: float) -> None:
        self._stub = definition_pb2_grpc.DefinitionServiceStub(channel)
        self._timeout_s = timeout_s

    async def process_tree(self, process_id: bytes) -> list[tuple[bytes, str]]:
        reply = await _call(
            self._stub.GetProcessTree(
                definition_pb2.GetProcessTreeRequest(process_id=hash_to_str(process_id)),
                timeout=self._timeout_s,
            )
        )
        return [
            (hash_from_str(p.process_id, field=f"processes[{i}].process_id"), p.document_json)
            for i, p in enumerate(reply.processes)
        ]

    async def transformation_scope(self, transformation_id: bytes) -> tuple[str, str]:
        reply = await _call(
            self._stub.GetTransformation(
                definition_pb2.GetTransformationRequest(
                    transformation_id=id_to_str(transformation_id)
                ),
                timeout=self._timeout_s,
            )
        )
        return reply.transformation.vo, reply.transformation.type


async def _call(call: Any) -> Any:
    """Domain errors pass through (the channel raises them); a status without a domain meaning
    (deadline, internal, unimplemented) means the definition service cannot answer now."""
    try:
        return await call
    except grpc.aio.AioRpcError as error:
        raise Unavailable(f"the definition service did not answer: {error.details()}") from error


class _Lru(OrderedDict[Any, Any]):
    def remember(self, key: Any, value: Any) -> Any:
        self[key] = value
        self.move_to_end(key)
        while len(self) > CACHE_SIZE:
            self.popitem(last=False)
        return value


class Materialiser:
    """Scopes, trees, sidecars and payloads, cached: content-addressed values never change, nor
    does a transformation's VO or type."""

    def __init__(self, source: DefinitionSource, config: DefinitionConfig) -> None:
        self.source = source
        self.config = config
        self._scopes = _Lru()
        self._by_scope = _Lru()
        self._trees = _Lru()
        self._payloads = _Lru()
        self.sidecars: dict[bytes, dict[str, Any]] = {}  # every sidecar this process resolved
        self.stored: set[bytes] = set()  # sidecars known to be in ResolvedHints

    def _scope(self, transformation_id: bytes | None, vo: str | None) -> tuple[str, str] | None:
        if transformation_id is None:
            return vo or "", self.config.default_type
        return self._scopes.get(transformation_id)

    def _sidecar_of(self, scope: tuple[str, str]) -> bytes:
        key = self._by_scope.get(scope)
        if key is None:
            vo, workgraph_type = scope
            hints = resolve_hints(self.config, vo=vo, workgraph_hint={"type": workgraph_type})
            sidecar = hints.as_json()
            key = self._by_scope.remember(scope, content_hash(sidecar, field="resolved_hints"))
            self.sidecars.setdefault(key, sidecar)
        return key

    def cached_sidecar(self, transformation_id: bytes | None, vo: str | None) -> bytes | None:
        """The sidecar's hash when the scope is known without asking anyone (no I/O)."""
        scope = self._scope(transformation_id, vo)
        return None if scope is None else self._sidecar_of(scope)

    async def sidecar(self, transformation_id: bytes | None, vo: str | None) -> bytes:
        """The hash of the sidecar in force for a transformation's scope (a user parcel: its
        VO and the default type), remembered in `sidecars`."""
        scope = self._scope(transformation_id, vo)
        if scope is None:
            assert transformation_id is not None
            scope = self._scopes.remember(
                transformation_id, await self.source.transformation_scope(transformation_id)
            )
        return self._sidecar_of(scope)

    async def compute_payload(
        self, process_id: bytes, hints_id: bytes, hints: dict[str, Any]
    ) -> backend_pb2.Payload:
        """One payload per (process, sidecar), shared by every parcel with that pair."""
        cached = self._payloads.get((process_id, hints_id))
        if cached is not None:
            return cached
        tree = self._trees.get(process_id)
        if tree is None:
            tree = self._trees.remember(process_id, await self.source.process_tree(process_id))
        if not tree or tree[-1][0] != process_id:
            raise InvalidArgument(
                f"the process tree of {hash_to_str(process_id)} does not end with its root",
                field="process_id",
            )
        payload = backend_pb2.Payload(
            compute=backend_pb2.ComputePayload(
                process_id=hash_to_str(process_id),
                processes=[
                    backend_pb2.ProcessDocument(process_id=hash_to_str(pid), document_json=doc)
                    for pid, doc in tree
                ],
                resolved_hints_id=hash_to_str(hints_id),
                resolved_hints_json=json_text(hints),
            )
        )
        return self._payloads.remember((process_id, hints_id), payload)


def submissions(
    parcels: Sequence[Any], requirement_sets: dict[bytes, Any], output_lfn_base: str
) -> list[backend_pb2.ParcelSubmission]:
    """The per-parcel part of a Submit, in order (`parcels` are `db.Parcel`s); each id is
    rendered once (a batch's parcels share their transformation's)."""
    owners: dict[bytes | None, str] = {None: "user"}
    sent = []
    for p in parcels:
        key = id_to_str(p.parcel_id)
        owner = owners.get(p.transformation_id)
        if owner is None:
            owner = owners[p.transformation_id] = id_to_str(p.transformation_id)
        sent.append(
            backend_pb2.ParcelSubmission(
                parcel_id=key,
                parameters_json=(p.parameters_json or "") if p.process_id else "",
                request_json=json_text(p.request) if p.request is not None else "",
                requirements_json=json_text(requirement_sets.get(p.requirements_id))
                if p.requirements_id
                else "",
                output_prefix=output_prefix(output_lfn_base, owner, key),
                input_ids=[id_to_str(i) for i in p.input_ids],
            )
        )
    return sent


def output_prefix(base: str, owner: str, parcel: str) -> str:
    """Where a parcel's outputs go: one LFN directory per parcel, under its transformation's id
    (`owner`; `user` for a user parcel), so that no two parcels can name the same file."""
    return f"{base.rstrip('/')}/{owner}/{parcel}"
