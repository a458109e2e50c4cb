"""Execution's operator and outcome RPCs, a mixin of ExecutionServicer.

Kept apart from the read/flush RPCs so that outcome recording, operator operations, user jobs
and cleaning can evolve on their own; ExecutionServicer inherits this class.
"""


class OperationsRpcs:
    """RecordOutcomes, ResetInputs, WriteOffInputs, CancelParcels, Provenance, CreateUserParcel,
    GetUserParcel and CleanTransformation."""
