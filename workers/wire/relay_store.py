"""The rendezvous store of a rank on another machine (NOTE [machines] in wire/machines.py).

The ranks of the UI machine meet in a FileStore in the group's private folder. A rank on another
machine reaches the same store through its machine agent, which relays each call over the join
connection (token-checked) to the UI machine, where it runs on that FileStore. So no store listens
on a network port, and gloo's and NCCL's address exchange travels only over the checked connection.
"""

from __future__ import annotations

import itertools
import threading
from datetime import timedelta
from multiprocessing.connection import Connection

import torch.distributed as dist

from . import protocol


class RelayStore(dist.Store):
    """A c10d Store whose every call is answered by the UI machine's FileStore (one call at a time)."""

    def __init__(self, conn: Connection) -> None:
        super().__init__()
        self._conn = conn
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    def _call(self, op: str, **args):
        with self._lock:
            call_id = next(self._ids)
            self._conn.send_bytes(protocol.encode({"kind": "store", "id": call_id, "op": op, **args}))
            reply = protocol.decode(self._conn.recv_bytes())
        if reply.get("id") != call_id:
            raise RuntimeError(f"store call {op}: the relay answered call {reply.get('id')}, not {call_id}")
        if "error" in reply:
            raise dist.DistStoreError(f"store call {op} on the UI machine failed: {reply['error']}")
        return reply.get("value")

    def set(self, key: str, value) -> None:
        self._call("set", key=key, value=_bytes(value))

    def get(self, key: str) -> bytes:
        return self._call("get", key=key)

    def add(self, key: str, amount: int) -> int:
        return int(self._call("add", key=key, amount=int(amount)))

    def compare_set(self, key: str, expected, desired) -> bytes:
        return self._call("compare_set", key=key, expected=_bytes(expected), desired=_bytes(desired))

    def check(self, keys: list[str]) -> bool:
        return bool(self._call("check", keys=list(keys)))

    def wait(self, keys: list[str], timeout: timedelta | None = None) -> None:
        seconds = None if timeout is None else timeout.total_seconds()
        self._call("wait", keys=list(keys), timeout_s=seconds)

    def delete_key(self, key: str) -> bool:
        return bool(self._call("delete_key", key=key))

    def num_keys(self) -> int:
        return int(self._call("num_keys"))

    def set_timeout(self, timeout: timedelta) -> None:
        self._call("set_timeout", timeout_s=timeout.total_seconds())


def _bytes(value) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


def serve_store_call(store: dist.Store, call: dict) -> dict:
    """Run one relayed call on the UI machine's store: the reply message (the rank's RelayStore reads it)."""
    reply: dict = {"kind": "store_reply", "id": call.get("id")}
    try:
        op = call["op"]
        if op == "set":
            store.set(call["key"], call["value"])
        elif op == "get":
            reply["value"] = store.get(call["key"])
        elif op == "add":
            reply["value"] = store.add(call["key"], int(call["amount"]))
        elif op == "compare_set":
            reply["value"] = store.compare_set(call["key"], call["expected"], call["desired"])
        elif op == "check":
            reply["value"] = store.check(list(call["keys"]))
        elif op == "wait":
            timeout = call.get("timeout_s")
            if timeout is None:
                store.wait(list(call["keys"]))
            else:
                store.wait(list(call["keys"]), timedelta(seconds=float(timeout)))
        elif op == "delete_key":
            reply["value"] = store.delete_key(call["key"])
        elif op == "num_keys":
            reply["value"] = store.num_keys()
        elif op == "set_timeout":
            pass  # the UI machine's store keeps the group's timeout
        else:
            reply["error"] = f"unknown store call {op!r}"
    except Exception as exc:  # a timeout or a bad key: the rank raises it as the store's error
        reply["error"] = f"{type(exc).__name__}: {exc}"
    return reply
