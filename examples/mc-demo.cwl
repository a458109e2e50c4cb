cwlVersion: v1.2
class: Workflow
id: mc-demo
label: MC demo · simulate, reconstruct, merge
doc: |
  A small Monte Carlo production that really computes: seeds become pseudo-events, the events
  are reconstructed into mass candidates, and the candidates are merged into datasets, which
  are then replicated to a second storage element. Under dxts the Seeds feeder issues seeds
  until 12,000 events are produced (the OutputTarget hook), then every member drains in turn and
  the workgraph closes itself.
  Plain `cwltool mc-demo.cwl mc-demo-job.yaml` runs the same chain once over the seeds given.

$namespaces:
  dirac: https://diracgrid.org/cwl#

hints:
  dirac:Workgraph:
    schema_version: '1.0'
    type: MCSimulation
    target: {output: datasets, files: 2}
    hooks:
      # Ends the Seeds feeder once the events asked for are produced, so that the members
      # drain one after the other and the workgraph closes itself.
      Active: {hook: OutputTarget, args: {target_events: 12000}}
    data_management:
    - id: DatasetReplication
      operation: replicate
      files: datasets
      destination: [LOCAL-ARCHIVE]
      packer: {name: DataManagement, args: {group_size: 2}}

inputs:
  events:
    doc: Seeds, issued until the requested number of events has been produced
    dirac:Feeder:
      name: Seeds
      args:
        target_events: 12000
        events_per_seed: 2000
        batch: 6
        max_in_flight: 12000
    type: {type: array, items: [File, string]}

steps:
  Simulation:
    label: Simulation
    doc: One seed per job, 2,000 pseudo-events each
    hints:
      dirac:Transformation:
        packer: {name: PerInput, args: {input_parameter: seed}}
    run: tools/simulate.cwl
    in: {seed: events}
    out: [sim-files, status-report]

  Reconstruction:
    label: Reconstruction
    doc: Two simulated files per job
    hints:
      dirac:Transformation:
        packer: {name: BySize, args: {group_size: 2, input_parameter: input-data}}
    run: tools/reconstruct.cwl
    in: {input-data: Simulation/sim-files}
    out: [reco-files, status-report]

  Merge:
    label: Merge
    doc: Three reconstructed files per merged dataset
    hints:
      dirac:Transformation:
        packer: {name: BySize, args: {group_size: 3, input_parameter: input-data}}
    run: tools/merge.cwl
    in: {input-data: Reconstruction/reco-files}
    out: [merged, status-report]

outputs:
  datasets:
    label: Merged datasets
    outputSource: Merge/merged
    type: File
