cwlVersion: v1.2
class: Workflow
id: reference-stripping-with-ancestors
label: Reference · stripping with the raw ancestors
doc: |
  Strips reconstructed (RDST) files, each read together with the raw files it was made from.
  The LHCbAncestors feeder selects the RDST files in the catalogue and finds each one's raw
  ancestors in the catalogue's lineage (a file's metadata lists its parents under `ancestors`);
  AncestorLookup puts two RDST files and their ancestors in one job.

$namespaces:
  dirac: https://diracgrid.org/cwl#

hints:
  dirac:Workgraph:
    schema_version: '1.0'
    type: Stripping

inputs:
  rdst:
    doc: The reconstructed files of run 7, fed with their raw ancestors
    dirac:Feeder:
      name: LHCbAncestors
      args:
        file_type: RDST
        start_run: 7
        end_run: 7
        exhaust_after_pass: true
    type: File[]

steps:
  Stripping:
    hints:
      dirac:Transformation:
        driving_input: rdst
        packer: {name: AncestorLookup, args: {ancestor_input: raw, group_size: 2}}
        actions:
          Finalizing: [{action: NoInputProcessedTwice}]
    run: tools/strip.cwl
    in: {rdst: rdst}
    out: [stripped, status-report]

outputs:
  stripped:
    type: File[]
    outputSource: Stripping/stripped
