"""The null adaptor's logic: accepting, completing as configured, pushing outcomes."""
