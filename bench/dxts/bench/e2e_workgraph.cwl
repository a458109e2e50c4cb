cwlVersion: v1.2
class: Workflow
id: e2e-bench
label: The end-to-end benchmark's production
doc: |
  Seeds → Simulation (one seed a parcel) → Merge (100 simulated files a parcel): 2 steps, 2N
  inputs and 1.01N parcels for N seeds. `python -m dxts.bench e2e` sets N in the two
  `target_events` below; the null adaptor finishes every parcel at once with one `out` file.

$namespaces:
  dirac: https://diracgrid.org/cwl#

hints:
  dirac:Workgraph:
    schema_version: '1.0'
    hooks:
      # Ends the Seeds feeder once N events are produced: the members then drain in turn.
      Active: {hook: OutputTarget, args: {target_events: 1000}}

inputs:
  seeds:
    type: {type: array, items: [File, string]}
    dirac:Feeder:
      name: Seeds
      args: {target_events: 1000, events_per_seed: 1}

steps:
  Simulation:
    hints:
      dirac:Transformation:
        packer: {name: PerInput, args: {input_parameter: files}}
    run:
      class: CommandLineTool
      baseCommand: ['true']
      inputs:
        files: {type: {type: array, items: [File, string]}}
      outputs:
        out: {type: File, outputBinding: {glob: out.txt}}
    in: {files: seeds}
    out: [out]

  Merge:
    hints:
      dirac:Transformation:
        packer: {name: BySize, args: {group_size: 100, input_parameter: files}}
    run:
      class: CommandLineTool
      baseCommand: ['true']
      inputs:
        files: {type: {type: array, items: [File, string]}}
      outputs:
        out: {type: File, outputBinding: {glob: out.txt}}
    in: {files: Simulation/out}
    out: [out]

outputs:
  merged:
    type: File
    outputSource: Merge/out

