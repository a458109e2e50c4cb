cwlVersion: v1.2
class: CommandLineTool
id: strip
label: Stand-in stripping
doc: |
  Stands in for the stripping of reconstructed data: reads each reconstructed file together
  with the raw files it came from (its ancestors) and writes one `.strip` file per
  reconstructed file naming both. Writes the status report dxts reads.

requirements:
  InitialWorkDirRequirement:
    listing:
    - entryname: strip.py
      entry: |
        import argparse, json, os

        parser = argparse.ArgumentParser()
        parser.add_argument("--raw", action="append", default=[])
        parser.add_argument("--ids", default="")
        parser.add_argument("files", nargs="+")
        args = parser.parse_args()

        raw = sorted(os.path.basename(path) for path in args.raw)
        for path in args.files:
            name = os.path.splitext(os.path.basename(path))[0]
            with open(f"{name}.strip", "w") as out:
                json.dump({"reconstructed": os.path.basename(path), "raw": raw}, out)
        report = {i: {"action": "SUCCESS"} for i in args.ids.split(",") if i}
        with open("status-report.json", "w") as out:
            json.dump(report, out)

baseCommand: [python3, strip.py]

inputs:
  rdst:
    type: File[]
    inputBinding: {position: 1}
  raw:
    type: {type: array, items: File, inputBinding: {prefix: --raw}}
  dxts-input-ids:
    type: string[]?
    inputBinding: {prefix: --ids, itemSeparator: ","}

outputs:
  stripped:
    type: File[]
    outputBinding: {glob: "*.strip"}
  status-report:
    type: File
    outputBinding: {glob: status-report.json}
