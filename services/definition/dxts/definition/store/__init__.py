"""All SQL of the tables the definition service owns, one module per entity (SQLAlchemy Core).

Every function takes the caller's connection, so it runs inside whatever transaction the caller
opened, and returns rows or plain values. No gRPC, no generated messages, no business rules.
"""
