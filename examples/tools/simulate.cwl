cwlVersion: v1.2
class: CommandLineTool
id: simulate
label: Pseudo-event generator
doc: |
  Generates pseudo-events from each seed: tracks of a flat background and, in a third of the
  events, the two daughters of a parent of mass 5.367 decaying in flight. Each event is one JSON
  line of track four-momenta. Writes one `.sim` file per seed and the status report dxts reads
  (every input it was given: SUCCESS).

requirements:
  InitialWorkDirRequirement:
    listing:
    - entryname: simulate.py
      entry: |
        import argparse, json, math, random

        parser = argparse.ArgumentParser()
        parser.add_argument("--events", type=int, required=True)
        parser.add_argument("--ids", default="")
        parser.add_argument("seeds", nargs="+")
        args = parser.parse_args()

        def seed_of(text):
            value = json.loads(text)
            return int(value["seed"] if isinstance(value, dict) else value)

        def background(rng):
            pt, phi = rng.expovariate(1 / 1.5), rng.uniform(-math.pi, math.pi)
            px, py, pz = pt * math.cos(phi), pt * math.sin(phi), pt * math.sinh(rng.uniform(-2.5, 2.5))
            return [px, py, pz, math.sqrt(px * px + py * py + pz * pz + 0.494 ** 2)]

        def decay(rng, mass):
            p = math.sqrt((mass / 2) ** 2 - 0.494 ** 2)
            cos_t, phi = rng.uniform(-1, 1), rng.uniform(-math.pi, math.pi)
            sin_t = math.sqrt(1 - cos_t * cos_t)
            d = (p * sin_t * math.cos(phi), p * sin_t * math.sin(phi), p * cos_t)
            beta = rng.uniform(0.0, 0.9)
            gamma = 1 / math.sqrt(1 - beta * beta)
            tracks = []
            for sign in (1, -1):
                px, py, pz = (sign * c for c in d)
                tracks.append([px, py, gamma * (pz + beta * mass / 2), gamma * (mass / 2 + beta * pz)])
            return tracks

        for seed in map(seed_of, args.seeds):
            rng = random.Random(seed)
            with open(f"seed-{seed}.sim", "w") as sim:
                sim.write(f"# seed {seed} events {args.events}\n")
                for number in range(args.events):
                    tracks = [background(rng) for _ in range(rng.randint(2, 6))]
                    if rng.random() < 0.3:
                        tracks += decay(rng, rng.gauss(5.367, 0.02))
                    rng.shuffle(tracks)
                    rounded = [[round(c, 4) for c in t] for t in tracks]
                    sim.write(json.dumps({"event": number, "tracks": rounded}) + "\n")
        report = {i: {"action": "SUCCESS"} for i in args.ids.split(",") if i}
        with open("status-report.json", "w") as out:
            json.dump(report, out)

baseCommand: [python3, simulate.py]

inputs:
  seed:
    doc: The seeds, each an integer or a JSON object with a `seed` field (what Seeds yields).
    type: {type: array, items: [File, string]}
    inputBinding: {position: 1}
  events_per_seed:
    type: int
    default: 2000
    inputBinding: {prefix: --events}
  dxts-input-ids:
    doc: The ids of the inputs the parcel carries (given by dxts; absent under plain cwltool).
    type: string[]?
    inputBinding: {prefix: --ids, itemSeparator: ","}

outputs:
  sim-files:
    type: File[]
    outputBinding: {glob: "*.sim"}
  status-report:
    type: File
    outputBinding: {glob: status-report.json}
