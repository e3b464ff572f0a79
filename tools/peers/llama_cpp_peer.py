#!/usr/bin/env python3
"""The llama.cpp peer for `deepinfer bench server` (and bench model): llama-cpp-python 0.3.36's
llama_cpp.server, an OpenAI-compatible server over the llama.cpp it vendors (which has the deepseek4
architecture). Needs the bench venv from tools/peers/setup_llama_cpp.sh; not used by CI.

  llama_cpp_peer.py convert MODEL_DIR OUT.gguf [--outtype f32|bf16|f16|q8_0]
      llama.cpp's own convert_hf_to_gguf.py (from the llama-cpp-python sdist) on a deepinfer checkpoint.
      llama.cpp's DeepSeek-V4 converter reads the released layout: FP8 weights with scales and MXFP4
      routed experts, so write the checkpoint with `deepinfer init-model --preset small --format fp8`.
  llama_cpp_peer.py serve OUT.gguf [--port 8011] [--threads 2] [--ctx 4096]
      llama_cpp.server on that file, in the foreground (Ctrl-C stops it).
  llama_cpp_peer.py bench OUT.gguf --out peer.json [--deepinfer build/release/bin/deepinfer] [bench flags...]
      starts llama_cpp.server, runs `deepinfer bench server --json peer.json` against it (the same client and
      workload as against deepinfer serve), stops it. Then:
      deepinfer bench server --url http://127.0.0.1:8000 --peer peer.json   (against deepinfer serve)
"""
import argparse
import os
import pathlib
import signal
import subprocess
import sys
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]
LLAMA_CPP_PYTHON = "0.3.36"


def venv_dir(args):
    return pathlib.Path(args.venv or os.environ.get("DEEPINFER_BENCH_VENV", ROOT / ".venv-bench"))


def converter_dir(venv):
    return venv / "share" / f"llama.cpp-{LLAMA_CPP_PYTHON}"


def convert(args):
    venv = venv_dir(args)
    conv = converter_dir(venv)
    script = conv / "convert_hf_to_gguf.py"
    if not script.exists():
        sys.exit(f"{script} is missing: run tools/peers/setup_llama_cpp.sh")
    env = dict(os.environ)
    # The vendored gguf-py matches the converter (its architecture tables); PyPI's gguf may lag behind.
    env["PYTHONPATH"] = str(conv / "gguf-py") + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [str(venv / "bin" / "python"), str(script), args.model_dir, "--outfile", args.out, "--outtype", args.outtype]
    print("+", " ".join(cmd), flush=True)
    sys.exit(subprocess.run(cmd, env=env).returncode)


def server_command(args):
    venv = venv_dir(args)
    # Through run_server_without_repacking (below), run by the bench venv's interpreter.
    return [str(venv / "bin" / "python"), str(pathlib.Path(__file__).resolve()), "run-server",
            "--model", args.gguf, "--host", "127.0.0.1", "--port", str(args.port), "--n_threads", str(args.threads),
            "--n_ctx", str(args.ctx), "--model_alias", args.alias,
            # By default a new request interrupts the one being generated (its stream just ends early);
            # queue them instead, as deepinfer serve never drops a request.
            "--interrupt_requests", "False"]


def run_server_without_repacking(server_args):
    """llama_cpp.server with the model's extra buffer types (CPU weight repacking) off. With them on, the
    vendored llama.cpp aborts while reserving the deepseek4 graph on the CPU (ggml-backend.cpp:
    GGML_ASSERT(*cur_backend_id != -1), an op on a repacked weight that no backend takes); without them it
    loads and generates. llama_cpp.server has no flag for it, so the default model parameters are patched."""
    import runpy
    from llama_cpp import llama_cpp as capi
    import llama_cpp.llama as llama_module

    default_params = capi.llama_model_default_params

    def without_repacking():
        params = default_params()
        params.use_extra_bufts = False
        return params

    capi.llama_model_default_params = without_repacking
    llama_module.llama_cpp.llama_model_default_params = without_repacking
    sys.argv = ["llama_cpp.server", *server_args]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


def serve(args):
    sys.exit(subprocess.run(server_command(args)).returncode)


def wait_ready(url, proc, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url + "/v1/models", timeout=5) as r:
                if r.status == 200:
                    return True
        except OSError:
            time.sleep(0.5)
    return False


def bench(args, extra):
    url = f"http://127.0.0.1:{args.port}"
    log = open(args.out + ".server.log", "w")
    proc = subprocess.Popen(server_command(args), stdout=log, stderr=subprocess.STDOUT)
    try:
        if not wait_ready(url, proc, 600):
            sys.exit(f"llama_cpp.server did not come up; see {args.out}.server.log")
        cmd = [args.deepinfer, "bench", "server", "--url", url, "--system",
               f"llama.cpp (llama-cpp-python {LLAMA_CPP_PYTHON}, llama_cpp.server, {args.threads} threads)",
               "--json", args.out, *extra]
        print("+", " ".join(cmd), flush=True)
        rc = subprocess.run(cmd).returncode
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
    sys.exit(rc)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "run-server":
        run_server_without_repacking(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--venv", help="the bench venv (default .venv-bench or $DEEPINFER_BENCH_VENV)")
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("convert")
    c.add_argument("model_dir")
    c.add_argument("out")
    c.add_argument("--outtype", default="f32", choices=["f32", "bf16", "f16", "q8_0"])
    for name in ("serve", "bench"):
        p = sub.add_parser(name)
        p.add_argument("gguf")
        p.add_argument("--port", type=int, default=8011)
        p.add_argument("--threads", type=int, default=2)
        p.add_argument("--ctx", type=int, default=4096)
        p.add_argument("--alias", default="deepinfer-small")
        if name == "bench":
            p.add_argument("--out", required=True)
            p.add_argument("--deepinfer", default=str(ROOT / "build" / "release" / "bin" / "deepinfer"))
    args, extra = parser.parse_known_args()
    if args.command == "convert":
        convert(args)
    elif args.command == "serve":
        serve(args)
    else:
        bench(args, extra)


if __name__ == "__main__":
    main()
