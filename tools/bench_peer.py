"""What the peer scripts of `deepinfer bench` share (tools/*/bench_*.py): getting the inputs of a bench
target from deepinfer itself (`deepinfer bench TARGET --write-inputs DIR`, into a fresh temporary
directory) and writing the peer's result JSON in the form `deepinfer bench TARGET --peer FILE` reads
(bench/common.h): {"target", "inputs_id", "system", "measured_at", "load_average", figures...}."""
import datetime
import json
import os
import pathlib
import subprocess
import tempfile


def bench_inputs(deepinfer, target, *options):
    """Runs `deepinfer bench TARGET --write-inputs DIR OPTIONS...`; returns (DIR as a TemporaryDirectory,
    the inputs.json manifest). Keep the TemporaryDirectory alive while reading the files."""
    tmp = tempfile.TemporaryDirectory(prefix=f"deepinfer-bench-{target}-")
    subprocess.run([deepinfer, "bench", target, "--write-inputs", tmp.name, *options], check=True,
                   stdout=subprocess.DEVNULL)
    manifest = json.loads(pathlib.Path(tmp.name, "inputs.json").read_text(encoding="utf-8"))
    return tmp, manifest


def write_result(path, manifest, system, figures):
    result = {"target": manifest["target"], "inputs_id": manifest["inputs_id"], "system": system,
              "measured_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "load_average": " ".join(f"{x:.2f}" for x in os.getloadavg())}
    result.update(figures)
    pathlib.Path(path).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {path}: {system}, load average {result['load_average']}")
