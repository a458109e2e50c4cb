"""Calling an RPC that code picks at run time (a steering verb, a listing), named by reference.

A client that chooses among several RPCs names each by the generated servicer's method
(`DefinitionServiceServicer.StartWorkgraph`), as the kernel's `rpc(...)` does, never by a
string: a renamed or removed RPC then fails at import and under the type checker, where a
misspelt string would fail only when someone clicks. `request_type` is the method's request
message class, `method_on` the stub's callable for it.

    verb = DefinitionServiceServicer.StartWorkgraph
    await method_on(stub, verb)(request_type(verb)(workgraph_id=..., reason=...))
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any

from google.protobuf import message_factory
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message import Message

SERVICER_SUFFIX = "Servicer"


def descriptor_of(declared: Callable[..., object]) -> MethodDescriptor:
    """The contract's method a generated servicer's method declares (the generator names a
    servicer `<Service>Servicer` in `<file>_pb2_grpc`, beside the messages' `<file>_pb2`)."""
    servicer, _, name = declared.__qualname__.partition(".")
    module = sys.modules.get(declared.__module__.removesuffix("_grpc"))
    service = (
        module.DESCRIPTOR.services_by_name.get(servicer.removesuffix(SERVICER_SUFFIX))
        if module is not None and servicer.endswith(SERVICER_SUFFIX)
        else None
    )
    method = service.methods_by_name.get(name) if service is not None else None
    if method is None:
        raise ValueError(f"{declared!r} is no method of a contract's servicer")
    return method


def request_type(declared: Callable[..., object]) -> Callable[..., Any]:
    """The request message class of the RPC `declared` names (typed as a constructor of any
    fields: which ones it has is the message's business, checked when it is built)."""
    message: type[Message] = message_factory.GetMessageClass(descriptor_of(declared).input_type)
    return message


def method_on(stub: object, declared: Callable[..., object]) -> Callable[..., Awaitable[Any]]:
    """The stub's callable for the RPC `declared` names."""
    called: Callable[..., Awaitable[Any]] = getattr(stub, descriptor_of(declared).name)
    return called
