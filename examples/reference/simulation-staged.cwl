cwlVersion: v1.2
class: Workflow
id: reference-simulation-staged
label: Reference · simulation scouted in stages, histograms merged
doc: |
  A simulation and its reconstruction. The scout runs in three stages (500, 1,000 and 2,000
  events), each settled and judged before the next (ScoutInStages); the production manager
  signs off (ManualApproval); the rest of the 4,000 events run (OutputTarget). At Finalizing,
  each member's monitoring histograms are merged in one last job (MergeHistograms).

$namespaces:
  dirac: https://diracgrid.org/cwl#

hints:
  dirac:Workgraph:
    schema_version: '1.0'
    type: MCSimulation
    hooks:
      ScoutingToApproving:
        hook: ScoutInStages
        args: {stages: [500, 1000, 2000], min_sample: 2, min_success_rate: 0.9}
      Active: {hook: OutputTarget, args: {target_events: 4000}}
    approving:
    - {action: CheckSuccessRate, args: {min_sample: 2, min_success_rate: 0.9}}
    - {action: ManualApproval, args: {role: mc_production_manager}}

inputs:
  events:
    doc: Seeds, 500 events each; the scout's sample is set by the stages
    dirac:Feeder:
      name: Seeds
      args: {target_events: 4000, events_per_seed: 500}
    type: {type: array, items: [File, string]}

steps:
  Simulation:
    hints:
      dirac:Transformation:
        packer: {name: PerInput, args: {input_parameter: seed}}
        actions:
          Finalizing:
          - {action: NoInputProcessedTwice}
          - {action: MergeHistograms, args: {output: histograms}}
    run: tools/generate.cwl
    in: {seed: events}
    out: [sim-files, histograms, status-report]

  Reconstruction:
    hints:
      dirac:Transformation:
        packer: {name: BySize, args: {group_size: 2, input_parameter: input-data}}
        actions:
          Finalizing:
          - {action: NoInputProcessedTwice}
          - {action: MergeHistograms, args: {output: histograms}}
    run: tools/process.cwl
    in: {input-data: Simulation/sim-files}
    out: [reco-files, histograms, status-report]

outputs:
  reconstructed:
    type: File[]
    outputSource: Reconstruction/reco-files
  simulation-histograms:
    type: File[]
    outputSource: Simulation/histograms
  reconstruction-histograms:
    type: File[]
    outputSource: Reconstruction/histograms
