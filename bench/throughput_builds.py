"""The local runner's throughput at 32 clients, this build against another, in one run.

    git worktree add /tmp/base ff485b6     # the build to compare with
    .venv/bin/python -m bench.throughput_builds --baseline /tmp/base [--standby]

Each round starts `grandbo serve` from the baseline's source (its `shared/` and
functions first on PYTHONPATH) on a fresh data directory, then from this checkout (with
`--standby`: questions read from a streaming standby, as Aurora's reader endpoint serves
them in AWS), and drives each with `bench.local_load`'s mix (90 % questions, 10 % signed
admin creates) from --clients clients for --seconds. Rounds alternate the two builds, so a
slow spell of a shared machine lands on both; the medians over --rounds are printed side
by side, with the ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

from bench.local_load import (
    Client,
    Phase,
    free_port,
    run_phase,
    start_serve,
    wait_until_serving,
)
from grandbo.api.auth import Keyring


def one_round(source: Path | None, standby: bool, clients: int, seconds: float) -> Phase:
    """One build served and loaded: the phase measured."""
    data_dir = Path(tempfile.mkdtemp(prefix="grandbo-builds-"))
    port = free_port()
    env = dict(os.environ)
    if source is not None:  # the other build's code first on the path
        env["PYTHONPATH"] = os.pathsep.join([str(source / "shared"), str(source)])
    arguments = ["serve", "--port", str(port), "--no-console"]
    if standby:
        arguments.append("--standby")
    serve = start_serve(data_dir, arguments, env=env, cwd=source or Path.cwd())
    try:
        wait_until_serving(port, serve, timeout=300)
        keyring = Keyring.from_json((data_dir / "keyring.json").read_text())
        client = Client(port, keyring, data_dir)
        # a build without the setting refuses it, and counts nothing
        client.raise_query_rate()
        return run_phase(client, Phase(f"{clients} clients", clients), seconds)
    finally:
        serve.terminate()
        serve.wait(timeout=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--baseline", type=Path, required=True, help="the other build's tree")
    parser.add_argument("--standby", action="store_true", help="this build reads a standby")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    rates: dict[str, list[float]] = {"baseline": [], "this build": []}
    errors: dict[str, int] = {"baseline": 0, "this build": 0}
    for n in range(args.rounds):
        for name, source, standby in (
            ("baseline", args.baseline, False),
            ("this build", None, args.standby),
        ):
            phase = one_round(source, standby, args.clients, args.seconds)
            rate = len(phase.latencies) / phase.elapsed
            rates[name].append(rate)
            errors[name] += phase.errors
            print(f"round {n + 1} {name:<11} {rate:6.1f} requests/s, errors {phase.errors}")
    base = statistics.median(rates["baseline"])
    mine = statistics.median(rates["this build"])
    print(
        f"\nmedian of {args.rounds} rounds, {args.clients} clients: baseline {base:.1f}, "
        f"this build{' (standby reads)' if args.standby else ''} {mine:.1f} requests/s "
        f"({mine / base:.2f}x); errors {errors['baseline']} / {errors['this build']}"
    )


if __name__ == "__main__":
    main()
