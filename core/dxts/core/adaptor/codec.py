"""The contract's domain types as bytes, for an adaptor that keeps them (the local adaptor's
state): the deterministic protobuf encoding of their messages, so that equal values give equal
bytes (a payload's key is the hash of its bytes) and what an earlier release stored still
reads."""

from __future__ import annotations

from dxts.core.adaptor import mapping
from dxts.core.adaptor.model import Outcome, Payload, Submission
from dxts.v1 import backend_pb2, common_pb2


def encode_payload(payload: Payload) -> bytes:
    return mapping.payload_to_proto(payload).SerializeToString(deterministic=True)


def decode_payload(data: bytes) -> Payload:
    return mapping.payload_from_proto(backend_pb2.Payload.FromString(data))


def encode_submission(submission: Submission) -> bytes:
    return mapping.submission_to_proto(submission).SerializeToString(deterministic=True)


def decode_submission(data: bytes) -> Submission:
    return mapping.submission_from_proto(backend_pb2.ParcelSubmission.FromString(data))


def encode_outcome(outcome: Outcome) -> bytes:
    return mapping.outcome_to_proto(outcome).SerializeToString(deterministic=True)


def decode_outcome(data: bytes) -> Outcome:
    return mapping.outcome_from_proto(common_pb2.Outcome.FromString(data))
