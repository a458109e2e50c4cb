cwlVersion: v1.2
class: CommandLineTool
id: merge
label: Merge
doc: |
  Merges reconstructed files into one dataset: a summary line (files, candidates, the mean and
  width of the mass peak, a 35-bin histogram of 5.2–5.55) followed by every candidate. The
  dataset is named after its inputs, so two parcels never produce the same name. Writes the
  status report (every input it was given: SUCCESS).

requirements:
  InitialWorkDirRequirement:
    listing:
    - entryname: merge.py
      entry: |
        import argparse, hashlib, json, os, statistics

        parser = argparse.ArgumentParser()
        parser.add_argument("--ids", default="")
        parser.add_argument("files", nargs="+")
        args = parser.parse_args()

        names = sorted(os.path.basename(p) for p in args.files)
        digest = hashlib.sha1("\n".join(names).encode()).hexdigest()[:12]
        rows = []
        for path in sorted(args.files, key=os.path.basename):
            with open(path) as reco:
                rows.extend(json.loads(line) for line in reco if line.strip())
        masses = [row["mass"] for row in rows]
        histogram = [0] * 35
        for m in masses:
            histogram[min(int((m - 5.2) / 0.01), 34)] += 1
        summary = {
            "files": names,
            "candidates": len(rows),
            "mass_mean": round(statistics.fmean(masses), 5) if masses else None,
            "mass_width": round(statistics.pstdev(masses), 5) if masses else None,
            "histogram": {"low": 5.2, "high": 5.55, "bins": histogram},
        }
        with open(f"merged-{digest}.dst", "w") as out:
            out.write(json.dumps(summary) + "\n")
            for row in rows:
                out.write(json.dumps(row) + "\n")
        print(json.dumps({k: summary[k] for k in ("candidates", "mass_mean", "mass_width")}))
        report = {i: {"action": "SUCCESS"} for i in args.ids.split(",") if i}
        with open("status-report.json", "w") as out:
            json.dump(report, out)

baseCommand: [python3, merge.py]

inputs:
  input-data:
    doc: Reconstructed files (`.reco`).
    type: {type: array, items: [File, string]}
    inputBinding: {position: 1}
  dxts-input-ids:
    doc: The ids of the inputs the parcel carries (given by dxts; absent under plain cwltool).
    type: string[]?
    inputBinding: {prefix: --ids, itemSeparator: ","}

outputs:
  merged:
    type: File
    outputBinding: {glob: "merged-*.dst"}
  status-report:
    type: File
    outputBinding: {glob: status-report.json}
