"""Workers on other machines (NOTE [machines]): the names in a device list, the join token, the versions
that must match, and the fingerprint that proves two machines hold the same model file.

NOTE [machines]: a worker group may hold ranks on other machines. On each other machine one command,
`ltx2-mgpu worker --join HOST:PORT`, connects to the UI machine, which listens only where
LTX2_MGPU_LISTEN says. The connection proves the join token both ways (HMAC challenge) before any
message is read; messages are plain dicts (wire/protocol.py: no object is ever unpickled). That machine
agent (workers/group/machine_agent.py) starts the machine's ranks as the UI machine starts its own and
relays for them: commands and replies, heartbeats, cancel, the rendezvous store (the ranks' only
rendezvous: no store listens on a port), input tensors (sent once per machine and job) and what its
ranks wrote into output tensors (workers/group/machine_link.py). The ranks form one torch.distributed
group over gloo or NCCL, bound to the interface of that connection. Model files are not sent: each
machine loads its own copy, found by name in its models folders and checked by size and SHA-256
against the UI machine's before any rank sees the command.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import threading
from dataclasses import dataclass
from pathlib import Path

from .protocol import PROTOCOL_VERSION

# The pack's version (pyproject.toml's; tests/test_machines.py checks they agree). A machine agent of
# another version is refused: its ranks would run other code in the same collectives.
PACK_VERSION = "0.1.0"
# The messages between a machine agent and the UI machine (workers/group/machine_link.py).
JOIN_PROTOCOL = 1

LISTEN_ENV = "LTX2_MGPU_LISTEN"
TOKEN_ENV = "LTX2_MGPU_JOIN_TOKEN"
TOKEN_FILE_ENV = "LTX2_MGPU_JOIN_TOKEN_FILE"
JOIN_WAIT_ENV = "LTX2_MGPU_JOIN_WAIT_S"
DEFAULT_JOIN_WAIT_S = 30.0

_NAME_RE = re.compile(r"^[a-z][a-z0-9_.-]{0,62}$")
_RESERVED = {"cpu", "cuda", "all"}


def check_machine_name(name: str) -> str:
    """A machine's name as device lists write it ("box2"): lowercase letters, digits, '_', '.', '-'."""
    text = name.strip().lower()
    if not _NAME_RE.match(text) or text in _RESERVED:
        raise ValueError(
            f"{name!r} cannot name a machine: use letters, digits, '_', '.' or '-', starting with a letter, "
            f"and not {', '.join(sorted(_RESERVED))}"
        )
    return text


def split_device(device: str) -> tuple[str, str]:
    """("box2", "cuda:0") for "box2:cuda:0"; ("", device) for a device of this machine."""
    head, sep, rest = device.partition(":")
    if sep and head not in _RESERVED and not head.isdigit():
        return head, rest
    return "", device


def remote_devices(machine: str, spec: str) -> list[str]:
    """The devices one item of a device list names on `machine`: "0-3" (GPUs 0 to 3), "2" (GPU 2),
    "cuda:1", "cpu" (one CPU rank) or "cpu:2" (two). Returned as "<machine>:cuda:<id>" / "<machine>:cpu"."""
    name = check_machine_name(machine)
    text = spec.strip().lower()
    if text == "cpu" or text.startswith("cpu:"):
        count_text = text.partition(":")[2] or "1"
        if not count_text.isdigit() or int(count_text) < 1:
            raise ValueError(f"{machine}:{spec}: 'cpu:N' needs a whole number N of at least 1")
        return [f"{name}:cpu"] * int(count_text)
    text = text.removeprefix("cuda:")
    first, dash, last = text.partition("-")
    if not first.isdigit() or (dash and not last.isdigit()):
        raise ValueError(
            f"{machine}:{spec} is not a device of machine {machine}: write {machine}:0, {machine}:0-3, "
            f"{machine}:cuda:1 or {machine}:cpu"
        )
    ids = range(int(first), int(last if dash else first) + 1)
    if not ids:
        raise ValueError(f"{machine}:{spec}: the range is empty; write the lower id first ({machine}:0-3)")
    return [f"{name}:cuda:{i}" for i in ids]


def machine_sizes(devices: tuple[str, ...]) -> dict[str, int]:
    """Ranks per machine in rank order ("" is this machine), for a device list of launcher.Placement."""
    sizes: dict[str, int] = {}
    for device in devices:
        machine = split_device(device)[0]
        sizes[machine] = sizes.get(machine, 0) + 1
    return sizes


def machine_guidance_groups(devices: tuple[str, ...], choice: int) -> int:
    """The guidance groups (NOTE [machines]: sequence parallelism stays inside a machine) of a group that
    spans machines: `choice` 0 (auto) gives one group per machine; n must give groups that no machine
    boundary cuts; 1 (off) is read as auto there, since every pass would cross machines. ValueError saying
    what to choose; `choice` unchanged for a group on one machine."""
    sizes = machine_sizes(devices)
    if len(sizes) < 2:
        return choice
    world = len(devices)
    named = ", ".join(f"{m or 'this machine'} {n}" for m, n in sizes.items())
    fits = [
        g
        for g in range(1, world + 1)
        if world % g == 0 and all(n % (world // g) == 0 for n in sizes.values())
    ]
    if choice in (0, 1):  # auto, or off: passes one after another would each cross the machines
        if len(set(sizes.values())) != 1:
            raise ValueError(
                f"a group that spans machines runs one guidance group per machine, since sequence parallelism "
                f"stays inside a machine: give every machine the same number of devices in gpus (now {named})"
            )
        return len(sizes)
    if choice not in fits:
        raise ValueError(
            f"guidance_parallel {choice} would run sequence parallelism across machines "
            f"(ranks per machine: {named}); choose auto or {', '.join(map(str, [g for g in fits if g > 1]))}"
        )
    return choice


def listen_address(value: str | None = None) -> tuple[str, int]:
    """(host, port) from LTX2_MGPU_LISTEN ("192.168.1.10:7860" or "[::1]:7860"), or ValueError saying
    what to set. There is no default: nothing listens on a network unless the user names where."""
    text = (os.environ.get(LISTEN_ENV, "") if value is None else value).strip()
    if not text:
        raise ValueError(
            f"workers on other machines join this one over the network: set {LISTEN_ENV}=ADDRESS:PORT to the "
            f"address of this machine's interface they reach (for example {LISTEN_ENV}=192.168.1.10:7870) "
            "and restart ComfyUI"
        )
    return parse_host_port(text, LISTEN_ENV)


def parse_host_port(text: str, what: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{what}={text!r}: write ADDRESS:PORT, for example 192.168.1.10:7870")
    return host, int(port)


def default_token_file() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "ltx2-mgpu" / "join_token"


def token_file() -> Path:
    return Path(os.environ.get(TOKEN_FILE_ENV) or default_token_file())


def read_token(*, create: bool) -> bytes:
    """The join token: LTX2_MGPU_JOIN_TOKEN, else the token file (LTX2_MGPU_JOIN_TOKEN_FILE, by default
    ~/.config/ltx2-mgpu/join_token). `create`: the UI machine writes a new random token there (mode 0600)
    when there is none; a machine agent never does (ValueError naming both places)."""
    text = os.environ.get(TOKEN_ENV, "").strip()
    if text:
        return _checked_token(text, TOKEN_ENV)
    path = token_file()
    if path.exists():
        return _checked_token(path.read_text().strip(), str(path))
    if not create:
        raise ValueError(
            f"no join token: copy the token file of the machine that runs ComfyUI ({default_token_file()} there) "
            f"to {path} here, or set {TOKEN_ENV}"
        )
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32) + "\n")
    return read_token(create=False)


def _checked_token(text: str, where: str) -> bytes:
    if len(text) < 32:
        raise ValueError(f"the join token in {where} is {len(text)} characters; use at least 32 (a new one: any "
                         "64 hex digits, the same on every machine)")  # fmt: skip
    return text.encode()


@dataclass(frozen=True)
class Fingerprint:
    """What proves two machines hold the same file: its size and SHA-256."""

    size: int
    sha256: str

    def to_wire(self) -> dict:
        return {"size": self.size, "sha256": self.sha256}

    @staticmethod
    def from_wire(value: dict) -> Fingerprint:
        return Fingerprint(int(value["size"]), str(value["sha256"]))


_fingerprints: dict[tuple[str, int, int], Fingerprint] = {}
_fingerprint_lock = threading.Lock()


def fingerprint(path: str | Path) -> Fingerprint:
    """Size and SHA-256 of a file, kept per (path, size, mtime): a 20 GB file is read once per change."""
    real = os.path.realpath(path)
    stat = os.stat(real)
    key = (real, stat.st_size, stat.st_mtime_ns)
    with _fingerprint_lock:
        found = _fingerprints.get(key)
    if found is None:
        digest = hashlib.sha256()
        with open(real, "rb") as f:
            while chunk := f.read(1 << 22):
                digest.update(chunk)
        found = Fingerprint(stat.st_size, digest.hexdigest())
        with _fingerprint_lock:
            _fingerprints[key] = found
    return found


def machine_versions() -> dict:
    """What a machine agent says about itself; the UI machine refuses one whose versions differ."""
    return {"pack": PACK_VERSION, "protocol": PROTOCOL_VERSION, "join": JOIN_PROTOCOL}


def version_mismatch(theirs: dict) -> str | None:
    """A message naming what differs between `theirs` (a machine agent's machine_versions) and ours."""
    ours = machine_versions()
    differ = [f"{key} {theirs.get(key)!r} (this machine: {value!r})" for key, value in ours.items()
              if theirs.get(key) != value]  # fmt: skip
    if not differ:
        return None
    return (
        "its ltx2-mgpu differs: "
        + ", ".join(differ)
        + ". Install the same version of ComfyUI-LTX2-MultiGPU on "
        "both machines"
    )
