"""The Slurm adaptor's logic: batching parcels into arrays (`adaptor`, `batch`), their
resource requests (`resources`) and what a task's record becomes (`outcomes`)."""
