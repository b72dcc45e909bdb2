"""TEST SHIM, never installed by users: a custom-node module the shared workflow server
(tests/workflow_server.py) puts into its throwaway ComfyUI base directory. One node,
LTX2MGPUFaultDrill, runs a fault drill of the pack's workers on an MGPU_MODEL's group, for
tests/test_comfyui_server_errors.py."""

import sys


def _manager():
    # ComfyUI imports a pack under its folder path (dots replaced): find our pack's manager module.
    suffix = "ComfyUI-LTX2-MultiGPU.workers.group.manager"
    return next(m for name, m in sys.modules.items() if name.endswith(suffix)).get_manager()


class LTX2MGPUFaultDrill:
    CATEGORY = "testing"
    RETURN_TYPES = ()
    OUTPUT_NODE = True
    FUNCTION = "run"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"mgpu_model": ("MGPU_MODEL",), "kind": (["ping", "raise_all"],)}}

    def run(self, mgpu_model, kind):
        if kind == "ping":
            _manager().run(mgpu_model, "ping", {})
        else:
            _manager().run(mgpu_model, "fault", {"kind": kind})
        return {}


NODE_CLASS_MAPPINGS = {"LTX2MGPUFaultDrill": LTX2MGPUFaultDrill}
