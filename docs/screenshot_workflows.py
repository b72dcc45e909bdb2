"""Screenshots of example_workflows/*.json as ComfyUI's UI shows them, for the README (docs/images/).

Starts ComfyUI (--cpu, on 127.0.0.1, every folder it writes to in a temporary base directory, our pack
linked into its custom_nodes: tests/comfyui_harness.py), opens it in headless Chromium driven by
Playwright, loads each workflow, fits the graph to the window and saves
docs/images/<workflow name>.png. It also saves docs/images/missing_models_dialog.png: the t2v workflow
loaded the way a user without the models sees it, with the frontend's missing-models list open (model
names, their folders and Download buttons fed by the URLs in the workflow).

Needs, beside ComfyUI and its virtual environment (psutil and Pillow come with it):
    apt-get install -y chromium                      # Debian's browser, used at /usr/bin/chromium
    <ComfyUI venv>/bin/pip install playwright        # the Python package only; never run
                                                     # `playwright install` (it fetches its own browser)
Regenerate (from the repository root; prints any overlapping nodes or links hidden behind nodes):
    <ComfyUI venv>/bin/python docs/screenshot_workflows.py --comfyui /path/to/ComfyUI
--comfyui defaults to $COMFYUI_PATH; `--only ltx2_mgpu_i2v` takes one workflow; --help for the rest.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from PIL import Image
from playwright.sync_api import Page, sync_playwright

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from comfyui_harness import ComfyUIServer, comfyui_root, make_layout  # noqa: E402

WORKFLOWS = REPO / "example_workflows"
IMAGES = REPO / "docs" / "images"
MISSING_MODELS_WORKFLOW = "ltx2_mgpu_t2v_two_stage"
MISSING_MODELS_PNG = "missing_models_dialog.png"
CHROMIUM = "/usr/bin/chromium"
# Flags that work in a container without a GPU, a sandbox or network access (tried here).
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
)  # fmt: skip
VIEWPORT = {"width": 1920, "height": 1080}
# Rendered at twice the CSS pixels: a wide graph fits at ~0.6 zoom, where 1x text is ~8 px tall.
DEVICE_SCALE = 2
MAX_PNG_BYTES = 400_000  # the README's budget per image
# Frontend settings (names from comfyui_frontend_package 1.49.6) for a clean, legible canvas: no
# first-run template browser, no minimap or FPS overlay, full-detail nodes at any zoom (by default
# text is dropped below ~0.6 zoom), nothing restored from an earlier page load.
SETTINGS = {
    "Comfy.TutorialCompleted": True,
    "Comfy.Minimap.Visible": False,
    "Comfy.Graph.CanvasInfo": False,
    "LiteGraph.Canvas.MinFontSizeForLOD": 0,
    "Comfy.Workflow.Persist": False,
}
# The canvas fills the window; these CSS pixels are covered by the UI's chrome (left sidebar, top
# bar with the Run button, zoom controls bottom right), measured on a 1920x1080 window.
CHROME_INSETS = {"left": 70, "top": 95, "right": 30, "bottom": 75}
FIT_MARGIN = 30  # graph units around the nodes
MAX_ZOOM = 1.0
# Console lines every page load prints here, whatever the workflow (offline fetches, deprecations).
CONSOLE_NOISE = (
    "Failed to load resource",
    "legacy queue/history menu",
    "open_maskeditor",
    "before initialization",
)
APP_TIMEOUT_MS = 120_000
SETTLE_S = 1.5  # DOM widgets (prompt text boxes) and fonts catch up with the canvas


@dataclass(frozen=True)
class Problem:
    """A layout issue seen in the loaded graph: two nodes overlapping, or a link drawn behind a node."""

    workflow: str
    text: str


# ----- the page --------------------------------------------------------------------------------


def open_app(page: Page, url: str) -> None:
    page.goto(url)
    page.wait_for_function(
        "window.app && window.app.vueAppReady && window.app.canvas", timeout=APP_TIMEOUT_MS
    )
    page.evaluate("document.fonts.ready")
    time.sleep(SETTLE_S)
    dismiss_overlays(page)


def load_workflow(page: Page, name: str, graph: dict, *, check_models: bool) -> None:
    """Load a UI-format graph into a tab named after the workflow and close the other tabs.
    check_models=False skips the missing-model scan, so nodes carry no red "missing" outline."""
    missing = page.evaluate(
        "g => g.nodes.map(n => n.type).filter(t => !(t in LiteGraph.registered_node_types))", graph
    )
    if missing:
        raise RuntimeError(f"{name}: node types not registered in ComfyUI (pack not loaded?): {missing}")
    page.evaluate(
        """async ([g, name, skip]) => {
            await window.app.loadGraphData(g, true, true, name, {skipAssetScans: skip});
            const store = window.app.extensionManager.workflow;
            for (const w of [...store.openWorkflows]) if (!store.isActive(w)) await store.closeWorkflow(w);
        }""",
        [graph, name, not check_models],
    )
    time.sleep(SETTLE_S)


def dismiss_overlays(page: Page) -> None:
    """Close toasts and dialogs (first-run templates, errors): they would cover the graph."""
    for _ in range(3):
        open_dialogs = page.locator(".p-dialog:visible, [role=dialog]:visible").count()
        toasts = page.locator(".p-toast-message:visible").count()
        if not open_dialogs and not toasts:
            return
        page.keyboard.press("Escape")
        for close in page.locator(".p-toast-message:visible button").all():
            close.click()
        time.sleep(0.5)


def fit_graph(page: Page, right_inset: float = CHROME_INSETS["right"]) -> float:
    """Zoom and pan so every node (with its title bar and badge) fills the free part of the window;
    returns the zoom. ComfyUI's own fit leaves wide margins, which makes a wide graph needlessly small."""
    insets = dict(CHROME_INSETS, right=right_inset)
    return page.evaluate(
        """([ins, margin, maxZoom]) => {
            const c = window.app.canvas, nodes = window.app.graph._nodes;
            const title = LiteGraph.NODE_TITLE_HEIGHT, badge = 20;
            const x0 = Math.min(...nodes.map(n => n.pos[0])) - margin;
            const y0 = Math.min(...nodes.map(n => n.pos[1] - title - badge)) - margin;
            const x1 = Math.max(...nodes.map(n => n.pos[0] + n.size[0])) + margin;
            const y1 = Math.max(...nodes.map(n => n.pos[1] + n.size[1])) + margin;
            const w = innerWidth - ins.left - ins.right, h = innerHeight - ins.top - ins.bottom;
            const s = Math.min(w / (x1 - x0), h / (y1 - y0), maxZoom);
            c.ds.scale = s;
            c.ds.offset[0] = (ins.left + (w - s * (x1 - x0)) / 2) / s - x0;
            c.ds.offset[1] = (ins.top + (h - s * (y1 - y0)) / 2) / s - y0;
            c.setDirty(true, true);
            return s;
        }""",
        [insets, FIT_MARGIN, MAX_ZOOM],
    )


def layout_problems(page: Page, workflow: str) -> list[Problem]:
    """Overlapping nodes, and links whose curve (litegraph's spline: horizontal tangents a quarter
    of the distance long) runs through a third node, where the node hides it."""
    found = page.evaluate(
        """() => {
            const g = window.app.graph, title = LiteGraph.NODE_TITLE_HEIGHT, out = [];
            const box = n => [n.pos[0], n.pos[1] - title, n.pos[0] + n.size[0], n.pos[1] + n.size[1]];
            const name = n => `${n.title} (#${n.id})`;
            const inside = (p, b) => p[0] > b[0] + 4 && p[0] < b[2] - 4 && p[1] > b[1] + 4 && p[1] < b[3] - 4;
            const nodes = g._nodes;
            for (let i = 0; i < nodes.length; i++) for (let j = i + 1; j < nodes.length; j++) {
                const a = box(nodes[i]), b = box(nodes[j]);
                const dx = Math.min(a[2], b[2]) - Math.max(a[0], b[0]);
                const dy = Math.min(a[3], b[3]) - Math.max(a[1], b[1]);
                if (dx > 0 && dy > 0) out.push(`nodes overlap by ${dx}x${dy}: ${name(nodes[i])} and ${name(nodes[j])}`);
            }
            const links = g.links instanceof Map ? [...g.links.values()] : Object.values(g.links);
            for (const l of links) {
                const src = g.getNodeById(l.origin_id), dst = g.getNodeById(l.target_id);
                const a = src.getConnectionPos(false, l.origin_slot), b = dst.getConnectionPos(true, l.target_slot);
                const d = Math.hypot(b[0] - a[0], b[1] - a[1]) * 0.25;
                const c1 = [a[0] + d, a[1]], c2 = [b[0] - d, b[1]];
                const hidden = new Set();
                for (let k = 1; k < 40; k++) {
                    const t = k / 40, u = 1 - t;
                    const p = [0, 1].map(i => u*u*u*a[i] + 3*u*u*t*c1[i] + 3*u*t*t*c2[i] + t*t*t*b[i]);
                    for (const n of nodes) if (n !== src && n !== dst && inside(p, box(n))) hidden.add(name(n));
                }
                if (hidden.size) out.push(`link ${name(src)} -> ${name(dst)}.${dst.inputs[l.target_slot].name} runs behind ${[...hidden].join(", ")}`);
            }
            return out;
        }"""
    )
    return [Problem(workflow, text) for text in found]


def missing_model_urls(page: Page) -> dict[str, str]:
    """{model name: download URL} as the frontend's missing-model store holds them."""
    return page.evaluate(
        """() => {
            const pinia = document.querySelector('#vue-app').__vue_app__.config.globalProperties.$pinia;
            const store = pinia._s.get('missingModel');
            return Object.fromEntries((store?.missingModelCandidates ?? []).map(m => [m.name, m.url ?? null]));
        }"""
    )


def open_missing_models_panel(page: Page) -> float:
    """Open the errors panel from the "errors found" toast, show which nodes use the first model;
    returns the panel's left edge in CSS pixels."""
    page.get_by_text("View details").click()
    page.get_by_text("Missing Models").first.wait_for()
    expand = page.locator("[data-testid=missing-model-expand]")
    if expand.count():
        expand.first.click()
    time.sleep(SETTLE_S)
    return page.evaluate(
        """() => {
            let el = [...document.querySelectorAll('*')].find(e => e.childElementCount === 0 && e.textContent.trim() === 'Workflow Overview');
            while (el && el.getBoundingClientRect().height < innerHeight * 0.8) el = el.parentElement;
            return el ? el.getBoundingClientRect().left : innerWidth;
        }"""
    )


def is_relevant(kind: str, text: str) -> bool:
    """Console errors and warnings, less the noise of an offline page (fetches of remote assets)."""
    return kind in ("error", "warning") and not any(noise in text for noise in CONSOLE_NOISE)


# ----- files -----------------------------------------------------------------------------------


def save_png(raw_png: bytes, path: Path) -> int:
    """Write a screenshot as a palette PNG (UI screenshots have few colours: ~3x smaller, no visible
    change), with fewer colours and then smaller sizes until it fits MAX_PNG_BYTES; returns bytes."""
    image = Image.open(io.BytesIO(raw_png)).convert("RGB")
    for scale, colors in ((1.0, 256), (1.0, 128), (0.75, 256), (0.75, 128), (0.5, 256)):
        size = (round(image.width * scale), round(image.height * scale))
        sized = image.resize(size, Image.Resampling.LANCZOS) if scale != 1.0 else image
        buffer = io.BytesIO()
        sized.quantize(colors=colors, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(
            buffer, "PNG", optimize=True
        )
        if buffer.tell() <= MAX_PNG_BYTES:
            break
    path.write_bytes(buffer.getvalue())
    return buffer.tell()


def workflow_files(folder: Path, only: list[str]) -> list[Path]:
    files = sorted(folder.glob("*.json"))
    if only:
        unknown = set(only) - {f.stem for f in files}
        if unknown:
            raise ValueError(
                f"--only {sorted(unknown)}: no such workflow in {folder}; pick from {[f.stem for f in files]}"
            )
        files = [f for f in files if f.stem in only]
    return files


# ----- main ------------------------------------------------------------------------------------


def shoot(page: Page, files: list[Path], out: Path) -> list[Problem]:
    problems: list[Problem] = []
    console: list[str] = []  # what the frontend says while it loads a workflow (format complaints)
    page.on(
        "console", lambda m: console.append(f"{m.type}: {m.text}") if is_relevant(m.type, m.text) else None
    )
    for file in files:
        console.clear()
        load_workflow(page, file.stem, json.loads(file.read_text()), check_models=False)
        problems += [Problem(file.stem, f"console {line[:300]}") for line in console]
        dismiss_overlays(page)
        zoom = fit_graph(page)
        time.sleep(SETTLE_S)
        size = save_png(page.screenshot(), out / f"{file.stem}.png")
        problems += layout_problems(page, file.stem)
        print(f"{file.stem}.png: zoom {zoom:.2f}, {size / 1000:.0f} KB")
    for file in [f for f in files if f.stem == MISSING_MODELS_WORKFLOW]:
        load_workflow(page, file.stem, json.loads(file.read_text()), check_models=True)
        urls = missing_model_urls(page)
        lacking = sorted(name for name, url in urls.items() if not url)
        if not urls or lacking:
            raise RuntimeError(f"missing-model list has no URL for {lacking or 'any model'}: {urls}")
        panel_left = open_missing_models_panel(page)
        fit_graph(page, right_inset=VIEWPORT["width"] - panel_left + 10)
        time.sleep(SETTLE_S)
        size = save_png(page.screenshot(), out / MISSING_MODELS_PNG)
        print(f"{MISSING_MODELS_PNG}: {size / 1000:.0f} KB; models listed: {json.dumps(urls, indent=1)}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--comfyui", default=os.environ.get("COMFYUI_PATH", ""), help="ComfyUI checkout")
    parser.add_argument(
        "--python", default=sys.executable, help="Python that runs ComfyUI (default: this one)"
    )
    parser.add_argument("--chromium", default=CHROMIUM, help="browser executable")
    parser.add_argument("--out", type=Path, default=IMAGES, help="folder for the PNGs")
    parser.add_argument(
        "--workflows", type=Path, default=WORKFLOWS, help="folder of UI-format workflows (to try a layout)"
    )
    parser.add_argument("--only", nargs="*", default=[], help="workflow names (file stems)")
    args = parser.parse_args(argv)
    os.environ["COMFYUI_PATH"] = args.comfyui
    root = comfyui_root()
    files = workflow_files(args.workflows, args.only)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ltx2-screenshots-") as tmp:
        server = ComfyUIServer(root, make_layout(Path(tmp) / "base"), python=args.python)
        with server, sync_playwright() as playwright:
            server.post("/settings", SETTINGS)
            browser = playwright.chromium.launch_persistent_context(
                str(Path(tmp) / "chromium-profile"), executable_path=args.chromium, headless=True,
                args=list(CHROMIUM_FLAGS), viewport=VIEWPORT, device_scale_factor=DEVICE_SCALE,
            )  # fmt: skip
            try:
                page = browser.pages[0] if browser.pages else browser.new_page()
                open_app(page, server.url)
                problems = shoot(page, files, args.out)
            finally:
                browser.close()
    for problem in problems:
        print(f"layout: {problem.workflow}: {problem.text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
