"""The CWL runner every adaptor that runs a compute parcel with cwltool shares: the local
adaptor on this machine, the Slurm adaptor's job on a node, the DiracX adaptor's payload on a
worker (`cwl`), and the wrapper that measures what a run used (`measure`)."""
