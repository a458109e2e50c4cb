"""Execution's logic on domain types: no generated protobuf, no gRPC."""
