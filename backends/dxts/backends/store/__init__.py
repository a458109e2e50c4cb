"""The kit's store: the small SQLite state database a stateful adaptor keeps (`state`)."""
