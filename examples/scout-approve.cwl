cwlVersion: v1.2
class: Workflow
id: scout-approve
label: Scout, sign off, finalize · the steering example
doc: |
  The MC demo's simulation and reconstruction, run the careful way: a scout of 4,000 events
  first (Scouting, the first stage of the scouting hook's ladder; extending the scout takes the
  next, 8,000), whose success rate is checked, whose measured usage sets the members'
  requirements, and which a production manager signs off (Approving), then the full 12,000
  events (Active); each member checks, before it completes, that every one of its inputs
  settled (Finalizing). docs/operating.md walks through it with every steering verb.

$namespaces:
  dirac: https://diracgrid.org/cwl#

hints:
  dirac:Workgraph:
    schema_version: '1.0'
    type: MCSimulation
    # One reconstructed file per seed: the six seeds of 2,000 events that make the 12,000.
    target: {output: reconstructed, files: 6}
    approving:
    - {action: CheckSuccessRate, args: {min_sample: 2, min_success_rate: 0.9}}
    # CPU at the 95th percentile of the scouts' measurements, memory at the 75th, times 1.2.
    - {action: EstimateResourceUsage, args: {cpu_percentile: 95, memory_percentile: 75}}
    - {action: ManualApproval, args: {role: mc_production_manager}}
    hooks:
      # The scout's sample, in events, by round: 4,000 first, 8,000 once the scout is extended.
      # The scout ends (Scouting → Approving) once its sample has settled.
      ScoutingToApproving:
        hook: ScoutUntilSettled
        args: {min_sample: 2, min_success_rate: 0.9, event_stages: [4000, 8000]}
      # The Seeds feeder stops once the events asked for are produced.
      Active: {hook: OutputTarget, args: {target_events: 12000}}

inputs:
  events:
    doc: Seeds; the scout's sample is the scouting hook's, 12,000 events in all
    dirac:Feeder:
      name: Seeds
      args:
        target_events: 12000
        events_per_seed: 2000
        batch: 6
    type: {type: array, items: [File, string]}

steps:
  Simulation:
    label: Simulation
    doc: One seed per job, 2,000 pseudo-events each
    hints:
      dirac:Transformation:
        packer: {name: PerInput, args: {input_parameter: seed}}
        actions:
          Finalizing: [{action: EveryInputSettled}]
    run: tools/simulate.cwl
    in: {seed: events}
    out: [sim-files, status-report]

  Reconstruction:
    label: Reconstruction
    doc: Two simulated files per job
    hints:
      dirac:Transformation:
        packer: {name: BySize, args: {group_size: 2, input_parameter: input-data}}
        actions:
          Finalizing: [{action: EveryInputSettled}]
    run: tools/reconstruct.cwl
    in: {input-data: Simulation/sim-files}
    out: [reco-files, status-report]

outputs:
  reconstructed:
    label: Reconstructed candidates
    outputSource: Reconstruction/reco-files
    type: File
