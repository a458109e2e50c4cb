"""The DiracX adaptor: compute parcels as jobs of a DiracX installation (its REST API)."""
