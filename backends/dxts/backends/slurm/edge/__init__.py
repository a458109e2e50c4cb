"""The Slurm adaptor's edge: Slurm itself, through its command-line tools (`commands`)."""
