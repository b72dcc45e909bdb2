"""ComfyUI node classes. Thin: validate, map ComfyUI types, delegate to workers.client."""

NODE_CLASS_MAPPINGS: dict[str, type] = {}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
