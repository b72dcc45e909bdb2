"""ComfyUI-LTX2-MultiGPU: LTX-2 on several GPUs of one machine, as ComfyUI nodes.

ComfyUI imports this file from custom_nodes/<folder>/; pip installs the same tree as `ltx2_mgpu`.
Importing it never imports ComfyUI: node classes reach ComfyUI's modules lazily.
"""

from .nodes import NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS

__all__ = ["NODE_CLASS_MAPPINGS", "NODE_DISPLAY_NAME_MAPPINGS"]
