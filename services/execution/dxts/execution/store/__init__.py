"""All SQL of execution, one module per area: rows and plain types, no protobuf, no gRPC."""
