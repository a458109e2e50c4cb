"""The null adaptor: accepts instantly, runs nothing, completes as configured (benchmarks and
failure injection). `dxts-backend-null` serves it."""
