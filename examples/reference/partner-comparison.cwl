cwlVersion: v1.2
class: Workflow
id: reference-partner-comparison
label: Reference · two reconstructions compared partner by partner
doc: |
  Four simulated files, each reconstructed twice with different cuts (RecoA, RecoB); the
  Comparison step reads RecoA's files and joins each with what RecoB made of the same simulated
  file (ByPartner, two complete pairs to a job). Its Finalizing list checks that every file
  RecoB made was compared (EveryPartnerJoined).

$namespaces:
  dirac: https://diracgrid.org/cwl#

hints:
  dirac:Workgraph:
    schema_version: '1.0'
    type: Validation

inputs:
  sim-files:
    doc: The simulated files to reconstruct twice
    dirac:Feeder:
      name: List
      args:
        inputs:
        - {lfn: /lhcb/reference/sim/0.sim, lfn_size: 1000}
        - {lfn: /lhcb/reference/sim/1.sim, lfn_size: 1000}
        - {lfn: /lhcb/reference/sim/2.sim, lfn_size: 1000}
        - {lfn: /lhcb/reference/sim/3.sim, lfn_size: 1000}
    type: File[]

steps:
  RecoA:
    hints:
      dirac:Transformation:
        packer: {name: PerInput, args: {input_parameter: input-data}}
    run: tools/process.cwl
    in: {input-data: sim-files, cut: {default: 4.0}, tag: {default: recoa}}
    out: [reco-files, histograms, status-report]

  RecoB:
    hints:
      dirac:Transformation:
        packer: {name: PerInput, args: {input_parameter: input-data}}
    run: tools/process.cwl
    in: {input-data: sim-files, cut: {default: 4.5}, tag: {default: recob}}
    out: [reco-files, histograms, status-report]

  Comparison:
    hints:
      dirac:Transformation:
        driving_input: reco-a
        packer: {name: ByPartner, args: {partner_input: reco-b, group_size: 2}}
        actions:
          Finalizing: [{action: EveryPartnerJoined}]
    run: tools/compare.cwl
    in: {reco-a: RecoA/reco-files, reco-b: RecoB/reco-files}
    out: [comparison, status-report]

outputs:
  comparisons:
    type: File[]
    outputSource: Comparison/comparison
  histograms-a:
    type: File[]
    outputSource: RecoA/histograms
  histograms-b:
    type: File[]
    outputSource: RecoB/histograms
