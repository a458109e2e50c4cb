"""What every part of DefinitionService shares: the component's collaborators and who is asking.

Every malformed field is reported at once (INVALID_ARGUMENT with one field violation per
problem, parsed with `dxts.core.grpc.requests`); domain errors raised below become status codes
in the one interceptor. The caller is the token's identity; calls forwarded to execution carry
the caller's own token.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import grpc

from dxts.core.config import DefinitionConfig
from dxts.core.db import Database
from dxts.core.errors import Unauthenticated
from dxts.core.grpc.auth import bearer_token
from dxts.core.grpc.requests import Problems
from dxts.core.identity import current_identity
from dxts.core.locks import LockManager
from dxts.cwl.plugins import PluginCatalogue
from dxts.definition.edge.mapping import transformation_pb, workgraph_pb
from dxts.definition.logic import queries
from dxts.definition.logic.authorise import Caller
from dxts.definition.logic.execution import ExecutionClient, ExecutionFactory
from dxts.definition.settings import DefinitionSettings
from dxts.v1 import definition_pb2

Context = grpc.aio.ServicerContext[Any, Any]


def required_hash(text: str, field: str) -> bytes:
    """`text` as a content hash, or INVALID_ARGUMENT naming `field`."""
    problems = Problems()
    value = problems.hash(text, field)
    problems.raise_if_any()
    assert value is not None
    return value


class ServicerBase:
    """The collaborators of the RPCs and who is asking."""

    def __init__(
        self,
        database: Database,
        *,
        settings: DefinitionSettings,
        catalogue: PluginCatalogue,
        config: DefinitionConfig,
        execution: ExecutionFactory,
        locks: LockManager | None = None,
    ) -> None:
        self._database = database
        self._locks = locks
        self._settings = settings
        self._catalogue = catalogue
        self._config = config
        self._execution = execution

    def _caller(self) -> Caller:
        return Caller(current_identity(), self._settings.operator_role, self._config.policy)

    def _viewer(self) -> queries.Viewer:
        return queries.Viewer(current_identity(), self._settings.service_role)

    def _forward(self, context: Context) -> ExecutionClient:
        try:
            token: str | None = bearer_token(context.invocation_metadata())
        except Unauthenticated:
            token = None
        return self._execution(token)

    async def _workgraph(
        self, workgraph_id: bytes, left: Mapping[str, Any] | None = None
    ) -> definition_pb2.Workgraph:
        """The workgraph read back; after a command, with the status the command `left` it
        in: read after the commit, the lifecycle may already have moved it on (a drained
        workgraph with nothing in flight to Finalizing), which the reply must not put down to
        the command."""
        detail = await queries.get_workgraph(self._database, self._viewer(), workgraph_id)
        view = detail.workgraph
        if left and "status" in left:
            view = dataclasses.replace(view, status=left["status"])
        return workgraph_pb(view)

    async def _transformation(
        self, transformation_id: bytes, left: Mapping[str, Any] | None = None
    ) -> definition_pb2.Transformation:
        """The transformation read back; after a command, with the status and feeder state the
        command `left` it in: read after the commit, a resumed member's feeder may already have
        turned itself off at its target, which the reply must not put down to the command."""
        detail = await queries.get_transformation(self._database, self._viewer(), transformation_id)
        view = detail.transformation
        if left:
            view = dataclasses.replace(
                view,
                status=left.get("status", view.status),
                feeder_enabled=left.get("feeder_enabled", view.feeder_enabled),
            )
        return transformation_pb(view)
