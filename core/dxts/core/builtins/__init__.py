"""dxts's own built-in plugins, registered through dxts's entry points like any extension's.

Feeders (`feeders`): Seeds, Query, Edge, List. Packers (`packers`, `join`): PerInput, BySize,
ByRun, ByGroupSizeRun, Join and DataManagement; every packer builds data parcels (`data`) for a
Data transformation and compute parcels otherwise. What a built-in reads from execution's
tables comes through the read-only Protocols of `readers`, which execution provides.
"""
