"""What the README, the docs and the nodes' tooltips tell a user agree with each other and with the
pack (issue 20 item 8): the front page stays short, every link lands, every figure on it is its result
file's, on the model and engine the result file names."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from comfyui_harness import pack_node_classes

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
# The folder users clone into (README) and the name the README gives the pack in ComfyUI.
PACK_FOLDER = "ComfyUI-LTX2-MultiGPU"
README_NAME = "LTX-2 MultiGPU"
# docs/PERFORMANCE.md: compile_blocks' first-call compile on an H200 host, and the docs that give it.
COMPILE_TIME = "17-23 s"
COMPILE_DOCS = ("NODES.md", "DESIGN.md", "PERFORMANCE.md", "TROUBLESHOOTING.md")
# The front page is for artists first; the rest lives in docs/.
README_MAX_LINES = 150


def section(text: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## )", text, flags=re.S | re.M)
    assert match, f"no '## {title}' section"
    return match.group(1)


def test_the_install_section_says_how_to_get_the_command_line():
    install = section(README, "Install")
    assert f"python -m pip install -e custom_nodes/{PACK_FOLDER}" in install
    assert "ltx2-mgpu doctor" in install and "python -m ltx2_mgpu.cli" in install


def test_the_template_browser_name_is_the_readmes():
    locale = json.loads((ROOT / "locales" / "en" / "main.json").read_text())
    # ComfyUI's frontend titles a pack's example_workflows category with this key (dots as "_").
    assert locale["templateWorkflows"]["category"][PACK_FOLDER] == README_NAME
    assert f"template browser (**{README_NAME}**" in README
    assert f"the nodes appear under **{README_NAME}**" in README


def test_compile_time_in_the_docs_agrees():
    texts = {doc: (ROOT / "docs" / doc).read_text() for doc in COMPILE_DOCS}
    for name, text in texts.items():
        assert COMPILE_TIME in text, f"{name} does not give the measured compile time"
        stale = re.findall(r"(?:about a minute|~\s?20 s|about 20 s)[^.]*", text)
        assert not stale, f"{name}: {stale}"


@pytest.mark.comfyui
def test_compile_time_in_the_tooltip_is_the_docs():
    loader = pack_node_classes()["LTX2MGPULoader"]
    tooltip = loader.INPUT_TYPES()["optional"]["compile_blocks"][1]["tooltip"]
    assert COMPILE_TIME in tooltip and "about a minute" not in tooltip, tooltip


def test_troubleshooting_says_to_separate_an_av_latent_before_savelatent():
    assert "docs/TROUBLESHOOTING.md" in section(README, "Troubleshooting")
    troubleshooting = (ROOT / "docs" / "TROUBLESHOOTING.md").read_text()
    assert "'NestedTensor' object has no attribute 'contiguous'" in troubleshooting
    assert "LTXVSeparateAVLatent" in troubleshooting


# The model files of each release (what the MGPU Loader's ckpt_name starts with), by workflow prefix.
FAMILY_PREFIXES = {"ltx2_mgpu_": "ltx-2-19b", "ltx2_3_mgpu_": "ltx-2.3-", "ltx2_5_mgpu_": "ltx-2.5-"}


def test_example_workflow_names_group_them_by_release():
    """ComfyUI's template browser lists a pack's example workflows as one category, titled by file name,
    with no sub-groups (0.33's /workflow_templates globs example_workflows/*.json one level deep), so the
    release prefix is what groups them (alphabetical sort, search). Each prefix matches the file its
    MGPU Loader loads, and the README lists every workflow."""
    workflows = sorted((ROOT / "example_workflows").glob("*.json"))
    assert workflows
    for path in workflows:
        (prefix,) = [p for p in FAMILY_PREFIXES if path.stem.startswith(p)]
        api = json.loads((ROOT / "example_workflows" / "api" / path.name).read_text())
        (loader,) = [n for n in api.values() if n["class_type"] == "LTX2MGPULoader"]
        assert loader["inputs"]["ckpt_name"].startswith(FAMILY_PREFIXES[prefix]), path.name
        assert f"`{path.stem}`" in README, f"README's example-workflow list lacks {path.stem}"


def test_the_front_page_is_short():
    assert len(README.splitlines()) < README_MAX_LINES


def test_every_relative_link_lands_on_a_file():
    checked = 0
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" in target:
                continue
            assert (page.parent / target).exists(), (
                f"{page.relative_to(ROOT)} links to {target}, which is not there"
            )
            checked += 1
    assert checked >= 10, "the link scan found almost no links: the pattern is broken"


# The README's speed table: the start of each row's first cell -> the result file and job it quotes.
SPEED_ROWS = {
    "`video_ltx2_3_t2v`": ("e2e_ltx23_t2v_h200_pads_skipped.json", "ltx23_t2v", "fp8"),
    "`video_ltx2_5_t2v`": ("e2e_ltx25_t2v_h200_int8_graphs.json", "ltx25_t2v", "int8 convrot"),
    "SGLang's LTX-2.3 job": ("e2e_ltx23_sglang_h200.json", "ltx23_sglang_768x512x121", "fp8"),
}


def test_the_readmes_speed_figures_are_their_result_files():
    """Each row's native and our totals and speed-up are the result file's, which was run on one H200 with
    the weights format the row names (the file's own description of the transformer it timed)."""
    rows = [line for line in section(README, "Speed").splitlines() if line.startswith("| ")]
    for start, (file, job, weights) in SPEED_ROWS.items():
        (row,) = [r for r in rows if r.startswith(f"| {start}")]
        cells = [c.strip() for c in row.strip("|").split("|")]
        report = json.loads((ROOT / "bench" / "results" / file).read_text())
        result = report["jobs"][job]
        assert report["machine"]["gpus"] == ["NVIDIA H200"] and report["gpus"] == "0", file
        assert cells[1:] == [
            f"{result['native']['total_s']:.2f} s",
            f"{result['ours']['total_s']:.2f} s",
            f"{result['speedup_total']:.2f}x",
        ], (start, cells)
        (timed,) = [v for k, v in report["weights"].items() if "-22b-" in k]  # the transformer's file
        assert weights in cells[0] and weights.split()[0] in timed, (start, timed)
    assert "one H200" in section(README, "Speed")


def test_the_readmes_h100_sglang_sentence_is_its_result_file():
    """The SGLang job re-timed on one H100: the sentence's totals, speed-up and upscale stages are the file's."""
    report = json.loads((ROOT / "bench" / "results" / "e2e_ltx23_sglang_h100_unfused_lora.json").read_text())
    result = report["jobs"]["ltx23_sglang_768x512x121"]
    assert report["machine"]["gpus"] == ["NVIDIA H100 80GB HBM3"]
    native, ours = result["native"], result["ours"]
    text = " ".join(section(README, "Speed").split())
    expected = (
        f"one H100**, both sides in one run: native {native['total_s']:.2f} s, ours **{ours['total_s']:.2f} s "
        f"({result['speedup_total']:.2f}x)**; its upscale stage {ours['stages_s']['upscale_stage']:.2f} s against "
        f"{native['stages_s']['upscale_stage']:.2f} s"
    )
    assert expected in text, expected
