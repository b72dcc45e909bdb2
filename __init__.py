"""ComfyUI-LTX2-MultiGPU: LTX-2 on several GPUs of one machine, as ComfyUI nodes.

ComfyUI imports this file from custom_nodes/<folder>/ and calls `comfy_entrypoint` (its V3 extension
API); pip installs the same tree as `ltx2_mgpu`. Importing it never imports ComfyUI: the node
classes (nodes/v3/) are imported when ComfyUI asks for them.
"""

if __package__:  # imported as a package: by ComfyUI (under its folder path) or as ltx2_mgpu

    async def comfy_entrypoint():
        """The extension ComfyUI loads (nodes/v3/): its node classes, and on_load's process hooks."""
        from .nodes.v3 import LTX2MultiGPUExtension

        return LTX2MultiGPUExtension()

    __all__ = ["comfy_entrypoint"]
# Else imported as a bare module: pytest sets up the checkout's folder as a package and, when the folder
# name is no Python identifier (e.g. "ComfyUI-LTX2-MultiGPU"), imports this file alone. Nothing to
# register then; the tests import the pack as ltx2_mgpu.
