"""Where a running `grandbo serve` serves, recorded in its data directory, so that every
command that talks to it (`grandbo sign --curl`, `smoke --local`, `people link`) finds it
on whatever ports it was started (issue 45: `make run PORT=9300` moved only the API).

`serving.json` holds the runner's process id and its API's and console's addresses; it is
written once both are bound and removed when the runner stops. A record whose process is
gone (a runner killed outright) is ignored.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import asdict, dataclass
from pathlib import Path

SERVING_FILE = "serving.json"
API_URL = "http://127.0.0.1:8787"
CONSOLE_URL = "http://127.0.0.1:8790"


@dataclass(frozen=True, slots=True)
class Serving:
    pid: int
    api: str
    console: str | None
    data_dir: str
    # when the process started (clock ticks since boot, /proc/<pid>/stat): a pid reused by
    # another program has another start; None where /proc does not tell
    started: int | None = None


def record(data_dir: Path, api: str, console: str | None) -> None:
    """This process serves `api` (and `console`) from `data_dir`: written whole, then
    renamed into place (a reader never sees half of it)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / SERVING_FILE
    partial = path.with_suffix(".tmp")
    partial.write_text(
        json.dumps(
            asdict(
                Serving(
                    os.getpid(),
                    api,
                    console,
                    str(data_dir.resolve()),
                    _started(os.getpid()),
                )
            )
        )
    )
    partial.replace(path)


def forget(data_dir: Path) -> None:
    """The record removed, if it is this process's."""
    found = running(data_dir)
    if found is not None and found.pid == os.getpid():
        (data_dir / SERVING_FILE).unlink(missing_ok=True)


def running(data_dir: Path) -> Serving | None:
    """The runner serving `data_dir`, if one is (its record read, its process alive)."""
    try:
        raw = json.loads((data_dir / SERVING_FILE).read_text())
        found = Serving(
            pid=int(raw["pid"]),
            api=str(raw["api"]),
            console=None if raw.get("console") is None else str(raw["console"]),
            data_dir=str(raw.get("data_dir", data_dir)),
            started=None if raw.get("started") is None else int(raw["started"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return found if _alive(found.pid, found.started) else None


def _started(pid: int) -> int | None:
    """The process's start (field 22 of /proc/<pid>/stat, after the command's parentheses),
    or None where /proc does not tell."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _alive(pid: int, started: int | None = None) -> bool:
    """Whether `pid` is the live Grandbo runner that wrote the record: a runner killed
    without its cleanup leaves its record, and its pid may since be another program's
    (where /proc tells: the same start, else a command line naming grandbo)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    now = _started(pid)
    if started is not None and now is not None:
        return now == started
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # no /proc (macOS): the pid is all there is to go by
        return True
    return b"grandbo" in command


def api_url(data_dir: Path, given: str | None) -> str:
    """The API a command talks to: the one it was given, else the running runner's, else
    the default."""
    found = running(data_dir)
    return _address(given, None if found is None else found.api, API_URL)


def default_note(data_dir: Path, given: str | None) -> str | None:
    """What a command says (on stderr) when it talks to the default address because no
    runner serves `data_dir` and none was given; None when it was given one, or one runs."""
    if given or running(data_dir) is not None:
        return None
    return f"no runner serves {data_dir} (make run, or grandbo serve): the default address"


def console_url(data_dir: Path, given: str | None) -> str:
    """The console a link points at: the one given, else the running runner's, else the
    default."""
    found = running(data_dir)
    return _address(given, None if found is None else found.console, CONSOLE_URL)


def _address(given: str | None, recorded: str | None, default: str) -> str:
    """The address given, else the one recorded (an http(s) one only), else the default."""
    if given:
        return given
    return recorded if recorded and recorded.startswith(("http://", "https://")) else default


def port_in_use(host: str, port: int) -> bool:
    """Whether `host:port` is taken (a bind to it fails); port 0 never is."""
    if port == 0:
        return False
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


def port_holder(port: int) -> tuple[int, str] | None:
    """The process listening on TCP `port` (IPv4 or IPv6) and its command line, where
    /proc tells (Linux, and a process this user may read); else None."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            # local address "HEX:PORT", state 0A is LISTEN, the socket's inode tenth
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].split(":")[1], 16) == port:
                inodes.add(fields[9])
    if not inodes:
        return None
    wanted = {f"socket:[{inode}]" for inode in inodes}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            links = {os.readlink(fd) for fd in (proc / "fd").iterdir()}
        except OSError:
            continue
        if links & wanted:
            try:
                command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                command = ""
            return int(proc.name), command.strip()
    return None


def busy_port_message(host: str, port: int, what: str, data_dir: Path) -> str:
    """One line naming the busy port and, when a Grandbo holds it, which: this data
    directory's (its record), or another (its process and command line, from /proc);
    another program is never blamed as a Grandbo."""
    holder = running(data_dir)
    ours = holder is not None and any(
        url is not None and url.rstrip("/").endswith(f":{port}")
        for url in (holder.api, holder.console)
    )
    by = ""
    if holder is not None and ours:
        by = f"; this data directory's Grandbo (pid {holder.pid}) serves {holder.api}"
    else:
        found = port_holder(port)
        if found is not None and "grandbo" in found[1]:
            by = f"; another Grandbo holds it (pid {found[0]}: {found[1][:200]})"
    return (
        f"grandbo serve: {what} port {port} on {host} is in use{by}: stop it, or choose "
        f"another (make run PORT=... CONSOLE_PORT=..., or --port / --console-port)"
    )
