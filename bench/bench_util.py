"""Helpers the side-by-side bench scripts share: a free loopback port, the synthetic peer-shape model,
waiting for a server to answer. Standard library only."""
import os, shutil, socket, subprocess, sys, time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def peer_model(llamay, tmp, model=None):
    """`model` when given, else a synthetic Q8_0 model of the peer shape written into `tmp`."""
    if model:
        return model
    path = os.path.join(tmp, "peer-q8_0.gguf")
    subprocess.run([llamay, "model", "synth", "--type", "q8_0", "-o", path], check=True, stdout=subprocess.DEVNULL)
    return path


def peer_env(peer, model):
    """The environment for running the peer (`peer`: its llama-server or llama-bench wrapper) on `model`:
    on VMs that list AMX but fault on it, the peer's AVX-512 build dies with SIGILL (exit 132) on quantised
    files, so a one-off llama-bench probe on `model` decides; then LLAMA_PEER_VARIANT=avx2, said on stderr.
    Unchanged when the caller set LLAMA_PEER_VARIANT."""
    env = dict(os.environ)
    if env.get("LLAMA_PEER_VARIANT"):
        return env
    bench = os.path.join(os.path.dirname(os.path.abspath(peer)), "llama-bench")
    if not os.path.exists(bench):
        return env
    rc = subprocess.run([bench, "-m", model, "-p", "8", "-n", "0", "-r", "1"], stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL).returncode
    if rc in (132, -4):  # SIGILL, as the shell reports it or as Python does
        print("the peer's AVX-512 build faults here (SIGILL); using LLAMA_PEER_VARIANT=avx2", file=sys.stderr)
        env["LLAMA_PEER_VARIANT"] = "avx2"
    return env


def wait_up(client, proc, what, path="/health"):
    """Polls `path` through `client` (restore_bench.Client) until it answers; exits if `proc` dies."""
    for _ in range(600):
        if proc.poll() is not None:
            sys.exit(f"{what} exited early ({proc.returncode})")
        try:
            client.req("GET", path)
            return
        except Exception:
            time.sleep(0.1)
    sys.exit(f"{what} did not come up")


def stop(procs, tmp):
    """Terminates the processes a script started (the last started first) and removes its scratch folder."""
    for p in reversed(procs):
        p.terminate()
    for p in procs:
        p.wait()
    shutil.rmtree(tmp, ignore_errors=True)
