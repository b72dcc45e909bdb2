"""Which attention function the workers run (NOTE [attention backend]; opt-in: COMFYUI_PATH).

ComfyUI started with an attention flag (--use-sage-attention, --use-flash-attention,
--use-ck-attention...) runs that function for LTX's blocks; the workers run the same one. On the CPU
the flag is stood in for by ComfyUI's split attention, which every ComfyUI registers: set as the
ComfyUI process's function, the workers report it as theirs and the MGPU MODEL samples as native
does with it. A function the workers cannot provide is refused at load, by name.
"""

from __future__ import annotations

import pytest
from test_comfyui_native_parity import comfy  # noqa: F401
from test_group_model import RELATIVE_TOLERANCE, Graph, errors, run_graph

from conftest import assert_no_leaks
from ltx2_mgpu.workers.group.launcher import ATTENTION_ENV, comfyui_attention_env
from ltx2_mgpu.workers.group.manager import get_manager

pytestmark = pytest.mark.comfyui


@pytest.fixture
def comfyui_attention(comfy):  # noqa: F811
    """Sets the ComfyUI process's attention function (what its command-line flag does) for a test."""
    import comfy.ldm.modules.attention as attention

    saved = attention.optimized_attention, attention.optimized_attention_masked
    get_manager().unload()  # a group starts with the choice of the moment it starts

    def choose(name: str) -> None:
        attention.optimized_attention = attention.optimized_attention_masked = (
            attention.get_attention_function(name)
        )

    yield choose
    attention.optimized_attention, attention.optimized_attention_masked = saved
    get_manager().unload()
    assert_no_leaks()


def test_the_default_attention_travels_as_nothing(comfyui_attention):
    comfyui_attention("pytorch")
    assert comfyui_attention_env() == {}
    comfyui_attention("split")
    assert comfyui_attention_env() == {ATTENTION_ENV: "split"}


def test_comfyuis_attention_flag_reaches_the_workers(comfy, tiny, comfyui_attention):  # noqa: F811
    from ltx2_mgpu.nodes.loader import load_model

    comfyui_attention("split")
    _mgpu, model, _info = load_model(tiny.checkpoint.name, "cpu:2", "float32")
    native = run_graph(comfy, comfy.model, Graph(sampler="euler"))
    ours = run_graph(comfy, model, Graph(sampler="euler"))
    replies = model.model.diffusion_model.call.last_replies
    assert [reply["attention"] for reply in replies] == ["split", "split"]
    assert all(rel <= RELATIVE_TOLERANCE for _, rel in errors(ours, native))


def test_an_attention_the_workers_lack_is_refused_at_load(tiny, comfyui_attention):
    from ltx2_mgpu.nodes.loader import load_model

    manager = get_manager()
    manager.env[ATTENTION_ENV] = "no_such_attention"
    try:
        with pytest.raises(
            ValueError, match=r"attention function 'no_such_attention'.*Start ComfyUI without"
        ):
            load_model(tiny.checkpoint.name, "cpu:2", "float32")
    finally:
        manager.env.pop(ATTENTION_ENV, None)
