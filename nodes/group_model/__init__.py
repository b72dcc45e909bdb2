"""The MGPU Loader's MODEL output (model.py: ComfyUI's model for the file, weightless; call.py: its
diffusion-model calls on the worker group). model.py imports ComfyUI: import it only inside ComfyUI."""
