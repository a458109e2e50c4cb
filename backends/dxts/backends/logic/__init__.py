"""The kit's logic on the contract's domain types: what an adaptor is (`adaptor`)."""
