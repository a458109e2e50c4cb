"""What every part of DefinitionService shares: the component's collaborators, who is asking,
and the request-field parsing helpers.

Every malformed field is reported at once (INVALID_ARGUMENT with one field violation per
problem); domain errors raised below become status codes in the one interceptor. The caller is
the token's identity; calls forwarded to execution carry the caller's own token.
"""

from __future__ import annotations

from typing import Any

import grpc

from dxts.core.config import DefinitionConfig
from dxts.core.db import Database
from dxts.core.errors import FieldViolation, InvalidArgument, Unauthenticated
from dxts.core.grpc import current_identity
from dxts.core.grpc.auth import bearer_token
from dxts.core.grpc.paging import decode_page_token, encode_page_token
from dxts.core.ids import hash_from_str, id_from_str, id_to_str
from dxts.core.locks import LockManager
from dxts.definition.edge.mapping import transformation_pb, workgraph_pb
from dxts.definition.logic import queries
from dxts.definition.logic.authorise import Caller
from dxts.definition.logic.execution import ExecutionClient, ExecutionFactory
from dxts.definition.plugins import PluginCatalogue
from dxts.definition.settings import DefinitionSettings
from dxts.v1 import common_pb2, definition_pb2

Context = grpc.aio.ServicerContext[Any, Any]


def raise_if(problems: list[FieldViolation]) -> None:
    if problems:
        raise InvalidArgument(problems)


def field_id(
    text: str, field: str, problems: list[FieldViolation], *, required: bool = True
) -> bytes:
    if not text:
        if required:
            problems.append(FieldViolation(field, "required"))
        return b""
    try:
        return id_from_str(text, field=field)
    except InvalidArgument as error:
        problems.extend(error.violations)
        return b""


def required_id(text: str, field: str) -> bytes:
    problems: list[FieldViolation] = []
    value = field_id(text, field, problems)
    raise_if(problems)
    return value


def hash_field(text: str, field: str) -> bytes:
    if not text:
        raise InvalidArgument("required", field=field)
    return hash_from_str(text, field=field)


def page_after(paging: common_pb2.Paging, fingerprint: str) -> bytes | None:
    position = decode_page_token(paging, filters=fingerprint)
    if position is None:
        return None
    text = position.get("after")
    if not isinstance(text, str):
        raise InvalidArgument("not a page token this server issued", field="paging.page_token")
    return id_from_str(text, field="paging.page_token")


def next_page_token(last: bytes | None, fingerprint: str) -> str:
    return (
        "" if last is None else encode_page_token({"after": id_to_str(last)}, filters=fingerprint)
    )


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
        return Caller(current_identity(), self._settings.operator_role)

    def _viewer(self) -> queries.Viewer:
        return queries.Viewer(current_identity(), self._settings.service_role)

    def _forward(self, context: Context) -> ExecutionClient:
        try:
            token: str | None = bearer_token(context.invocation_metadata())
        except Unauthenticated:
            token = None
        return self._execution(token)

    async def _workgraph(self, workgraph_id: bytes) -> definition_pb2.Workgraph:
        detail = await queries.get_workgraph(self._database, self._viewer(), workgraph_id)
        return workgraph_pb(detail.workgraph)

    async def _transformation(self, transformation_id: bytes) -> definition_pb2.Transformation:
        detail = await queries.get_transformation(self._database, self._viewer(), transformation_id)
        return transformation_pb(detail.transformation)
