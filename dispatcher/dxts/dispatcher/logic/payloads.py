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

import json
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from dxts.core.adaptor.model import ComputePayload, ProcessDocument, Submission
from dxts.core.config import DefinitionConfig, resolve_hints
from dxts.core.errors import InvalidArgument
from dxts.core.ids import content_hash, hash_to_str, id_to_str
from dxts.core.lfn import FileNamespace
from dxts.core.states import Kind
from dxts.dispatcher.store.claiming import Parcel

CACHE_SIZE = 1024


def json_text(value: Any) -> str:
    """A submission's JSON field: compact, non-ASCII kept, None the empty string (the
    contract's `*_json` convention)."""
    return "" if value is None else json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class DefinitionSource(Protocol):
    """What the dispatcher asks of the definition side."""

    async def process_tree(self, process_id: bytes) -> list[tuple[bytes, str]]:
        """The root and every process it references, children before parents, each once, as
        (ProcessID, canonical JSON of the document); NotFound for an unknown root."""
        ...

    async def transformation_scope(self, transformation_id: bytes) -> tuple[str, str]:
        """(VO, workgraph type) of a transformation: what its defaults are resolved against."""
        ...


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

    async def vo(self, transformation_id: bytes | None, vo: str | None) -> str:
        """The VO a parcel works for: a user parcel's own, else its transformation's."""
        scope = self._scope(transformation_id, vo)
        if scope is None:
            assert transformation_id is not None
            scope = self._scopes.remember(
                transformation_id, await self.source.transformation_scope(transformation_id)
            )
        return str(scope[0])

    async def compute_payload(
        self, process_id: bytes, hints_id: bytes, hints: dict[str, Any]
    ) -> ComputePayload:
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
        payload = ComputePayload(
            process_id=hash_to_str(process_id),
            processes=tuple(ProcessDocument(hash_to_str(pid), doc) for pid, doc in tree),
            resolved_hints_id=hash_to_str(hints_id),
            resolved_hints_json=json_text(hints),
        )
        return self._payloads.remember((process_id, hints_id), payload)


def submissions(
    parcels: Sequence[Parcel],
    requirement_sets: dict[bytes, Any],
    output_lfn_base: str,
    vos: Mapping[bytes, str] | None = None,
    namespace: FileNamespace | None = None,
) -> list[Submission]:
    """The per-parcel part of a Submit, in order; each id is rendered once (a batch's parcels
    share their transformation's). A parcel whose VO is in `vos` carries it (a data adaptor
    touches only that VO's files) and, a compute one, writes its outputs in that VO's home of
    `namespace`, so they belong to the VO of the workgraph that made them."""
    vos = vos or {}
    namespace = namespace or FileNamespace()
    owners: dict[bytes, str] = {}
    sent = []
    for p in parcels:
        key = id_to_str(p.parcel_id)
        tid = p.transformation_id
        owner = "user" if tid is None else owners.get(tid) or owners.setdefault(tid, id_to_str(tid))
        sent.append(
            Submission(
                parcel_id=key,
                parameters_json=(p.parameters_json or "") if p.process_id else "",
                request_json=json_text(p.request) if p.request is not None else "",
                requirements_json=json_text(requirement_sets.get(p.requirements_id))
                if p.requirements_id
                else "",
                output_prefix=output_prefix(
                    output_lfn_base, owner, key, _home(p, vos.get(p.parcel_id), namespace)
                ),
                input_ids=tuple(id_to_str(i) for i in p.input_ids),
                vo=vos.get(p.parcel_id, ""),
            )
        )
    return sent


def _home(parcel: Parcel, vo: str | None, namespace: FileNamespace) -> str:
    """Where a compute parcel's outputs go: its VO's home ("/" when its VO is not known)."""
    return namespace.home(vo) if vo and parcel.kind is Kind.COMPUTE else "/"


def output_prefix(base: str, owner: str, parcel: str, home: str = "/") -> str:
    """Where a parcel's outputs go: one LFN directory per parcel, under its transformation's id
    (`owner`; `user` for a user parcel), so that no two parcels can name the same file, in its
    VO's `home` (`/lhcb/` + `dxts/<owner>/<parcel>`)."""
    return f"{home}{base.strip('/')}/{owner}/{parcel}"
