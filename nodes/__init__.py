"""ComfyUI node classes. Thin: validate, map ComfyUI types, delegate to workers (see jobs.py).

Every module here that defines NODE_CLASSES = {node id: (class, display name)} is registered.
"""

import importlib
import pkgutil
from pathlib import Path

from ..workers.group.manager import get_manager
from ..workers.group.shutdown import install_sigterm_handler
from . import comfy

NODE_CLASS_MAPPINGS: dict[str, type] = {}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}

for _info in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda m: m.name):
    _module = importlib.import_module(f"{__name__}.{_info.name}")
    for _node_id, (_cls, _display) in getattr(_module, "NODE_CLASSES", {}).items():
        if _node_id in NODE_CLASS_MAPPINGS:
            raise RuntimeError(f"node id {_node_id} defined twice")
        NODE_CLASS_MAPPINGS[_node_id] = _cls
        NODE_DISPLAY_NAME_MAPPINGS[_node_id] = _display

# Inside ComfyUI, "Unload Models" also stops the worker group (and frees its GPU memory).
# ComfyUI also unloads all models after an out-of-memory error and with --disable-smart-memory.
comfy.install_unload_hook(lambda: get_manager().unload("ComfyUI unloaded all models"))
# ComfyUI has no SIGTERM handler (systemd, docker stop): the process would end without atexit, leaving
# the workers' shared memory. Ctrl+C needs nothing here: it ends main.py, then atexit runs
# (workers/group/shutdown.py).
if comfy.in_comfyui():
    install_sigterm_handler()
