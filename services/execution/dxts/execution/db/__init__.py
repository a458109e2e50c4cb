"""All SQL of execution, one module per area."""
