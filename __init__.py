"""ComfyUI-LTX2-MultiGPU: LTX-2 on several GPUs of one machine, as ComfyUI nodes.

ComfyUI imports this file from custom_nodes/<folder>/; pip installs the same tree as `ltx2_mgpu`.
Importing it never imports ComfyUI: node classes reach ComfyUI's modules lazily.
"""

if __package__:  # imported as a package: by ComfyUI (under its folder path) or as ltx2_mgpu
    from .nodes import NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS
else:
    # Imported as a bare module: pytest sets up the checkout's folder as a package and, when the folder
    # name is no Python identifier (e.g. "ComfyUI-LTX2-MultiGPU"), imports this file alone. Nothing to
    # register then; the tests import the pack as ltx2_mgpu.
    NODE_CLASS_MAPPINGS: dict = {}
    NODE_DISPLAY_NAME_MAPPINGS: dict = {}

__all__ = ["NODE_CLASS_MAPPINGS", "NODE_DISPLAY_NAME_MAPPINGS"]
