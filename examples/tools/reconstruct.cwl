cwlVersion: v1.2
class: CommandLineTool
id: reconstruct
label: Reconstruction
doc: |
  Reconstructs each simulated file: smears every track's momentum by a 1% resolution, drops
  tracks below 0.5 GeV transverse momentum, pairs the rest and keeps the candidates whose mass
  falls in the 5.2–5.55 window. Writes one `.reco` file per input (a JSON line per candidate)
  and the status report (every input it was given: SUCCESS).

requirements:
  InitialWorkDirRequirement:
    listing:
    - entryname: reconstruct.py
      entry: |
        import argparse, json, math, os, random, zlib

        parser = argparse.ArgumentParser()
        parser.add_argument("--ids", default="")
        parser.add_argument("files", nargs="+")
        args = parser.parse_args()

        def mass(a, b):
            e, px, py, pz = a[3] + b[3], a[0] + b[0], a[1] + b[1], a[2] + b[2]
            return math.sqrt(max(e * e - px * px - py * py - pz * pz, 0.0))

        for path in args.files:
            name = os.path.basename(path)
            stem = name.rsplit(".", 1)[0]
            rng = random.Random(zlib.crc32(name.encode()))
            events = candidates = 0
            with open(path) as sim, open(f"{stem}.reco", "w") as reco:
                for line in sim:
                    if line.startswith("#"):
                        continue
                    event = json.loads(line)
                    events += 1
                    tracks = []
                    for px, py, pz, e in event["tracks"]:
                        scale = rng.gauss(1.0, 0.01)
                        px, py, pz = px * scale, py * scale, pz * scale
                        if math.hypot(px, py) < 0.5:
                            continue
                        tracks.append([px, py, pz, math.sqrt(px * px + py * py + pz * pz + 0.494 ** 2)])
                    for i in range(len(tracks)):
                        for j in range(i + 1, len(tracks)):
                            m = mass(tracks[i], tracks[j])
                            if 5.2 < m < 5.55:
                                candidates += 1
                                reco.write(json.dumps({"source": stem, "event": event["event"], "mass": round(m, 5)}) + "\n")
            print(f"{name}: {events} events, {candidates} candidates")
        report = {i: {"action": "SUCCESS"} for i in args.ids.split(",") if i}
        with open("status-report.json", "w") as out:
            json.dump(report, out)

baseCommand: [python3, reconstruct.py]

inputs:
  input-data:
    doc: Simulated files (`.sim`).
    type: {type: array, items: [File, string]}
    inputBinding: {position: 1}
  dxts-input-ids:
    doc: The ids of the inputs the parcel carries (given by dxts; absent under plain cwltool).
    type: string[]?
    inputBinding: {prefix: --ids, itemSeparator: ","}

outputs:
  reco-files:
    type: File[]
    outputBinding: {glob: "*.reco"}
  status-report:
    type: File
    outputBinding: {glob: status-report.json}
