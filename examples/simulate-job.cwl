cwlVersion: v1.2
class: Workflow
id: simulate-job
label: Simulate a few seeds, as a user job
doc: |
  A user job: one parcel that runs the example's simulation over the seeds given.
    dxts job submit examples/simulate-job.cwl --inputs examples/simulate-job.yaml
  Plain `cwltool simulate-job.cwl simulate-job.yaml` runs it the same way.

$namespaces:
  dirac: https://diracgrid.org/cwl#

hints:
  dirac:Job: {}

inputs:
  seeds:
    type: string[]

steps:
  simulate:
    run: tools/simulate.cwl
    in: {seed: seeds}
    out: [sim-files]

outputs:
  events:
    type: File[]
    outputSource: simulate/sim-files
