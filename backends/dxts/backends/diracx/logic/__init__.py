"""The DiracX adaptor's logic: parcels as DiracX jobs (`adaptor`), their job descriptions
(`jdl`) and sandboxes (`sandbox`)."""
