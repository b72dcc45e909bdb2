"""The pack's nodes. Each module here is one node's work as a plain function (validate the inputs,
map ComfyUI's types, run the job on the worker group; see jobs.py), importable without ComfyUI;
nodes/v3/ holds ComfyUI's V3 classes that call them, imported only when ComfyUI loads the pack.
"""
