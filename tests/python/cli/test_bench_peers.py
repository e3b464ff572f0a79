"""The bench peer protocol (bench/common.h): `--write-inputs DIR` writes the inputs with their id, a peer
result for those inputs is printed beside ours, and one for other inputs is refused with one line."""
import json
import subprocess


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=120)


def test_peer_result_for_the_same_inputs_is_used_and_others_refused(deepinfer_bin, tmp_path):
    small = ["--kib", "4", "--chunk-bytes", "16"]
    wrote = run(deepinfer_bin, "bench", "parse", "--write-inputs", str(tmp_path / "in"), *small)
    assert wrote.returncode == 0, wrote.stderr
    manifest = json.loads((tmp_path / "in" / "inputs.json").read_text())
    assert manifest["target"] == "parse" and manifest["files"] == ["chunks.json"]
    chunks = json.loads((tmp_path / "in" / "chunks.json").read_text())
    assert "".join(chunks).startswith("the ") or len(chunks) > 100  # 4 KiB in ~16-byte chunks
    peer = {"target": "parse", "inputs_id": manifest["inputs_id"], "system": "a test peer", "seconds": 1.0,
            "p50": 1e-6, "p99": 2e-6, "p999": 3e-6, "worst": 4e-6, "events": 7}
    (tmp_path / "peer.json").write_text(json.dumps(peer))
    ours = run(deepinfer_bin, "bench", "parse", "--peer", str(tmp_path / "peer.json"), *small)
    assert ours.returncode == 0, ours.stderr
    assert "peer: a test peer" in ours.stdout and "ratio ours" in ours.stdout
    # Other sizes: other inputs, so the same file is refused.
    other = run(deepinfer_bin, "bench", "parse", "--peer", str(tmp_path / "peer.json"), "--kib", "5")
    assert other.returncode == 1
    assert len(other.stderr.strip().splitlines()) == 1 and "other inputs" in other.stderr
    # A peer file for another target is refused as well.
    peer["target"] = "render"
    (tmp_path / "peer.json").write_text(json.dumps(peer))
    assert run(deepinfer_bin, "bench", "parse", "--peer", str(tmp_path / "peer.json"), *small).returncode == 1
