"""The local adaptor's logic: running compute parcels (`adaptor`) and data requests (`data`)."""
