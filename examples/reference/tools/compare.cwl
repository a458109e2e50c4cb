cwlVersion: v1.2
class: CommandLineTool
id: compare
label: Stand-in comparison of two reconstructions
doc: |
  Stands in for a comparison of two reconstructions of the same files: given the files of
  reconstruction A and, in the same order, their partners from reconstruction B, it writes one
  `.cmp` line per pair with the events each kept. Writes the status report dxts reads.

requirements:
  InitialWorkDirRequirement:
    listing:
    - entryname: compare.py
      entry: |
        import argparse, json, os

        parser = argparse.ArgumentParser()
        parser.add_argument("--partner", action="append", default=[])
        parser.add_argument("--ids", default="")
        parser.add_argument("files", nargs="+")
        args = parser.parse_args()

        def events(path):
            with open(path) as source:
                return sum(1 for _ in source)

        with open("comparison.cmp", "w") as out:
            for mine, theirs in zip(args.files, args.partner, strict=True):
                row = {"a": os.path.basename(mine), "b": os.path.basename(theirs)}
                row.update(kept_a=events(mine), kept_b=events(theirs))
                out.write(json.dumps(row) + "\n")
        report = {i: {"action": "SUCCESS"} for i in args.ids.split(",") if i}
        with open("status-report.json", "w") as out:
            json.dump(report, out)

baseCommand: [python3, compare.py]

inputs:
  reco-a:
    type: File[]
    inputBinding: {position: 1}
  reco-b:
    type: {type: array, items: File, inputBinding: {prefix: --partner}}
  dxts-input-ids:
    type: string[]?
    inputBinding: {prefix: --ids, itemSeparator: ","}

outputs:
  comparison:
    type: File[]
    outputBinding: {glob: "*.cmp"}
  status-report:
    type: File
    outputBinding: {glob: status-report.json}
