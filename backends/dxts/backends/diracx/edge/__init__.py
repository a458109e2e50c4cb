"""The DiracX adaptor's edge: DiracX itself, through its REST API (`client`)."""
