"""The upscale loop on LTX-2.3 and LTX-2.5 (issue 42): the example workflows ltx2_3_mgpu_upscale_video (x2
1.1, and x1.5 in the same graph), ltx2_3_mgpu_upscale_video_temporal and ltx2_5_mgpu_upscale_video run headless
in a real ComfyUI on make-tiny's files under their released names (opt-in: COMFYUI_PATH).

Each posts its API twin at CPU scale (tests/test_comfyui_workflows.py tiny_scale: 2 CPU workers, float32)
on the session's workflow server, whose input.mp4 is 192x128, 17 frames at 24 fps with a 16 kHz tone. The
saved mp4 is read back: frame count, size, frame rate, audio. One tile = native for each upscaler is
tests/test_ltx23_nodes.py's and test_ltx25_tdp's business; here the whole loop as an artist runs it:
a re-queue with other tiles, seed or first sigma reloads nothing and the console says what it reused.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from comfyui_harness import ComfyUIServer, link_models, saved_files, status_message
from test_comfyui_workflows import API, FRAMES, HEIGHT, TIMEOUT_S, WIDTH, tiny_scale
from workflow_server import FPS

from ltx2_mgpu.workers.wire import shm

pytestmark = pytest.mark.comfyui

X15_23 = "ltx-2.3-spatial-upscaler-x1.5-1.0.safetensors"


@pytest.fixture(scope="module")
def server(workflow_server, tiny23, tiny25) -> ComfyUIServer:
    """The session's workflow server with make-tiny's LTX-2.3 and LTX-2.5 files linked in under their
    released names (the tiny Gemma 3 is the LTX-2 workflows' file: the same bytes, the same name)."""
    by_folder: dict[str, list[Path]] = {}
    for path in [*tiny23.released.values(), *tiny25.all()]:
        by_folder.setdefault(path.parent.name, []).append(path)
    link_models(workflow_server.layout, by_folder)
    return workflow_server


def graph_of(name: str, video: str = "input.mp4", sigmas: str | None = None, **tdp: object) -> dict:
    """The workflow's API twin at CPU scale, on `video` from the input folder, with `tdp` inputs changed."""
    graph = tiny_scale(json.loads((API / f"{name}.json").read_text()))
    for node in graph.values():
        if node["class_type"] == "LTX2TDPUpscaler":
            node["inputs"].update(tdp)
        elif node["class_type"] == "LoadVideo":
            node["inputs"]["file"] = video
        elif node["class_type"] == "ManualSigmas" and sigmas is not None:
            node["inputs"]["sigmas"] = sigmas
    return graph


def write_video(path: Path, width: int, height: int, frames: int, audio: bool) -> None:
    import av
    import numpy as np

    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=FPS)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        sound = container.add_stream("aac", rate=16000) if audio else None
        packets = []
        ramp = np.linspace(0, 255, width * height * 3).reshape(height, width, 3).astype(np.uint8)
        for i in range(frames):
            packets += stream.encode(av.VideoFrame.from_ndarray(np.roll(ramp, 4 * i, axis=1), format="rgb24"))
        packets += stream.encode()
        if sound is not None:
            sound.layout = "mono"
            tone = (0.2 * np.sin(np.arange(int(16000 * frames / FPS)) * 0.05)).astype(np.float32)[None]
            samples = av.AudioFrame.from_ndarray(tone, format="flt", layout="mono")
            samples.sample_rate = 16000
            packets += [*sound.encode(samples), *sound.encode()]
        for packet in packets:
            container.mux(packet)


def run_to_error(server: ComfyUIServer, graph: dict) -> dict:
    entry = server.wait_done(server.queue_prompt(graph), TIMEOUT_S)
    error = status_message(entry, "execution_error")
    assert error is not None, entry["status"]
    return error


def run(server: ComfyUIServer, graph: dict) -> Path:
    entry = server.run_prompt(graph, TIMEOUT_S)
    files = saved_files(entry, server.layout.output)
    assert len(files) == 1, entry.get("status")
    return files[0]


def probe(path: Path) -> dict:
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        audio = container.streams.audio
        return {
            "frames": sum(1 for _ in container.decode(video=0)),
            "size": (stream.codec_context.width, stream.codec_context.height),
            "fps": float(stream.average_rate),
            "audio": len(audio) == 1,
        }


def test_ltx23_upscale_video_x2_keeps_frames_rate_and_audio(server):
    assert probe(run(server, graph_of("ltx2_3_mgpu_upscale_video"))) == {
        "frames": FRAMES, "size": (2 * WIDTH, 2 * HEIGHT), "fps": FPS, "audio": True,
    }  # fmt: skip


def test_ltx23_upscale_video_x15(server):
    # 6 x 4 latent cells -> ceil(3 x 6 / 2) x ceil(3 x 4 / 2) = 9 x 6 cells of 32 px
    assert probe(run(server, graph_of("ltx2_3_mgpu_upscale_video", upscale_model=X15_23))) == {
        "frames": FRAMES, "size": (WIDTH * 3 // 2, HEIGHT * 3 // 2), "fps": FPS, "audio": True,
    }  # fmt: skip


def test_ltx23_temporal_upscale_doubles_frames_and_rate(server):
    """3 latent frames -> 5: 2 x 17 - 1 = 33 frames at 48 fps, the same length in seconds as the source,
    its audio kept."""
    assert probe(run(server, graph_of("ltx2_3_mgpu_upscale_video_temporal"))) == {
        "frames": 2 * FRAMES - 1, "size": (WIDTH, HEIGHT), "fps": 2 * FPS, "audio": True,
    }  # fmt: skip


def test_ltx25_upscale_video_x2(server):
    assert probe(run(server, graph_of("ltx2_5_mgpu_upscale_video"))) == {
        "frames": FRAMES, "size": (2 * WIDTH, 2 * HEIGHT), "fps": FPS, "audio": True,
    }  # fmt: skip


def test_warm_loop_reuses_the_model_the_upscaler_and_the_upsampled_latent(server):
    """The artist's loop: queue, then change tiles, seed and the first sigma and queue again. Nothing
    reloads (no 'loaded ... into' line), the upsampler does not run again, and the console says so."""
    run(server, graph_of("ltx2_3_mgpu_upscale_video", tiles="1x2", seed=0))
    log_start = len(server.log_tail(10_000_000))
    t0 = time.monotonic()
    path = run(server, graph_of("ltx2_3_mgpu_upscale_video", sigmas="0.7, 0.4219, 0.0", tiles="2x2", seed=7))
    requeue_s = time.monotonic() - t0
    log = server.log_tail(10_000_000)[log_start:]
    print(
        f"\nre-queue with other tiles, seed and first sigma: {requeue_s:.2f} s (2 CPU workers, tiny LTX-2.3)"
    )
    assert probe(path)["size"] == (2 * WIDTH, 2 * HEIGHT)
    assert "] loaded " not in log and "no reload" in log, log
    line = re.search(
        r"TDP Upscaler: ltx-2\.3-spatial-upscaler-x2-1\.1 \(x2\), 2x2 tiles on 2 workers, 2 steps.*", log
    )
    assert line is not None, log
    assert line.group(0).endswith("reused the upscaler and the upsampled latent"), line.group(0)


def test_a_video_without_audio_upscales_to_a_video_without_audio(server):
    write_video(server.layout.base / "input" / "silent.mp4", WIDTH, HEIGHT, FRAMES, audio=False)
    assert probe(run(server, graph_of("ltx2_3_mgpu_upscale_video", video="silent.mp4"))) == {
        "frames": FRAMES, "size": (2 * WIDTH, 2 * HEIGHT), "fps": FPS, "audio": False,
    }  # fmt: skip


def test_a_temporal_upscaler_on_a_one_frame_clip_is_refused_by_name(server):
    write_video(server.layout.base / "input" / "one-frame.mp4", WIDTH, HEIGHT, 1, audio=True)
    graph = graph_of("ltx2_3_mgpu_upscale_video_temporal", video="one-frame.mp4")
    run_to_error(server, graph)  # the encoded latent stays in ComfyUI's cache (its segment with it)
    before = set(shm.list_segments(server.pid))
    error = run_to_error(server, graph)
    print(f"\n[server] {error['exception_type']}: {error['exception_message'].strip()}")
    assert error["node_type"] == "LTX2TDPUpscaler" and error["exception_type"] == "ValueError"
    message = error["exception_message"]
    assert "ltx-2.3-temporal-upscaler-x2-1.0.safetensors is a temporal upscaler" in message
    assert "at least 9 video frames" in message
    assert set(shm.list_segments(server.pid)) <= before, "the refused run left a segment in /dev/shm"
    assert before, "no segment of the encoded latent: the check above would prove nothing"


def test_odd_sizes_are_cropped_as_vae_encode_crops_them_and_said_so(server):
    """200 x 136 px, 14 frames: encoded as VAEEncode encodes it (centre 192 x 128, the first 9 frames),
    both crops named on the console, then upscaled 2x with the source's audio."""
    write_video(server.layout.base / "input" / "odd.mp4", 200, 136, 14, audio=True)
    log_start = len(server.log_tail(10_000_000))
    path = run(server, graph_of("ltx2_3_mgpu_upscale_video", video="odd.mp4"))
    assert probe(path) == {"frames": 9, "size": (2 * 192, 2 * 128), "fps": FPS, "audio": True}
    log = server.log_tail(10_000_000)[log_start:]
    assert "dropping the last 5 of 14 frames" in log, log
    assert "centre-cropping 200 x 136 px to 192 x 128" in log, log
