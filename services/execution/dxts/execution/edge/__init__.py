"""Execution's contract edge: gRPC servicers, proto <-> domain mapping, the definition client."""
