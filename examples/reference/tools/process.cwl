cwlVersion: v1.2
class: CommandLineTool
id: process
label: Stand-in reconstruction
doc: |
  Stands in for the experiment's reconstruction: keeps the events of its input files whose
  number is above a cut, writes them to one `.reco` file per input, and one monitoring
  histogram of what it kept. Writes the status report dxts reads.

requirements:
  InitialWorkDirRequirement:
    listing:
    - entryname: process.py
      entry: |
        import argparse, json, os
        from collections import Counter

        parser = argparse.ArgumentParser()
        parser.add_argument("--cut", type=float, default=4.0)
        parser.add_argument("--tag", default="reco")
        parser.add_argument("--ids", default="")
        parser.add_argument("files", nargs="+")
        args = parser.parse_args()

        bins = Counter()
        for path in args.files:
            name = os.path.splitext(os.path.basename(path))[0]
            with open(path) as source, open(f"{name}.{args.tag}", "w") as kept:
                for line in source:
                    event = json.loads(line)
                    if event["x"] > args.cut:
                        bins[str(int(event["x"]))] += 1
                        kept.write(line)
        with open(f"hist-{args.tag}.json", "w") as hist:
            json.dump({"bins": dict(sorted(bins.items()))}, hist)
        report = {i: {"action": "SUCCESS"} for i in args.ids.split(",") if i}
        with open("status-report.json", "w") as out:
            json.dump(report, out)

baseCommand: [python3, process.py]

inputs:
  input-data:
    type: File[]
    inputBinding: {position: 1}
  cut:
    type: float
    default: 4.0
    inputBinding: {prefix: --cut}
  tag:
    type: string
    default: reco
    inputBinding: {prefix: --tag}
  dxts-input-ids:
    type: string[]?
    inputBinding: {prefix: --ids, itemSeparator: ","}

outputs:
  reco-files:
    type: File[]
    outputBinding: {glob: "*.$(inputs.tag)"}
  histograms:
    type: File
    outputBinding: {glob: "hist-$(inputs.tag).json"}
  status-report:
    type: File
    outputBinding: {glob: status-report.json}
