"""The definition service's contract edge: the DefinitionService servicer (by area), proto ↔
domain mapping, and the gRPC clients of the services it calls (execution, accounting), which
return domain types. No SQL and no business rules here.
"""
