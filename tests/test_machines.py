"""Workers on another machine (NOTE [machines] in workers/wire/machines.py), two "machines" on one box:
this test process is the machine that runs ComfyUI (listening on 127.0.0.1), and `ltx2-mgpu worker
--join` runs as a separate process tree with its own copy of the model files in its own folder, as
the command a user runs on the other machine.

Parity: the TDP Upscaler (tiles dealt over both machines, one all_reduce per model call across them)
and Distributed VAE Decode (bands written by the other machine's ranks, merged back) on 1 rank here +
2 there equal the same job on 3 ranks of one machine; the SP Sampler with a guidance group per machine
and ComfyUI's sampler on the loader's MODEL equal native (float32, CPU, the tiny LTX-2 on ComfyUI's
engine).
The same TDP job with the other machine in a network namespace of its own (a veth pair between them;
skipped where namespaces cannot be made): equal, and nothing of this machine listens beyond the address
LTX2_MGPU_LISTEN names. Refusals: a wrong token, another version, another file under the same name: each refused with a message
that says what to change, and nothing is left (no process, no segment). A machine killed mid-job: the
job fails within the heartbeat naming that machine, nothing is left, and the next run on this
machine's workers alone works.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import torch
from comfyui_harness import comfyui_root
from machine_agents import TOKEN, Agent, free_port, listening
from test_comfy_tdp import CFG, SAMPLER, SEED, relative, stage1_inputs
from test_comfyui_native_parity import comfy  # noqa: F401

from conftest import PACK_ROOT, assert_no_leaks
from ltx2_mgpu.workers.group import machine_link
from ltx2_mgpu.workers.group.manager import MGPUModel, get_manager
from ltx2_mgpu.workers.wire import machines
from ltx2_mgpu.workers.wire.comfyui_root import check_comfyui_root

pytestmark = pytest.mark.comfyui

RELATIVE_TOLERANCE = 1e-5
SIGMAS = "0.909375, 0.725, 0.421875, 0.0"


@pytest.fixture(scope="module")
def listen() -> Iterator[str]:
    """This process listens for machine agents on 127.0.0.1 (a fresh port per module)."""
    with listening() as address:
        yield address


@pytest.fixture(scope="module")
def box2_models(tiny, tmp_path_factory) -> Path:
    """The other machine's models folder: its own copies of the files, under the same names."""
    folder = tmp_path_factory.mktemp("box2-models")
    for path in (tiny.checkpoint, tiny.spatial_upscaler):
        shutil.copy(path, folder / path.name)
    return folder


def _model(devices: str, checkpoint: Path) -> MGPUModel:
    root = check_comfyui_root(comfyui_root())
    return MGPUModel.create(
        checkpoint, devices=devices, dtype="float32", backend="comfy", comfyui_root=root.path,
        comfyui_version=root.version,
    )  # fmt: skip


def _load(devices: str, checkpoint: Path) -> MGPUModel:
    """The group started and the model loaded, as the first job on it would."""
    model = _model(devices, checkpoint)
    get_manager().acquire(model)
    return model


def _tdp(comfy, tiny, model: MGPUModel) -> torch.Tensor:  # noqa: F811
    from ltx2_mgpu.nodes.tdp_upscaler import tdp_upscale

    inputs = stage1_inputs()
    (sigmas,) = comfy.cs.ManualSigmas.execute(SIGMAS)
    stage1 = {"samples": comfy.NestedTensor((inputs.video, inputs.audio))}
    (out,) = tdp_upscale(
        model, inputs.positive, inputs.negative, stage1, tiny.spatial_upscaler.name, SAMPLER, CFG, SEED, "1x3", 1,
        sigmas=sigmas,
    )  # fmt: skip
    return out["samples"].tensors[0]


def _decode(model: MGPUModel, latent: torch.Tensor) -> torch.Tensor:
    from ltx2_mgpu.nodes.vae_decode import decode_latent

    images, _audio = decode_latent(model, {"samples": latent}, mode="exact")  # a band of rows per rank
    return images


@pytest.fixture(scope="module")
def one_machine(comfy, tiny) -> dict:  # noqa: F811
    """The reference: the same jobs on 3 ranks of this machine."""
    import folder_paths

    folder_paths.add_model_folder_path("latent_upscale_models", str(tiny.spatial_upscaler.parent))
    model = _model("cpu:3", tiny.checkpoint)
    try:
        video = _tdp(comfy, tiny, model)
        images = _decode(model, video)
    finally:
        get_manager().unload()
        assert_no_leaks()
    return {"video": video, "images": images}


def test_tdp_and_decode_on_two_machines_equal_one(comfy, tiny, listen, box2_models, one_machine, caplog):  # noqa: F811
    agent = Agent(listen, box2_models)
    try:
        model = _model("cpu,box2:cpu:2", tiny.checkpoint)
        with caplog.at_level("INFO", logger="ltx2_mgpu"):
            video = _tdp(comfy, tiny, model)
        images = _decode(model, video)
        info = get_manager().group.worker_info
    finally:
        get_manager().unload()
        agent.stop()
        assert_no_leaks()
    assert [i["device"] for i in info] == ["cpu", "cpu", "cpu"]
    assert "serving ranks [1, 2] (cpu, cpu) of a 3-rank group" in agent.output
    assert "1x3 tiles on 3 workers" in caplog.text and "tiles per machine: this one 1, box2 2" in caplog.text
    tdp_error = relative(video, one_machine["video"])
    decode_error = relative(images, one_machine["images"])
    print(
        f"\n[two machines, 1 + 2 ranks vs 3 ranks on one] TDP 1x3 tiles {tdp_error:.2e}, VAE decode {decode_error:.2e}"
    )
    assert tdp_error <= RELATIVE_TOLERANCE
    assert decode_error <= RELATIVE_TOLERANCE
    assert float(images.abs().max()) > 0  # the bands written over there came back


def test_guidance_groups_and_the_model_output_match_native(comfy, tiny, listen, box2_models):  # noqa: F811
    """The SP Sampler with CFG's two passes on two guidance groups (cond on this machine's rank, uncond on
    the other machine's; one gather per step crosses between them), and ComfyUI's own sampler on the
    loader's MODEL, whose calls run on the group one job each (kept latent slots, outputs merged back)."""
    from test_comfyui_native_parity import errors
    from test_group_model import GRAPHS, run_graph
    from test_sp_sampler_guider import native, sp_sampler

    from ltx2_mgpu.nodes.loader import load_model

    agent = Agent(listen, box2_models)
    replies: list[dict] = []
    try:
        mgpu, model, _info = load_model(tiny.checkpoint.name, "cpu,box2:cpu", "float32")
        assert mgpu.guidance_groups == 2  # a group per machine
        ours = run_graph(comfy, model, GRAPHS["t2v-cfg3"], sample=sp_sampler(mgpu, replies))
        ours_model = run_graph(comfy, model, GRAPHS["t2v-cfg3"])
    finally:
        get_manager().unload()
        agent.stop()
        assert_no_leaks()
    expected = native(comfy, "t2v-cfg3")
    for what, found in (
        ("SP Sampler, guidance groups", errors(ours, expected)),
        ("MODEL", errors(ours_model, expected)),
    ):
        print(f"\n[two machines, {what}] t2v-cfg3: "
              + " | ".join(f"{s} rel {r:.2e}" for s, (_, r) in zip(("video", "audio"), found)))  # fmt: skip
        assert len(found) == 2 and all(rel <= RELATIVE_TOLERANCE for _, rel in found), (what, found)
    assert replies[0]["guidance_groups"] == 2 and replies[0]["parallel_steps"] == 3, replies[0]["guidance"]


NETNS, UI_ADDRESS, BOX2_ADDRESS = "ltx2-mgpu-box2", "10.77.0.1", "10.77.0.2"


@pytest.fixture
def box2_netns() -> Iterator[str]:
    """A network namespace for the other machine, joined to this one by a veth pair (10.77.0.1 here,
    10.77.0.2 there): its processes reach this machine only through that interface."""
    name = f"{NETNS}-{os.getpid()}"
    veth = f"vl2m{os.getpid() % 100000}"
    setup = [
        ["ip", "netns", "add", name],
        ["ip", "link", "add", veth, "type", "veth", "peer", "name", f"{veth}b"],
        ["ip", "link", "set", f"{veth}b", "netns", name],
        ["ip", "addr", "add", f"{UI_ADDRESS}/24", "dev", veth],
        ["ip", "link", "set", veth, "up"],
        ["ip", "netns", "exec", name, "ip", "addr", "add", f"{BOX2_ADDRESS}/24", "dev", f"{veth}b"],
        ["ip", "netns", "exec", name, "ip", "link", "set", f"{veth}b", "up"],
        ["ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"],
    ]
    if shutil.which("ip") is None:
        pytest.skip("no network namespace here: iproute2's ip is not installed")
    try:
        for command in setup:
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode:
                pytest.skip(f"no network namespace here ({' '.join(command)}: {done.stderr.strip()})")
        yield name
    finally:
        subprocess.run(["ip", "link", "del", veth], capture_output=True)
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


def test_two_network_namespaces_and_nothing_listens_beyond_the_named_address(
    comfy,  # noqa: F811
    tiny,
    box2_models,
    one_machine,
    box2_netns,
    monkeypatch,
):
    """The other machine in a network namespace of its own, reaching this one over a veth pair only: the
    TDP Upscaler across it equals one machine's, and every socket this machine's processes listen on
    while the group runs is on the address LTX2_MGPU_LISTEN names."""
    port = free_port()
    monkeypatch.setenv(machines.LISTEN_ENV, f"{UI_ADDRESS}:{port}")
    monkeypatch.setenv(machines.TOKEN_ENV, TOKEN)
    machine_link.join_listener()
    agent = Agent(f"{UI_ADDRESS}:{port}", box2_models, netns=box2_netns)
    try:
        model = _model("cpu,box2:cpu:2", tiny.checkpoint)
        video = _tdp(comfy, tiny, model)
        ours = {os.getpid(), *(p.pid for p in psutil.Process().children(recursive=True))}
        listening = {
            (c.laddr.ip, c.pid)
            for c in psutil.net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN and c.pid in ours
        }
    finally:
        get_manager().unload()
        agent.stop()
        machine_link.close_join_listener()
        assert_no_leaks()
    print(f"\n[two network namespaces] TDP 1x3 tiles {relative(video, one_machine['video']):.2e}; listening "
          f"(address, pid): {sorted(listening)}")  # fmt: skip
    assert {ip for ip, _ in listening} == {UI_ADDRESS}, listening
    assert len({pid for _, pid in listening}) >= 2  # the join listener, and gloo in this machine's rank
    assert relative(video, one_machine["video"]) <= RELATIVE_TOLERANCE


def test_an_agent_with_a_wrong_token_is_refused_and_leaves_nothing(
    tiny, listen, box2_models, monkeypatch, caplog
):
    """Refused at the token check; the group runs on this machine's worker without it and says so, and a
    group of that machine's devices alone cannot start, saying what to run there."""
    monkeypatch.setenv(machines.JOIN_WAIT_ENV, "3")
    agent = Agent(listen, box2_models, token="00" * 32)
    try:
        with caplog.at_level("WARNING", logger="ltx2_mgpu"):
            _load("cpu,box2:cpu", tiny.checkpoint)
        assert get_manager().group.placement.devices == ("cpu",)
        assert "machine box2 has not joined within 3 s: this group runs on cpu without it" in caplog.text
        get_manager().unload()
        with pytest.raises(
            Exception, match=r"machine box2 has not joined within 3 s.*ltx2-mgpu worker --join"
        ):
            _load("box2:cpu", tiny.checkpoint)
        assert agent.proc.wait(30) == 2
    finally:
        get_manager().unload()
        agent.stop()
    assert "did not accept the join token" in agent.output
    assert_no_leaks()


def test_an_agent_of_another_version_is_refused_naming_both(tiny, listen, box2_models, monkeypatch):
    monkeypatch.setenv(machines.JOIN_WAIT_ENV, "3")
    agent = Agent(listen, box2_models, version="0.0.9")
    try:
        _load("cpu,box2:cpu", tiny.checkpoint)  # the listener refuses it; this machine's worker runs alone
        assert agent.proc.wait(60) == 2
        assert get_manager().group.placement.devices == ("cpu",)
    finally:
        get_manager().unload()
        agent.stop()
    assert f"pack '0.0.9' (this machine: '{machines.PACK_VERSION}')" in agent.output
    assert "Install the same version" in agent.output
    assert_no_leaks()


def test_another_file_under_the_same_name_is_refused_naming_both_hashes(tiny, listen, tmp_path):
    models = tmp_path / "box2-models"
    models.mkdir()
    changed = bytearray(tiny.checkpoint.read_bytes())
    changed[-1] ^= 1  # one bit of the last weight
    (models / tiny.checkpoint.name).write_bytes(changed)
    ours, theirs = machines.fingerprint(tiny.checkpoint), machines.fingerprint(models / tiny.checkpoint.name)
    agent = Agent(listen, models)
    try:
        with pytest.raises(ValueError) as refused:
            _load("cpu,box2:cpu", tiny.checkpoint)
        message = str(refused.value)
    finally:
        get_manager().unload()
        agent.stop()
    assert "machine box2" in message and tiny.checkpoint.name in message
    assert ours.sha256 in message and theirs.sha256 in message and "Copy the file" in message
    assert_no_leaks()


def test_a_machine_killed_mid_job_fails_the_job_naming_it_and_this_machine_goes_on(
    comfy,  # noqa: F811
    tiny,
    listen,
    box2_models,
    one_machine,
):
    from ltx2_mgpu.workers.wire.errors import WorkerDied, WorkerGroupError

    agent = Agent(listen, box2_models)
    try:
        model = _load("cpu,box2:cpu", tiny.checkpoint)
        group = get_manager().group
        group.heartbeat_timeout_s = 5.0
        killer = threading.Timer(0.5, agent.kill_tree)
        killer.start()
        started = time.monotonic()
        with pytest.raises(WorkerGroupError) as failed:
            for _ in range(20):  # the kill lands inside one of these jobs
                _tdp(comfy, tiny, model)
        elapsed = time.monotonic() - started
        killer.join()
    finally:
        get_manager().unload()
        agent.stop()
    assert_no_leaks()
    assert isinstance(failed.value, WorkerDied), failed.value
    assert "box2" in str(failed.value)
    assert elapsed < 0.5 + 5.0 + 10.0, f"the error took {elapsed:.1f} s"
    # The same workflow queued again: box2 does not come back, and this machine's worker runs the job alone
    # (the group waits LTX2_MGPU_JOIN_WAIT_S for box2, then starts without it), with one machine's result.
    try:
        with pytest.MonkeyPatch.context() as patches:
            patches.setenv(machines.JOIN_WAIT_ENV, "2")
            video = _tdp(comfy, tiny, model)
            assert get_manager().group.placement.devices == ("cpu",)
            again = _tdp(comfy, tiny, model)  # the group is kept: no wait, no reload
    finally:
        get_manager().unload()
        assert_no_leaks()
    assert relative(video, one_machine["video"]) <= RELATIVE_TOLERANCE
    assert torch.equal(video, again)


def test_device_lists_name_other_machines():
    from ltx2_mgpu.workers.group.launcher import parse_devices

    placement = parse_devices("box2:cpu,0,box2:0-1,box3:cuda:1", available_gpus=1)
    assert placement.devices == ("cuda:0", "box2:cpu", "box2:cuda:0", "box2:cuda:1", "box3:cuda:1")
    assert placement.machines == ("box2", "box3") and placement.local_ranks == (0,)
    for bad, says in (
        ("box2:x", "write box2:0"),
        ("box2:3-1", "lower id first"),
        ("bo!x:0", "cannot name a machine"),
    ):
        with pytest.raises(ValueError, match=says):
            parse_devices(bad, available_gpus=1)


def test_sequence_parallelism_stays_inside_a_machine():
    """The loader's guidance_parallel on a group that spans machines: auto is a group per machine, and
    a choice whose groups a machine boundary would cut is refused naming the ones that fit."""
    two_and_two = ("cpu", "cpu", "box2:cpu", "box2:cpu")
    assert machines.machine_guidance_groups(two_and_two, 0) == 2
    assert machines.machine_guidance_groups(two_and_two, 4) == 4
    assert machines.machine_guidance_groups(("cpu", "cpu"), 0) == 0  # one machine: planned per job
    assert machines.machine_guidance_groups(two_and_two, 1) == 2  # off: each pass would cross machines
    three_and_three = ("cpu",) * 3 + ("box2:cpu",) * 3
    with pytest.raises(
        ValueError, match=r"guidance_parallel 3 would run sequence parallelism across machines.*auto or 2, 6"
    ):
        machines.machine_guidance_groups(three_and_three, 3)
    with pytest.raises(ValueError, match=r"same number of devices in gpus \(now this machine 1, box2 2\)"):
        machines.machine_guidance_groups(("cpu", "box2:cpu", "box2:cpu"), 0)
    assert machines.machine_guidance_groups(("cpu", "box2:cpu", "box2:cpu"), 3) == 3


def test_a_group_without_a_machine_plans_its_guidance_groups_anew():
    """The loader counted a guidance group per machine; a group that started without one of them must
    not ask its ranks for groups they cannot form."""
    from types import SimpleNamespace

    from ltx2_mgpu.workers.group.launcher import Placement
    from ltx2_mgpu.workers.group.manager import _guidance_for

    asked = Placement(("cpu", "cpu", "box2:cpu", "box2:cpu", "box3:cpu", "box3:cpu"))
    wire = {"guidance_groups": 3, "seed": 1}
    whole = SimpleNamespace(placement=asked, requested_placement=asked)
    assert _guidance_for(whole, wire) is wire
    without_box3 = SimpleNamespace(placement=Placement(asked.devices[:4]), requested_placement=asked)
    assert _guidance_for(without_box3, wire) == {"guidance_groups": 2, "seed": 1}  # one per machine left
    alone = SimpleNamespace(placement=Placement(asked.devices[:2]), requested_placement=asked)
    assert _guidance_for(alone, wire) == {"guidance_groups": 0, "seed": 1}  # one machine: planned per job


def test_every_output_field_is_named_as_one():
    """Other machines send back only what their ranks wrote into output fields, told by the name."""
    import dataclasses

    from ltx2_mgpu.workers.wire.requests import OUTPUT_PREFIX, REQUESTS

    outputs = {f"{cls.__name__}.{f.name}" for cls in REQUESTS.values() for f in dataclasses.fields(cls)
               if re.search(r"\bOutput\b", str(f.type))}  # fmt: skip
    assert {"VaeDecode.out_image", "ComfyModelCall.out", "EncodeText.outputs"} <= outputs
    assert [name for name in outputs if not name.split(".")[1].startswith(OUTPUT_PREFIX)] == []
    inputs = {f"{cls.__name__}.{f.name}" for cls in REQUESTS.values() for f in dataclasses.fields(cls)
              if not re.search(r"\bOutput\b", str(f.type)) and f.name.startswith(OUTPUT_PREFIX)}  # fmt: skip
    assert inputs == set()


def test_the_pack_version_is_pyprojects():
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    with open(PACK_ROOT / "pyproject.toml", "rb") as f:
        assert tomllib.load(f)["project"]["version"] == machines.PACK_VERSION


def test_the_loader_refuses_other_machines_without_a_listening_address(comfy, tiny, monkeypatch):  # noqa: F811
    """Nothing listens on a network unless the user names where: the loader says what to set, before any
    worker starts."""
    from ltx2_mgpu.nodes.loader import load_model

    monkeypatch.delenv(machines.LISTEN_ENV, raising=False)
    with pytest.raises(ValueError, match="set LTX2_MGPU_LISTEN=ADDRESS:PORT"):
        load_model(tiny.checkpoint.name, "cpu,box2:cpu", "float32")
    assert get_manager().group is None
