cwlVersion: v1.2
class: CommandLineTool
id: generate
label: Stand-in event generator
doc: |
  Stands in for the experiment's simulation: for each seed it writes a `.sim` file of
  pseudo-events (one JSON line each, a number drawn from the seed) and one monitoring histogram,
  `hist-<seed>.json`, counting the events by bin of that number. Writes the status report dxts
  reads (every input it was given: SUCCESS).

requirements:
  InitialWorkDirRequirement:
    listing:
    - entryname: generate.py
      entry: |
        import argparse, json, random
        from collections import Counter

        parser = argparse.ArgumentParser()
        parser.add_argument("--events", type=int, required=True)
        parser.add_argument("--ids", default="")
        parser.add_argument("seeds", nargs="+")
        args = parser.parse_args()

        for text in args.seeds:
            value = json.loads(text)
            seed = int(value["seed"] if isinstance(value, dict) else value)
            rng = random.Random(seed)
            bins = Counter()
            with open(f"seed-{seed}.sim", "w") as sim:
                for number in range(args.events):
                    x = rng.gauss(5.0, 1.0)
                    bins[str(max(0, min(9, int(x))))] += 1
                    sim.write(json.dumps({"event": number, "x": round(x, 4)}) + "\n")
            with open(f"hist-{seed}.json", "w") as hist:
                json.dump({"bins": dict(sorted(bins.items()))}, hist)
        report = {i: {"action": "SUCCESS"} for i in args.ids.split(",") if i}
        with open("status-report.json", "w") as out:
            json.dump(report, out)

baseCommand: [python3, generate.py]

inputs:
  seed:
    doc: The seeds, each an integer or a JSON object with a `seed` field (what Seeds yields).
    type: {type: array, items: [File, string]}
    inputBinding: {position: 1}
  events_per_seed:
    type: int
    default: 500
    inputBinding: {prefix: --events}
  dxts-input-ids:
    doc: The ids of the inputs the parcel carries (given by dxts; absent under plain cwltool).
    type: string[]?
    inputBinding: {prefix: --ids, itemSeparator: ","}

outputs:
  sim-files:
    type: File[]
    outputBinding: {glob: "*.sim"}
  histograms:
    type: File[]
    outputBinding: {glob: "hist-*.json"}
  status-report:
    type: File
    outputBinding: {glob: status-report.json}
